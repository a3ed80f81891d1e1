"""From a cell's source to a loaded library: find rnnc, compile the source to
a bundle (`rnnc compile`), build the bundle into a shared library with the
system C++ compiler, cached by content under $RNNC_CACHE. Two processes that
build the same entry at once (every DDP rank does) take a file lock; an entry
is built in a temporary folder and renamed into place, so a half-built one is
never loaded."""
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time

from . import _abi

HERE = os.path.dirname(os.path.abspath(__file__))


class CompileError(RuntimeError):
    """rnnc refused the source; the message is its diagnostics (file:line:col: error: ...)."""


def find_rnnc():
    """$RNNC, then rnnc on PATH, then the build of the repository this package sits in."""
    env = os.environ.get("RNNC")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise FileNotFoundError(f"$RNNC is {env!r}, which is not an executable file")
        return env
    on_path = shutil.which("rnnc")
    if on_path:
        return on_path
    repo_build = os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "rnnc")
    if os.path.isfile(repo_build) and os.access(repo_build, os.X_OK):
        return repo_build
    raise FileNotFoundError("no rnnc compiler: set $RNNC, put rnnc on PATH, or build the repository "
                            "(cmake -S . -B build -G Ninja && cmake --build build)")


def cache_root():
    for var, sub in (("RNNC_CACHE", ""), ("XDG_CACHE_HOME", "rnnc")):
        if os.environ.get(var):
            return os.path.join(os.environ[var], sub)
    return os.path.join(os.path.expanduser("~"), ".cache", "rnnc")


def _run(cmd, what):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise CompileError((r.stderr or r.stdout).strip() or f"{what} failed with exit code {r.returncode}")
    return r.stdout


def _dim_flags(dims):
    flags = []
    for name, value in sorted(dims.items()):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"dim {name} must be an int, not {type(value).__name__}")
        flags += ["-D", f"{name}={value}"]
    return flags


def is_path(source):
    """A path names a file; the text of a .rnn file has a line break or a `cell`/`model`."""
    if isinstance(source, os.PathLike):
        return True
    return "\n" not in source and "{" not in source


def compile_bundle(source, out_dir, *, entity=None, dims=None, target="cpu", forward_only=False, lengths=False,
                   dtype=None):
    """Runs `rnnc compile` on a path or on the text of a .rnn file; returns the bundle's folder.
    forward_only: `--forward-only`, a bundle without backward whose workspace keeps nothing for it;
    lengths: `--lengths`, forward takes each sequence's length; dtype: "bf16" or "f16" for
    `--dtype` (16-bit storage, float compute: docs/precision.md), None for the f32/f64 bundle."""
    rnnc = find_rnnc()
    flags = _dim_flags(dims or {}) + (["--entry", entity] if entity else [])
    if dtype:
        flags += ["--dtype", dtype]
    if forward_only:
        flags.append("--forward-only")
    if lengths:
        flags.append("--lengths")
    if is_path(source):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such .rnn file: {path}")
    else:
        path = os.path.join(out_dir, "cell.rnn")
        os.makedirs(out_dir, exist_ok=True)
        with open(path, "w") as f:
            f.write(source)
    _run([rnnc, "compile", path, "--target", target, "-o", os.path.join(out_dir, "bundle")] + flags, "rnnc compile")
    return os.path.join(out_dir, "bundle")


def manifest_of(bundle):
    found = [f for f in os.listdir(bundle) if f.endswith(".json")]
    if len(found) != 1:
        raise FileNotFoundError(f"{bundle} is not a bundle: it should hold one manifest (.json), it holds {len(found)}")
    with open(os.path.join(bundle, found[0])) as f:
        return json.load(f)


def _cxx():
    return os.environ.get("CXX", "c++")


_VERSIONS = {}


def _cxx_version(cxx):
    if cxx not in _VERSIONS:
        try:
            r = subprocess.run([cxx, "--version"], capture_output=True, text=True)
        except FileNotFoundError:
            r = None
        if r is None or r.returncode != 0:
            raise FileNotFoundError(f"no compiler: {cxx} --version failed (set $CXX, or $RNNC_NVCC for nvcc)")
        _VERSIONS[cxx] = r.stdout
    return _VERSIONS[cxx]


_INCLUDES = {}


def _runtime_include(rnnc):
    if rnnc not in _INCLUDES:
        cflags = _run([rnnc, "--print-cflags"], "rnnc --print-cflags").strip()
        _INCLUDES[rnnc] = cflags[2:] if cflags.startswith("-I") else cflags
    return _INCLUDES[rnnc]


def _headers_text(include):
    text = []
    folder = os.path.join(include, "rnnc")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".h"):
            with open(os.path.join(folder, name), "rb") as f:
                text.append(name.encode() + b"\n" + f.read())
    return b"\n".join(text)


SOURCE_SUFFIX = {"cpu": ".cpp", "cuda": ".cu"}


def read_bundle(bundle):
    """A bundle's manifest and its files ({name: bytes}: the .cpp or .cu and its header)."""
    manifest = manifest_of(bundle)
    target = manifest.get("target")
    if target not in SOURCE_SUFFIX:
        raise ValueError(f"{bundle} is a {target} bundle; this package builds cpu and cuda bundles")
    files = {}
    for name in os.listdir(bundle):
        if name.endswith((".cpp", ".cu", ".h")):
            with open(os.path.join(bundle, name), "rb") as f:
                files[name] = f.read()
    if sum(name.endswith(SOURCE_SUFFIX[target]) for name in files) != 1:
        raise FileNotFoundError(f"{bundle} should hold one {SOURCE_SUFFIX[target]} file")
    return manifest, files


NVCC = os.environ.get("RNNC_NVCC", "/usr/local/cuda/bin/nvcc")


def _nvcc():
    path = NVCC if os.path.isfile(NVCC) else shutil.which("nvcc")
    if not path:
        raise FileNotFoundError(f"no nvcc at {NVCC} or on PATH: a CUDA bundle needs the CUDA toolkit (set $RNNC_NVCC)")
    return path


def cached_build(key, lib_name, files, command, root=None):
    """The cache entry py-<key>/lib_name, built if missing: `files` ({name: bytes}) are written
    into a temporary folder, `command(folder, lib_path)` gives the build's argv (or a list of
    argvs, run in order), and the folder is renamed into place under an exclusive file lock.
    Returns the library's path and the entry's."""
    root = root or cache_root()
    os.makedirs(root, exist_ok=True)
    entry = os.path.join(root, "py-" + key)
    lib = os.path.join(entry, lib_name)
    if not os.path.isfile(lib):
        with open(entry + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it
            if not os.path.isfile(lib):
                tmp = tempfile.mkdtemp(prefix="py-" + key + ".", dir=root)
                try:
                    for name, text in files.items():
                        with open(os.path.join(tmp, name), "wb") as f:
                            f.write(text)
                    argvs = command(tmp, os.path.join(tmp, lib_name))
                    for argv in (argvs if isinstance(argvs[0], list) else [argvs]):
                        _run(argv, f"building {lib_name}")
                    shutil.rmtree(entry, ignore_errors=True)  # an entry left without its library
                    os.rename(tmp, entry)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
                prune_cache(root)
    if not os.path.isfile(lib):
        raise RuntimeError(f"the cache entry {entry} has no {lib_name}: remove it and try again")
    try:
        os.utime(entry)  # its last use, which prune_cache reads
    except OSError:
        pass
    return lib, entry


# The cache's own entries (the rnnc engine's, compiler/driver/Engine.cpp's cacheEntry, and this
# package's) and the temporary folders of builds.
_CACHE_ENTRY = re.compile(r"[0-9a-f]{16}|runtime-[0-9a-f]{16}|py-(runtime-)?[0-9a-f]{24}(\.lock)?")
_CACHE_TEMPORARY = re.compile(r"\.tmp-(runtime-)?[0-9a-f]{16}-[0-9a-f]+|py-(runtime-)?[0-9a-f]{24}\.[a-z0-9_]+")


def prune_cache(root):
    """After a fresh build, as rnnc's engine does (docs/codegen.md): the cache's own entries
    unused for $RNNC_CACHE_DAYS days (30 by default, 0 keeps them all) are removed, and the
    temporary folders of builds a day old; nothing else in the folder. An entry's last use is its
    folder's time."""
    days = os.environ.get("RNNC_CACHE_DAYS") or "30"
    if not days.isdigit() or len(days) > 5 or int(days) == 0:
        return
    now = time.time()
    for name in os.listdir(root):
        path = os.path.join(root, name)
        entry, building = _CACHE_ENTRY.fullmatch(name), _CACHE_TEMPORARY.fullmatch(name)
        if not (entry or building):
            continue  # not the cache's: a folder shared with anything else loses nothing else
        building = building and not entry
        lock = name.endswith(".lock")
        try:
            if not (lock or os.path.isdir(path)) or now - os.path.getmtime(path) <= 86400 * (1 if building else int(days)):
                continue
            if lock:
                os.remove(path)
            else:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def _prebuilt_runtime(cc, flags, include, headers):
    """The folder of what every CPU bundle built with `flags` shares (keyed by the runtime's
    `headers` text too), built once (as rnnc's own engine does, docs/codegen.md): rnnc/cpu.h precompiled and rnnc/panels.h's kernels compiled
    into panels.o. None where RNNC_PREBUILT=0 or it cannot be built (bundles then build alone)."""
    if os.environ.get("RNNC_PREBUILT") == "0":
        return None
    key = hashlib.sha256(b"\0".join([b"runtime", " ".join(flags).encode(), _cxx_version(cc).encode(),
                                     headers])).hexdigest()[:24]

    def command(tmp, out):
        os.makedirs(os.path.join(tmp, "rnnc"), exist_ok=True)
        header = os.path.join(include, "rnnc", "cpu.h")
        return [[cc] + flags + ["-DRNNC_PREBUILT_PANELS", "-x", "c++-header", header,
                                "-o", os.path.join(tmp, "rnnc", "cpu.h.gch")],
                [cc] + flags + ["-DRNNC_PANELS_INSTANTIATE", "-c", os.path.join(tmp, "panels.cpp"), "-o", out]]

    try:
        _, entry = cached_build("runtime-" + key, "panels.o", {"panels.cpp": b'#include "rnnc/cpu.h"\n'}, command)
    except CompileError:
        return None
    return entry


def build_library(manifest, files, dtype_bytes, arch="sm_90"):
    """A bundle built into a shared library (cached by content); returns its Library. A CPU
    bundle is built with the system C++ compiler, a CUDA bundle with nvcc for `arch`."""
    target = manifest.get("target", "cpu")
    src_name = [name for name in files if name.endswith(SOURCE_SUFFIX[target])][0]
    rnnc = find_rnnc()
    include = _runtime_include(rnnc)
    if target == "cuda":
        cc = _nvcc()
        flags = ["-std=c++17", "-O3", "-Xcompiler", "-fPIC", "-shared", "-I" + include, f"-arch={arch}"]
        libs = ["-lcublas", "-lcublasLt"]
    else:
        cc = _cxx()
        flags = ["-std=c++17", "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-I" + include]
        libs = ["-lopenblas"]
    if dtype_bytes == 8:
        flags.append("-DRNNC_REAL_DOUBLE")
    # Where OpenBLAS or the CUDA libraries are on an unusual machine, as rnnc's own engine takes them
    # (tools/gpu-check.sh points them at its pack's OpenBLAS on a GPU machine without Debian's).
    flags += shlex.split(os.environ.get("RNNC_CXXFLAGS", ""))
    libs += shlex.split(os.environ.get("RNNC_LDFLAGS", ""))
    headers = _headers_text(include)
    key = hashlib.sha256(b"\0".join([files[src_name], " ".join(flags + libs).encode(), _cxx_version(cc).encode(),
                                     headers])).hexdigest()[:24]
    lib_name = "lib" + manifest["model"] + ".so"
    prebuilt = _prebuilt_runtime(cc, flags, include, headers) if target == "cpu" else None

    def command(prebuilt):
        # The prebuilt runtime's folder goes before the runtime's, where GCC looks for rnnc/cpu.h.gch.
        before, after = (["-DRNNC_PREBUILT_PANELS", "-I" + prebuilt], [os.path.join(prebuilt, "panels.o")]) if prebuilt \
            else ([], [])
        return lambda tmp, out: [cc] + before + flags + [os.path.join(tmp, src_name), "-o", out] + after + libs

    try:
        lib, entry = cached_build(key, lib_name, files, command(prebuilt))
    except CompileError:
        if not prebuilt:
            raise
        # A damaged runtime folder (GCC refuses a truncated .gch): build alone, then drop it.
        lib, entry = cached_build(key, lib_name, files, command(None))
        shutil.rmtree(prebuilt, ignore_errors=True)
    try:
        return _abi.Library(lib, manifest["symbol"])
    except OSError as e:
        raise RuntimeError(f"cannot load the cached library {lib} ({e}): the cache entry is damaged; "
                           f"remove {entry} and it is built again") from None


def init_params(source_path, dims, entity, seed, out_dir):
    """`rnnc init --seed S` on the source: {name: (shape, list of floats)} as rnnc init writes them."""
    rnnc = find_rnnc()
    out = os.path.join(out_dir, "init.safetensors")
    flags = _dim_flags(dims or {}) + (["--entry", entity] if entity else [])
    _run([rnnc, "init", source_path, "--seed", str(seed), "-o", out] + flags, "rnnc init")
    return out


def build_ops_library():
    """python/rnnc/csrc/ops.cpp (the rnnc::forward and rnnc::backward ops in C++) built with the
    system C++ compiler against torch's headers and libraries, cached by content like a bundle
    (under $RNNC_OPS_CACHE where set, else the cache). Returns the library's path, for
    torch.ops.load_library."""
    import torch
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    # torch.utils.cpp_extension's include_paths() and library_paths() for the CPU, without
    # importing it (it looks for a CUDA runtime and warns where there is none).
    includes = [os.path.join(torch_dir, "include"), os.path.join(torch_dir, "include", "torch", "csrc", "api", "include")]
    libdirs = [os.path.join(torch_dir, "lib")]
    with open(os.path.join(HERE, "csrc", "ops.cpp"), "rb") as f:
        source = f.read()
    include = _runtime_include(find_rnnc())
    cxx = _cxx()
    flags = (["-std=c++20", "-O2", "-fPIC", "-shared", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"] +
             ["-I" + p for p in includes] + ["-I" + include])
    libs = [f"-L{d}" for d in libdirs] + ["-lc10", "-ltorch", "-ltorch_cpu"] + [f"-Wl,-rpath,{d}" for d in libdirs]
    key = hashlib.sha256(b"\0".join([source, " ".join(flags + libs).encode(), _cxx_version(cxx).encode(),
                                     torch.__version__.encode(), _headers_text(include)])).hexdigest()[:24]
    lib, _ = cached_build(key, "librnnc_torch_ops.so", {"ops.cpp": source},
                          lambda tmp, out: [cxx] + flags + [os.path.join(tmp, "ops.cpp"), "-o", out] + libs,
                          root=os.environ.get("RNNC_OPS_CACHE") or None)
    return lib
