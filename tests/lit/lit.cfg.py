# lit configuration for rnnc: every .rnn file here is a test (its RUN lines say
# how), plus .test files for what is not a .rnn file, and .rnnir files (graphs
# written by hand, with `// RUN:` lines) for rnnc-opt.
import os
import lit.formats

config.name = "rnnc"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".rnn", ".test", ".rnnir"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.rnnc_bin_dir, "tests", "lit")

# %rnnc-opt before %rnnc, which is its prefix.
config.substitutions.append(("%rnnc-opt", os.path.join(config.rnnc_bin_dir, "rnnc-opt")))
config.substitutions.append(("%rnnc", os.path.join(config.rnnc_bin_dir, "rnnc")))
config.substitutions.append(("%python", config.python))
config.substitutions.append(("%samples", os.path.join(config.rnnc_src_dir, "samples")))
# tests/cuda: the CUDA text checks (kernel_comments.py) the lit tests share.
config.substitutions.append(("%cuda_tests", os.path.join(config.rnnc_src_dir, "tests", "cuda")))
config.substitutions.append(("%runtime", os.path.join(config.rnnc_src_dir, "runtime")))
config.substitutions.append(("FileCheck", config.filecheck))
# Set when the build is instrumented by a sanitizer (see bad-input/Inputs/expect.py).
if "RNNC_SANITIZER" in os.environ:
    config.environment["RNNC_SANITIZER"] = os.environ["RNNC_SANITIZER"]
# Diagnostics must not be coloured in tests.
config.environment["NO_COLOR"] = "1"
# `not` and `FileCheck` come from LLVM 14's tools.
config.environment["PATH"] = os.pathsep.join(
    [os.path.dirname(config.filecheck), config.environment.get("PATH", os.environ.get("PATH", ""))])
# `cuda-device`: this machine has a GPU (a /dev/nvidia<N>, or `nvidia-smi -L`
# lists one), so tests of what rnnc does without one are UNSUPPORTED here.
def _has_cuda_device():
    import glob
    import subprocess
    if glob.glob("/dev/nvidia[0-9]*"):
        return True
    try:
        p = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=30)
        return p.returncode == 0 and "GPU" in p.stdout
    except (OSError, subprocess.SubprocessError):
        return False


if _has_cuda_device():
    config.available_features.add("cuda-device")
