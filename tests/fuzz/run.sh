#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time: the ctest fuzz-<name>.
# Fuzzes a copy of the kept corpus (the repo's corpus is not changed), with
# the leak checker on, 10 s per input and 2 GiB of memory at most; fails on any
# crash, sanitizer report, leak, timeout or out-of-memory, and prints the input
# that caused it (kept under $TMPDIR).
# Usage: run.sh FUZZER CORPUS_DIR SECONDS
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/rnnc-fuzz-XXXXXX")
mkdir -p "$work/corpus" "$work/artifacts"
cp "$corpus"/* "$work/corpus/"
dict=()
[ -f "$(dirname "$0")/$(basename "$corpus").dict" ] && dict=(-dict="$(dirname "$0")/$(basename "$corpus").dict")
status=0
"$fuzzer" "$work/corpus" "${dict[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -malloc_limit_mb=2048 -detect_leaks=1 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  >"$work/log" 2>&1 || status=$?
tail -n 25 "$work/log"
if [ "$status" -ne 0 ] || [ -n "$(ls -A "$work/artifacts")" ]; then
  echo "fuzz: $(basename "$fuzzer") failed (exit $status); inputs kept in $work/artifacts:"
  ls -l "$work/artifacts"
  exit 1
fi
rm -rf "$work"
