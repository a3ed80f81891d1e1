#!/usr/bin/env bash
# A long fuzzing run of one libFuzzer target (docs/reliability.md), as against
# the 60 s ctest fuzz-<name>: fork mode, so that a crash is kept and fuzzing
# goes on; at the end, the inputs that found new coverage are merged into the
# kept corpus (tests/fuzz/corpus/<name>) and the stats are printed.
# Usage: tools/fuzz.sh NAME SECONDS [FUZZER_BINARY]
#   NAME: compiler, arrays or checkpoint. The binary defaults to the one
#   tools/sanitize.sh builds (build-san/tests/fuzz/NAME_fuzz).
# Output in ${RNNC_FUZZ_WORK:-/tmp/rnnc-fuzz-long}/NAME: log, crashes in artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1 seconds=$2
fuzzer=${3:-build-san/tests/fuzz/${name}_fuzz}
work=${RNNC_FUZZ_WORK:-/tmp/rnnc-fuzz-long}/$name
mkdir -p "$work/corpus" "$work/artifacts"
cp "$fuzzer" "$work/fuzzer"  # a rebuild during the run does not change what runs
cp tests/fuzz/corpus/"$name"/* "$work/corpus/"
dict=()
[ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
start=$(date +%s)
"$work/fuzzer" "$work/corpus" "${dict[@]}" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -detect_leaks=1 \
  -artifact_prefix="$work/artifacts/" >"$work/log" 2>&1 || true
echo "fuzz $name: $(( $(date +%s) - start )) s; last status line:"
grep -E "^#[0-9]+" "$work/log" | tail -n 1
echo "crashes, timeouts, leaks and OOMs kept: $(ls "$work/artifacts" | wc -l) in $work/artifacts"
# Keep only the inputs that add coverage to the repo's corpus.
"$work/fuzzer" -merge=1 tests/fuzz/corpus/"$name" "$work/corpus" >"$work/merge.log" 2>&1 || true
tail -n 2 "$work/merge.log"
