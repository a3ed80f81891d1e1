#!/usr/bin/env bash
# Packs what tools/gpu-check.sh needs on a GPU machine that has CUDA, CMake,
# ninja, a C++ compiler and Python, but no package registry and none of
# Debian's -dev packages. Run it here, after tools/install-deps.sh; it writes
# one file, OUTDIR/deps.tar.xz (about 5 MB; OUTDIR defaults to build-gpu-pack,
# which git ignores as /build*/). Carry OUTDIR to the GPU machine; gpu-check.sh
# unpacks it there. Inside:
#   include/{fmt,CLI,nlohmann}   fmt (used header-only: FMT_HEADER_ONLY), CLI11, nlohmann-json
#   cmake/<package>/             configs for cmake -D<package>_DIR=...: INTERFACE targets on
#                                those headers (no compiled library, so nothing to match the
#                                GPU machine's compiler or libc)
#   blas/include, blas/lib       cblas.h and libopenblas.so for the CPU engine's generated code
#   blas/fallback                libgfortran and libquadmath, which libopenblas needs; used only
#                                where the GPU machine has none of its own
#   MANIFEST                     the Debian packages and versions these came from
# Usage: tools/gpu-pack.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-gpu-pack}
multiarch=$(gcc -print-multiarch)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# Headers: the Debian packages' files, as they are.
mkdir -p "$stage/include" "$stage/blas/include" "$stage/blas/lib" "$stage/blas/fallback"
cp -r /usr/include/fmt /usr/include/CLI /usr/include/nlohmann "$stage/include/"
blas_inc=/usr/include/$multiarch/openblas-pthread
cp "$blas_inc/cblas.h" "$blas_inc/openblas_config.h" "$stage/blas/include/"

# OpenBLAS, under the name the generated code links (-lopenblas) and the soname it records.
blas_lib=$(readlink -f "/usr/lib/$multiarch/libopenblas.so.0")
cp "$blas_lib" "$stage/blas/lib/libopenblas.so.0"
ln -s libopenblas.so.0 "$stage/blas/lib/libopenblas.so"
for so in libgfortran.so.5 libquadmath.so.0; do
  cp "$(readlink -f "/lib/$multiarch/$so")" "$stage/blas/fallback/$so"
done

# CMake configs: one INTERFACE target per package, its include dir relative to the config.
config() { # config PACKAGE TARGET VERSION [COMPILE_DEFINITION]
  local dir="$stage/cmake/$1"
  mkdir -p "$dir"
  cat >"$dir/$1Config.cmake" <<EOF
# $1 $3 for rnnc's build on a machine without the package (tools/gpu-pack.sh).
if(NOT TARGET $2)
  get_filename_component(_rnnc_pack_include "\${CMAKE_CURRENT_LIST_DIR}/../../include" ABSOLUTE)
  add_library($2 INTERFACE IMPORTED)
  set_target_properties($2 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "\${_rnnc_pack_include}"
                                       INTERFACE_COMPILE_DEFINITIONS "${4:-}")
endif()
EOF
  cat >"$dir/$1ConfigVersion.cmake" <<EOF
set(PACKAGE_VERSION "$3")
string(REGEX MATCH "^[0-9]+" _rnnc_major "\${PACKAGE_VERSION}")
if(PACKAGE_FIND_VERSION AND (PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION
                             OR NOT PACKAGE_FIND_VERSION_MAJOR STREQUAL _rnnc_major))
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
EOF
}
version() { dpkg-query -W -f='${Version}' "$1" | sed 's/[+~-].*//'; }
config fmt fmt::fmt "$(version libfmt-dev)" FMT_HEADER_ONLY=1
config CLI11 CLI11::CLI11 "$(version libcli11-dev)"
config nlohmann_json nlohmann_json::nlohmann_json "$(version nlohmann-json3-dev)"

{
  echo "rnnc GPU pack, made $(date -u +%F) on $(. /etc/os-release && echo "$PRETTY_NAME") by tools/gpu-pack.sh"
  dpkg-query -W -f='${Package} ${Version}\n' libfmt-dev libcli11-dev nlohmann-json3-dev \
    libopenblas0-pthread libopenblas-pthread-dev libgfortran5 gcc-12-base 2>/dev/null || true
} >"$stage/MANIFEST"

mkdir -p "$out"
tar -C "$stage" -cJf "$out/deps.tar.xz.tmp" .
mv "$out/deps.tar.xz.tmp" "$out/deps.tar.xz"
cp "$stage/MANIFEST" "$out/MANIFEST"
echo "gpu-pack: wrote $out/deps.tar.xz ($(du -h "$out/deps.tar.xz" | cut -f1)); carry $out"
