#!/usr/bin/env bash
# A dry run of tools/gpu-check.sh here, in conditions like the GPU machine's:
# the working tree as the device tool copies it (tracked files and untracked
# ones git does not ignore; no .git) plus build-gpu-pack/, an empty environment
# (env -i: PATH holds only /usr/bin, /bin and the folder of the caller's
# python3), and, in a private mount namespace (unshare -m; needs root), none
# of Debian's fmt, CLI11, nlohmann-json, Catch2 or OpenBLAS headers, CMake
# configs or libraries, nor llvm-14. Without a GPU, gpu-check.sh must build,
# check the CPU engine and exit 77 (GPU tests skipped, benchmarks not run).
# Then this shows which fmt/CLI11/json headers the build read (ninja's deps)
# and what the CPU engine's generated library links, without and with the pack.
# Usage: tools/gpu-dryrun.sh [gpu-check.sh's arguments]   (tools/gpu-pack.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build-gpu-pack/deps.tar.xz ] || { echo "gpu-dryrun: run tools/gpu-pack.sh first" >&2; exit 1; }
tmp=$(mktemp -d /tmp/rnnc-gpu-dryrun.XXXX)
git ls-files -z -co --exclude-standard | xargs -0 cp --parents -t "$tmp" 2>/dev/null || true
cp -r build-gpu-pack "$tmp/"
mkdir -p "$tmp/.home"
echo "gpu-dryrun: the working tree of $(git rev-parse --short HEAD) in $tmp"
ma=$(gcc -print-multiarch)
unshare -m --propagation private bash -s "$tmp" "$ma" "$(dirname "$(command -v python3)")" "$@" <<'EOF'
set -e
tmp=$1 ma=$2 py=$3
shift 3
for d in /usr/include/fmt /usr/include/CLI /usr/include/nlohmann /usr/include/catch2 \
         /usr/include/$ma/openblas-pthread /usr/lib/$ma/openblas-pthread /usr/lib/$ma/cmake/fmt \
         /usr/lib/$ma/cmake/openblas /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json /usr/lib/llvm-14; do
  if [ -d $d ]; then mount -t tmpfs -o ro none $d; fi
done
if [ -e /usr/lib/$ma/libfmt.so ]; then mount --bind /dev/null "$(readlink -f /usr/lib/$ma/libfmt.so)"; fi
echo "hidden: /usr/include/fmt holds $(ls /usr/include/fmt | wc -l) files;" \
     "cblas.h $(test -e /usr/include/$ma/cblas.h && echo present || echo absent);" \
     "libopenblas.so.0 $(test -e /usr/lib/$ma/libopenblas.so.0 && echo present || echo absent)"
cd "$tmp"
rc=0
env -i PATH="$py:/usr/bin:/bin" HOME="$tmp/.home" bash tools/gpu-check.sh "$@" || rc=$?
echo "gpu-dryrun: gpu-check.sh exited $rc"
echo "--- the fmt, CLI11 and json headers the build read (ninja -t deps):"
ninja -C build-gpu -t deps | grep -oE '/[^ ]*/(fmt|CLI|nlohmann)/[^ /]*\.hp?p?' |
  sed -E 's#/(fmt|CLI|nlohmann)/[^/]*$#/\1/#' | sort | uniq -c
lib=$(find "$tmp/.home/.cache/rnnc" -name 'lib*.so' | head -1)
echo "--- the CPU engine's generated library ($lib) links, without the pack:"
ldd "$lib" | grep -E 'blas|gfortran' || true
echo "--- with it:"
LD_LIBRARY_PATH=$tmp/build-gpu/pack/blas/lib ldd "$lib" | grep -E 'blas|gfortran'
EOF
