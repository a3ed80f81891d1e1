#!/usr/bin/env bash
# Runs the no-device test program after checking that neither it nor the
# NVRTC checker needs the driver library (libcuda): a program that links the
# driver stub does not start on a machine without a driver.
# Usage: no_device.sh NO_DEVICE_PROGRAM [OTHER_PROGRAM...]
set -uo pipefail
program=$1
for p in "$@"; do
  needed=$(readelf -d "$p" | grep NEEDED) || { echo "FAILED: readelf -d $p"; exit 1; }
  if grep -q 'libcuda\.so' <<<"$needed"; then
    echo "FAILED: $p needs the driver library:"
    echo "$needed"
    exit 1
  fi
  echo "$(basename "$p") needs: $(sed -n 's/.*\[\(.*\)\]/\1/p' <<<"$needed" | tr '\n' ' ')"
done
exec "$program"
