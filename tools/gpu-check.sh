#!/usr/bin/env bash
# The one script to run on a machine with a GPU (DESIGN.md §7, issue 6), from
# anywhere in the repository; it needs CUDA, CMake, ninja, a C++ compiler and
# python3 with numpy (and PyTorch for its column), no package registry:
#   build   rnnc (Release, the rnnc target alone: no test dependencies), against
#           the headers and CMake configs of build-gpu-pack/deps.tar.xz where the
#           machine has no fmt, CLI11 or nlohmann-json (tools/gpu-pack.sh makes
#           it, here); or --rnnc PATH, prebuilt
#   cpu     one `rnnc bench --device cpu`: the CPU engine builds generated C++
#           with -lopenblas at run time (the pack's OpenBLAS, by RNNC_CXXFLAGS,
#           RNNC_LDFLAGS and LD_LIBRARY_PATH), as the GPU tests need
#   tests   tests/gpu/run.py: CUDA results against CPU results on every sample
#   persist the same with every loop forced persistent (one cooperative kernel a loop,
#           docs/cuda.md#persistent-loops), and again forced fused (a kernel a step per
#           product), then bench/gpu/persistent.py: LSTM and GRU, persistent and fused
#           against step by step, f32 and bf16 (tensor cores), B 1 4 16 64, H 768 256,
#           and the cost model's pick;
#           written to docs/benchmarks/gpu-persistent.md
#   goals   bench/gpu/goals.py: issue 23's goals, each row against its goal (the LSTM's
#           persistent step at H = 768, B = 16 in bf16; rnnc against cuDNN for B 1..256,
#           H 256 768 1024, T 1024 and 100, f32 bf16 f16; the peephole and layer-norm
#           LSTMs against PyTorch eager and compiled at T = 1024), the deciding rows
#           first, 90 s of rows; written to docs/benchmarks/gpu-goals.md
#   abi     tests/cuda/no_device.cpp on the LSTM --jit bundle: ABI v3 on a GPU (the
#           caller's stream, forward's results, two threads at once)
#   lengths tools/bench-lengths.sh on CUDA: an LSTM with lengths uniform in [T/4, T] against it padded
#   scan    bench/gpu/time_parallel.py: loops in parallel over time (minGRU's scan,
#           IndRNN's Newton) against the same loops step by step, T = 2^7 .. 2^16,
#           and their error; written to docs/benchmarks/gpu-time-parallel.md
#   checks  tests/gpu/device_checks.py: compute-sanitizer (memcheck, racecheck,
#           synccheck) and ncu's count of launches per step, after the tests pass
#   rnnc    bench/gpu/rnnc_bench.py: rnnc bench --device cuda, lstm/gru/peephole,
#           B in 1 16 64 256, H in 256 1024, T = 100
#   torch-layer  the PyTorch package (python/rnnc) on CUDA: python/tests/test_torch_cuda.py,
#           then the layer against nn.LSTM (cuDNN), tools/bench-torch.py --cuda
#   bf16    bench/gpu/bf16.py: --dtype bf16 LSTM/GRU against cuDNN in bf16, B 16 64 256,
#           H 1024 2048, and ncu's tensor-pipe count in the GEMMs; docs/benchmarks/gpu-bf16.md
#   train   tests/gpu/train.py: rnnc train --device cuda on the adding problem in f32, bf16
#           and f16 (float32 master weights, loss scaling): each learns it, 16 bits within 1.2x
#   torch   bench/gpu/torch_rnn.py: cuDNN LSTM/GRU, peephole eager and compiled
#   report  bench/gpu/report.py: the table, printed last, and written below the
#           marker of docs/benchmarks/gpu.md
# Each phase prints its time; the benchmarks start no row past a deadline, so
# the whole fits in 8 minutes on an H200. Logs, JSON and gpu.md go to $OUT when
# it is set (the device tool's folder), else to BUILD/out.
# Exit: 0 tests passed and benchmarks measured; 77 no GPU (built and checked the
# CPU engine; GPU tests skipped, benchmarks not run); 1 a failure.
# Usage: tools/gpu-check.sh [--pack DIR] [--rnnc PATH] [--build DIR] [--quick] [--scan-only]
#   --scan-only: build, cpu, tests and scan; not the rnnc/torch benchmarks or the checks.
#   RNNC_COMMIT=<commit> names the source in gpu.md where there is no .git.
set -uo pipefail
cd "$(dirname "$0")/.."
pack=build-gpu-pack build=build-gpu rnnc="" quick=0 scan_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --pack) pack=$2; shift 2 ;;
    --rnnc) rnnc=$(realpath "$2"); shift 2 ;;
    --build) build=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --scan-only) scan_only=1; shift ;;
    *) echo "usage: tools/gpu-check.sh [--pack DIR] [--rnnc PATH] [--build DIR] [--quick] [--scan-only]" >&2; exit 2 ;;
  esac
done
batch="1 16 64 256" hidden="256 1024" runs=20
if [ $quick = 1 ]; then batch="1 64" hidden="256" runs=10; fi
deadline=420 # seconds: no benchmark row starts after this (8 min = 480 s; the checks get the rest)
out=${OUT:-$build/out}
mkdir -p "$build" "$out"
out=$(realpath "$out")
export PYTHONUNBUFFERED=1 # a run cut short still shows what it printed
command -v nvcc >/dev/null || [ ! -x /usr/local/cuda/bin/nvcc ] || PATH=/usr/local/cuda/bin:$PATH
failed=0 summary=()
phase_start=$SECONDS
phase() { # phase NAME RESULT: print and keep the time of the phase just ended
  summary+=("$(printf '%-7s %4d s  %s' "$1" $((SECONDS - phase_start)) "$2")")
  echo "== $1: $2 ($((SECONDS - phase_start)) s; $SECONDS s in all)"
  phase_start=$SECONDS
}
echo "== gpu-check: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"

# ---- build
deps=$(realpath "$build")/pack
if [ -f "$pack/deps.tar.xz" ]; then
  rm -rf "$deps" && mkdir -p "$deps" && tar -C "$deps" -xJf "$pack/deps.tar.xz"
  echo "pack: $(head -1 "$deps/MANIFEST")"
else
  echo "pack: none at $pack/deps.tar.xz: the machine's own fmt, CLI11, nlohmann-json and OpenBLAS" \
       "(tools/gpu-pack.sh makes one)"
fi
if [ -z "$rnnc" ]; then
  hints=()
  for p in fmt CLI11 nlohmann_json; do
    [ -d "$deps/cmake/$p" ] && hints+=("-D${p}_DIR=$deps/cmake/$p")
  done
  if cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DRNNC_WITH_CLANG=OFF "${hints[@]}" >"$out/build.log" 2>&1 &&
     cmake --build "$build" --target rnnc >>"$out/build.log" 2>&1; then
    rnnc=$(realpath "$build/rnnc")
    phase build "ok: $rnnc ($(grep -o 'CUDA toolkit [0-9.]*' "$out/build.log" | head -1 || echo 'no CUDA toolkit'))"
  else
    tail -40 "$out/build.log"
    phase build "FAILED (the log: $out/build.log)"
    printf '%s\n' "${summary[@]}"
    exit 1
  fi
else
  phase build "skipped: --rnnc $rnnc"
fi

# ---- the CPU engine, with the pack's OpenBLAS where the machine has none
blas_env=()
if [ -d "$deps/blas" ]; then
  ld=$deps/blas/lib
  if ldd "$ld/libopenblas.so.0" | grep -q "not found"; then ld=$ld:$deps/blas/fallback; fi
  blas_env=("RNNC_CXXFLAGS=-I$deps/blas/include ${RNNC_CXXFLAGS:-}" "RNNC_LDFLAGS=-L$deps/blas/lib ${RNNC_LDFLAGS:-}"
            "LD_LIBRARY_PATH=$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi
with_blas() { env "${blas_env[@]}" "$@"; }
if with_blas "$rnnc" bench samples/lstm.rnn -D I=8 -D H=8 --batch 2 --seq 5 --runs 1 --warmup 0 --device cpu \
     --no-baseline >>"$out/build.log" 2>&1; then
  phase cpu "ok: the CPU engine builds and runs generated code"
else
  tail -20 "$out/build.log"
  phase cpu "FAILED: the CPU engine (the GPU tests compare against it)"
  failed=1
fi

# ---- the GPU tests
with_blas timeout -k 10 300 python3 tests/gpu/run.py --rnnc "$rnnc" --samples samples 2>&1 | tee "$out/tests.log"
tests_rc=${PIPESTATUS[0]}
case $tests_rc in
  0) phase tests "passed: $(tail -1 "$out/tests.log")" ;;
  77) phase tests "SKIPPED: $(grep -m1 '^SKIPPED' "$out/tests.log" | cut -c10-)" ;;
  124) phase tests "FAILED: over 300 s"; failed=1 ;;
  *) phase tests "FAILED: $(tail -1 "$out/tests.log")"; failed=1 ;;
esac

# ---- persistent loops: every sample with each loop one cooperative kernel, against the CPU;
#      then timed against the loops step by step (docs/cuda.md#persistent-loops)
if [ "$tests_rc" != 77 ] && [ $scan_only = 0 ]; then
  RNNC_CUDA_LOOPS=persistent RNNC_LOOP_REPORT=1 with_blas timeout -k 10 150 python3 tests/gpu/run.py --rnnc "$rnnc" \
    --samples samples >"$out/persist-tests.log" 2>&1
  persist_rc=$?
  fell_back=$(grep -c "step by step" "$out/persist-tests.log")
  if [ $persist_rc = 0 ] && [ "$fell_back" = 0 ]; then
    persist_result="tests passed persistent ($(grep -c 'persistent,' "$out/persist-tests.log") loop runs)"
  else
    persist_result="tests FAILED persistent (exit $persist_rc, $fell_back loops step by step; $out/persist-tests.log)"
    failed=1
  fi
  # Forced fused: every loop local to units runs a kernel a step per product (the others step by step).
  RNNC_CUDA_LOOPS=fused RNNC_LOOP_REPORT=1 with_blas timeout -k 10 150 python3 tests/gpu/run.py --rnnc "$rnnc" \
    --samples samples >"$out/fused-tests.log" 2>&1
  fused_rc=$?
  fell_back=$(grep "step by step" "$out/fused-tests.log" | grep -vc "not local to units")
  if [ $fused_rc = 0 ] && [ "$fell_back" = 0 ]; then
    persist_result+=", fused ($(grep -c 'fused,' "$out/fused-tests.log") loop runs)"
  else
    persist_result+="; tests FAILED fused (exit $fused_rc, $fell_back loops step by step; $out/fused-tests.log)"
    failed=1
  fi
  # Forced step by step: every loop's per-step kernels (one row per block, four elements a thread
  # where the rows allow: docs/cuda.md#kernels-compilercodegencudaprintercpp) after cuBLAS.
  RNNC_CUDA_LOOPS=stepwise with_blas timeout -k 10 150 python3 tests/gpu/run.py --rnnc "$rnnc" \
    --samples samples >"$out/stepwise-tests.log" 2>&1
  stepwise_rc=$?
  if [ $stepwise_rc = 0 ]; then
    persist_result+=", step by step ($(tail -1 "$out/stepwise-tests.log"))"
  else
    persist_result+="; tests FAILED step by step (exit $stepwise_rc; $out/stepwise-tests.log)"
    failed=1
  fi
  with_blas timeout -k 10 150 python3 bench/gpu/persistent.py --rnnc "$rnnc" --budget-s 100 --hidden 768 256 \
    >"$out/persistent.md" 2>"$out/persistent.log"
  case $? in
    0) persist_result+="; timed: docs/benchmarks/gpu-persistent.md" ;;
    *) persist_result+="; timing FAILED ($out/persistent.log)"; failed=1 ;;
  esac
  { echo "# GPU: persistent and fused loops against step by step"; echo
    echo "Measured by \`bash tools/gpu-check.sh\` on" \
         "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo 'a GPU')," \
         "source ${RNNC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}, $(date -u +%F), T = 100," \
         "medians of 10 runs ([cuda.md](../cuda.md#persistent-loops) describes the kernels)."; echo
    cat "$out/persistent.md"; } >docs/benchmarks/gpu-persistent.md
  cp docs/benchmarks/gpu-persistent.md "$out/gpu-persistent.md"
  phase persist "$persist_result"
fi

# ---- issue 23's goals: each against its goal, the deciding rows first (bench/gpu/goals.py)
if [ "$tests_rc" = 0 ] && [ $scan_only = 0 ] && python3 -c "import torch" 2>/dev/null; then
  with_blas timeout -k 10 200 python3 bench/gpu/goals.py --rnnc "$rnnc" --budget-s 90 \
    >"$out/goals.md" 2>"$out/goals.log"
  goals_rc=$?
  { echo "# GPU: the persistent loops' goals (issue 23)"; echo
    echo "Measured by \`bash tools/gpu-check.sh\` (\`bench/gpu/goals.py\`, 90 s of rows: those past it say so), source" \
         "${RNNC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}, $(date -u +%F)" \
         "([cuda.md](../cuda.md#persistent-loops) describes the kernels)."; echo
    cat "$out/goals.md"; } >docs/benchmarks/gpu-goals.md
  cp docs/benchmarks/gpu-goals.md "$out/gpu-goals.md"
  case $goals_rc in
    0) phase goals "measured: docs/benchmarks/gpu-goals.md ($(grep -c 'met' "$out/goals.md") met, $(grep -c 'missed' "$out/goals.md") missed)" ;;
    124) phase goals "FAILED: over 200 s ($out/goals.log)"; failed=1 ;;
    *) phase goals "FAILED: exit $goals_rc (the table says which rows; $out/goals.log)"; failed=1 ;;
  esac
else
  phase goals "not run: $([ "$tests_rc" = 0 ] && echo 'no PyTorch or --scan-only' || echo 'the GPU tests did not pass')"
fi

# ---- the C ABI (v3) on the device: tests/cuda/no_device.cpp against the LSTM as
#      a --jit bundle: the caller's stream, results written by forward, two
#      threads with their own workspaces and streams at once
abi=$build/abi
cuda_root=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
if rm -rf "$abi" && "$rnnc" compile samples/lstm.rnn --target cuda --jit -o "$abi" >"$out/abi.log" 2>&1 &&
   c++ -std=c++17 -O2 -pthread -I"$abi" -Iruntime/include -I"$cuda_root/include" tests/cuda/no_device.cpp \
     "$abi/LSTM.cpp" -L"$cuda_root/lib64" -Wl,-rpath,"$cuda_root/lib64" -lcudart -lcublas -lcublasLt -lnvrtc \
     -o "$abi/no_device" >>"$out/abi.log" 2>&1; then
  if timeout -k 5 120 "$abi/no_device" >>"$out/abi.log" 2>&1; then
    phase abi "passed: $(grep -m1 'GPU\|no GPU' "$out/abi.log"); $(grep -m1 'two threads' "$out/abi.log" || true)"
  else
    phase abi "FAILED: $(tail -3 "$out/abi.log" | tr '\n' ' ')"; failed=1
  fi
else
  tail -20 "$out/abi.log"
  phase abi "FAILED to build ($out/abi.log)"; failed=1
fi

# ---- sequences of their own lengths: lengths uniform in [T/4, T] against the batch padded
#      (docs/lengths.md: each step's cuBLAS calls cut to the sequences still running)
if [ "$tests_rc" != 77 ]; then
  if with_blas timeout -k 10 150 bash tools/bench-lengths.sh "$rnnc" 3 cuda >"$out/lengths.txt" 2>&1; then
    cat "$out/lengths.txt"
    phase lengths "measured: $out/lengths.txt (forward ms, fwd+bwd ms per round; uniform against full)"
  else
    phase lengths "FAILED: $(tail -2 "$out/lengths.txt" | tr '\n' ' ')"; failed=1
  fi
fi

# ---- loops in parallel over time against the same loops step by step
scan_budget=$([ $scan_only = 1 ] && echo 300 || echo 100)
scan_args=(--budget-s $scan_budget --json "$out/time-parallel.json")
[ $quick = 1 ] && scan_args+=(--quick)
with_blas timeout -k 10 $((scan_budget + 200)) python3 bench/gpu/time_parallel.py --rnnc "$rnnc" "${scan_args[@]}" \
  >"$out/time-parallel.md" 2> >(tee "$out/time-parallel.log" >&2)
scan_rc=$?
case $scan_rc in
  0|1)
    { echo "# GPU: loops in parallel over time"; echo
      echo "Measured by \`bash tools/gpu-check.sh$([ $quick = 1 ] && echo ' --quick')\` on" \
           "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo 'a GPU')," \
           "source ${RNNC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}, $(date -u +%F)" \
           "([cuda.md](../cuda.md#loops-in-parallel-over-time) describes the kernels)."; echo
      cat "$out/time-parallel.md"; } >docs/benchmarks/gpu-time-parallel.md
    cp docs/benchmarks/gpu-time-parallel.md "$out/gpu-time-parallel.md"
    if [ $scan_rc = 0 ]; then phase scan "measured: docs/benchmarks/gpu-time-parallel.md"
    else phase scan "FAILED: rows failed (the table says which; $out/time-parallel.log)"; failed=1; fi ;;
  77) phase scan "not run: no GPU" ;;
  *) phase scan "FAILED: exit $scan_rc ($out/time-parallel.log)"; failed=1 ;;
esac
if [ $scan_only = 1 ]; then
  echo
  echo "== phases (all: $SECONDS s); files: $out"
  printf '%s\n' "${summary[@]}"
  if [ $scan_rc = 0 ] || [ $scan_rc = 1 ]; then echo; cat "$out/time-parallel.md"; fi
  if [ $failed = 1 ]; then exit 1; fi
  if [ "$tests_rc" = 77 ] || [ $scan_rc = 77 ]; then exit 77; fi
  exit 0
fi

# ---- the PyTorch package on CUDA: its tests (nvcc builds ~8 bundles), then one timing against cuDNN (at most 240 s)
if python3 -c "import torch" 2>/dev/null; then
  torch_env=(RNNC="$rnnc" RNNC_NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
  with_blas env "${torch_env[@]}" timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider -rs \
    python/tests/test_torch_cuda.py >"$out/torch-layer.log" 2>&1
  layer_rc=$?
  tail -3 "$out/torch-layer.log"
  layer_summary=$(tail -1 "$out/torch-layer.log" | head -c 160)
  if [ $layer_rc = 0 ] && grep -q "SKIPPED.*no CUDA device" "$out/torch-layer.log" && [ "$tests_rc" != 77 ]; then
    phase torch-layer "FAILED: GPU tests skipped on a machine with a GPU ($out/torch-layer.log)"; failed=1
  elif [ $layer_rc = 0 ]; then
    left=$((deadline > SECONDS ? deadline - SECONDS : 0))
    if [ $left -ge 60 ] && with_blas env "${torch_env[@]}" timeout -k 5 $((left < 90 ? left : 90)) \
         python3 tools/bench-torch.py --cuda --runs 30 >"$out/torch-layer.md" 2>>"$out/torch-layer.log"; then
      cat "$out/torch-layer.md"
      phase torch-layer "passed: $layer_summary; timing: $out/torch-layer.md"
    else
      phase torch-layer "passed: $layer_summary; timing not run or failed ($left s left)"
    fi
  elif [ $layer_rc = 124 ]; then
    phase torch-layer "FAILED: over 150 s ($out/torch-layer.log)"; failed=1
  else
    phase torch-layer "FAILED: $layer_summary"; failed=1
  fi
else
  phase torch-layer "not run: no PyTorch"
fi

# ---- bf16 (issue 21): rnnc's --dtype bf16 LSTM/GRU against cuDNN's in bf16, and ncu's tensor-pipe count
if [ "$tests_rc" = 0 ]; then
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  if with_blas timeout -k 10 240 python3 bench/gpu/bf16.py --rnnc "$rnnc" --runs 10 --budget-s 120 \
       >"$out/bf16.md" 2>"$out/bf16.log"; then
    { echo "# bf16 on the GPU: rnnc against cuDNN"; echo
      echo "\`python3 bench/gpu/bf16.py\` from \`bash tools/gpu-check.sh\`, $(date -u +%Y-%m-%d), ${gpu_name:-GPU}:"
      echo "forward + backward, T = 100, I = H, medians of 10 runs (docs/precision.md)."; echo
      cat "$out/bf16.md"; } >docs/benchmarks/gpu-bf16.md
    cp docs/benchmarks/gpu-bf16.md "$out/gpu-bf16.md"
    phase bf16 "measured: docs/benchmarks/gpu-bf16.md"
  else
    phase bf16 "FAILED or incomplete: $out/bf16.md, $out/bf16.log"; failed=1
  fi
else
  phase bf16 "not run: the GPU tests did not pass"
fi

# ---- training on the device in every dtype (issue 21): float32 master weights, 16-bit storage
if [ "$tests_rc" = 0 ]; then
  with_blas timeout -k 10 120 python3 tests/gpu/train.py --rnnc "$rnnc" >"$out/train.log" 2>&1
  case $? in
    0) phase train "passed: $(grep -c '^PASS' "$out/train.log") runs learn the adding problem ($out/train.log)" ;;
    *) phase train "FAILED: $(grep -m2 '^FAIL\|^SKIPPED' "$out/train.log" | tr '\n' ' ')"; failed=1 ;;
  esac
else
  phase train "not run: the GPU tests did not pass"
fi

# ---- the benchmarks: rnnc, then PyTorch, one after the other on the GPU
grid=(--batch $batch --hidden $hidden --seq 100 --runs $runs --warmup 5)
left=$((deadline > SECONDS ? deadline - SECONDS : 0))
with_blas python3 bench/gpu/rnnc_bench.py --rnnc "$rnnc" "${grid[@]}" --graphs --budget-s $((left * 2 / 5)) \
  >"$out/rnnc.json" 2> >(tee "$out/bench.log" >&2)
rc=$?
case $rc in
  0) phase rnnc "measured" ;;
  77) phase rnnc "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"])' <"$out/rnnc.json")" ;;
  *) phase rnnc "FAILED: rows failed or not run in time (the table says which)"; failed=1 ;;
esac
python3 bench/gpu/torch_rnn.py "${grid[@]}" --budget-s $((deadline > SECONDS ? deadline - SECONDS : 0)) \
  >"$out/torch.json" 2> >(tee -a "$out/bench.log" >&2)
case $? in
  0) phase torch "measured" ;;
  77) phase torch "not run: $(python3 -c 'import json,sys; print(json.load(sys.stdin)["error"])' <"$out/torch.json")" ;;
  *) phase torch "FAILED: see $out/bench.log"; failed=1 ;;
esac

# ---- compute-sanitizer and ncu's launch count, in the time the benchmarks left
checks_rc=77 left=$((470 - SECONDS))
if [ "$tests_rc" = 0 ] && [ $left -ge 45 ]; then
  with_blas timeout -k 5 $left python3 tests/gpu/device_checks.py --rnnc "$rnnc" --samples samples >"$out/checks.md" \
    2> >(tee "$out/checks.log" >&2)
  checks_rc=$?
  case $checks_rc in
    0) phase checks "clean, or n/a where a tool does not run: $out/checks.md" ;;
    124) phase checks "incomplete: out of time after $left s (what ran: $out/checks.log)"; cp "$out/checks.log" "$out/checks.md" ;;
    *) phase checks "FAILED: a sanitizer found errors ($out/checks.log)"; failed=1 ;;
  esac
else
  phase checks "not run: $([ "$tests_rc" = 0 ] && echo "$left s left" || echo 'the GPU tests did not pass')"
fi

# ---- the table
command="bash tools/gpu-check.sh$([ $quick = 1 ] && echo ' --quick')"
python3 bench/gpu/report.py --rnnc-json "$out/rnnc.json" --torch-json "$out/torch.json" \
  --doc docs/benchmarks/gpu.md --command "$command" ${RNNC_COMMIT:+--commit "$RNNC_COMMIT"} >"$out/table.txt" 2>&1
report_rc=$?
if [ $report_rc = 0 ]; then
  [ -s "$out/checks.md" ] && cat "$out/checks.md" >>docs/benchmarks/gpu.md
  cp docs/benchmarks/gpu.md "$out/gpu.md"
  phase report "docs/benchmarks/gpu.md rewritten (a copy: $out/gpu.md)"
elif [ $report_rc = 77 ]; then
  phase report "no GPU: docs/benchmarks/gpu.md left as it was"
else
  phase report "FAILED: $(tail -1 "$out/table.txt")"
fi
echo
echo "== phases (all: $SECONDS s); files: $out"
printf '%s\n' "${summary[@]}"
echo
cat "$out/table.txt"
if [ $failed = 1 ] || { [ $report_rc != 0 ] && [ $report_rc != 77 ]; }; then exit 1; fi
if [ "$tests_rc" = 77 ] || [ $report_rc = 77 ]; then exit 77; fi
exit 0
