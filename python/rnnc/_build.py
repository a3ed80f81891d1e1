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
import shutil
import subprocess
import tempfile

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


def compile_bundle(source, out_dir, *, entity=None, dims=None, target="cpu"):
    """Runs `rnnc compile` on a path or on the text of a .rnn file; returns the bundle's folder."""
    rnnc = find_rnnc()
    flags = _dim_flags(dims or {}) + (["--entry", entity] if entity else [])
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


def _cxx_version(cxx):
    r = subprocess.run([cxx, "--version"], capture_output=True, text=True)
    if r.returncode != 0:
        raise FileNotFoundError(f"no C++ compiler: {cxx} --version failed (set $CXX)")
    return r.stdout


def _runtime_include(rnnc):
    cflags = _run([rnnc, "--print-cflags"], "rnnc --print-cflags").strip()
    return cflags[2:] if cflags.startswith("-I") else cflags


def _headers_text(include):
    text = []
    folder = os.path.join(include, "rnnc")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".h"):
            with open(os.path.join(folder, name), "rb") as f:
                text.append(name.encode() + b"\n" + f.read())
    return b"\n".join(text)


def read_bundle(bundle):
    """A CPU bundle's manifest and its files ({name: bytes}: the .cpp and its header)."""
    manifest = manifest_of(bundle)
    if manifest.get("target") != "cpu":
        raise ValueError(f"{bundle} is a {manifest.get('target')} bundle; this package builds cpu bundles")
    files = {}
    for name in os.listdir(bundle):
        if name.endswith((".cpp", ".h")):
            with open(os.path.join(bundle, name), "rb") as f:
                files[name] = f.read()
    if sum(name.endswith(".cpp") for name in files) != 1:
        raise FileNotFoundError(f"{bundle} should hold one .cpp file")
    return manifest, files


def build_library(manifest, files, dtype_bytes):
    """A CPU bundle built into a shared library (cached by content); returns its Library."""
    cpp = [name for name in files if name.endswith(".cpp")]
    source = files[cpp[0]]
    rnnc = find_rnnc()
    include = _runtime_include(rnnc)
    cxx = _cxx()
    flags = ["-std=c++17", "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-I" + include]
    if dtype_bytes == 8:
        flags.append("-DRNNC_REAL_DOUBLE")
    key = hashlib.sha256(b"\0".join([source, " ".join(flags).encode(), _cxx_version(cxx).encode(),
                                     _headers_text(include)])).hexdigest()[:24]
    root = cache_root()
    os.makedirs(root, exist_ok=True)
    entry = os.path.join(root, "py-" + key)
    lib = os.path.join(entry, "lib" + manifest["model"] + ".so")
    if not os.path.isfile(lib):
        with open(entry + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it
            if not os.path.isfile(lib):
                tmp = tempfile.mkdtemp(prefix="py-" + key + ".", dir=root)
                try:
                    for name, text in files.items():
                        with open(os.path.join(tmp, name), "wb") as f:
                            f.write(text)
                    src = os.path.join(tmp, cpp[0])
                    _run([cxx] + flags + [src, "-o", os.path.join(tmp, os.path.basename(lib)), "-lopenblas"],
                         f"building {cpp[0]}")
                    shutil.rmtree(entry, ignore_errors=True)  # an entry left without its library
                    os.rename(tmp, entry)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
    if not os.path.isfile(lib):
        raise RuntimeError(f"the cache entry {entry} has no {os.path.basename(lib)}: remove it and try again")
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
