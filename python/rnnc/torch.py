"""A compiled cell as a torch `nn.Module` (`Recurrent`), its forward and
backward registered as torch ops (`rnnc::forward`, `rnnc::backward`) with
`torch.library.custom_op`, so autograd, `opcheck` and `torch.compile` see
them; and `from_torch`, which turns an `nn.LSTM` or `nn.GRU` into the
`Recurrent` of samples/lstm.rnn or samples/gru.rnn with its weights."""
import json
import os
import struct
import tempfile
import ctypes as C
import threading
from typing import List, Optional

import torch
from torch import Tensor

from . import _abi, _build

_LIBS = {}  # the model table's address -> Library: ops take the address, not the object
_LOCK = threading.Lock()


def _register(lib):
    with _LOCK:
        _LIBS[lib.address] = lib
        cpp = _MADE.get("cpp")
    if cpp is not None:
        cpp.register(lib.address)
    return lib.address


def _lookup(model):
    lib = _LIBS.get(model)
    if lib is None:
        raise RuntimeError(f"rnnc: {model} is not the address of a model table the package registered")
    return lib


def _check_inputs(lib, params, inputs, T, B):
    """The inputs against the table, as forward takes them and backward again."""
    dt = _dtype_of(lib)
    if len(inputs) != len(lib.inputs):
        raise RuntimeError(f"{lib.name} takes {len(lib.inputs)} inputs, not {len(inputs)}")
    for x, info in zip(inputs, lib.inputs):
        if x.device != params.device:
            raise RuntimeError(f"{lib.name}: input '{info.name}' is on {x.device}, params on {params.device}")
        if info.is_index:
            if x.dtype != torch.int32 or x.numel() != T * B:
                raise RuntimeError(f"{lib.name}: input '{info.name}' must be [T, B] int32")
        elif x.dtype != dt or x.numel() != T * B * info.width:
            raise RuntimeError(f"{lib.name}: input '{info.name}' must be [{T}, {B}, {info.width}] {dt}")


def _check_args(lib, params, inputs, states, T, B):
    """The op's tensors against the table, so a direct call raises instead of handing the bundle
    short arrays (the C++ ops check the same)."""
    dt = _dtype_of(lib)
    if T < 1 or B < 1:
        raise RuntimeError(f"{lib.name}: T and B must be at least 1, not T={T}, B={B}")
    if (params.device.type == "cuda") != (lib.device == _abi.DEVICE_CUDA):
        raise RuntimeError(f"{lib.name}: params are on {params.device}; this build runs on "
                           f"{'CUDA' if lib.device == _abi.DEVICE_CUDA else 'the CPU'}")
    if params.dtype != dt or params.numel() != lib.param_elements:
        raise RuntimeError(f"{lib.name}: params must be {lib.param_elements} {dt} elements, not "
                           f"{params.numel()} {params.dtype}")
    _check_inputs(lib, params, inputs, T, B)
    if states and len(states) != len(lib.states):
        raise RuntimeError(f"{lib.name} has {len(lib.states)} states; states must be all or none, not {len(states)}")
    for v, s in zip(states, lib.states):
        if v.device != params.device or v.dtype != dt or v.numel() != s.depth * B * s.width:
            raise RuntimeError(f"{lib.name}: state '{s.name}' must be [{s.depth}, {B}, {s.width}] {dt} "
                               f"on {params.device}")


_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
_HALF = {torch.bfloat16: "bf16", torch.float16: "f16"}  # --dtype of the 16-bit builds (docs/precision.md)


def _autocast_dtype(device):
    """bf16 or f16 when torch.autocast is on for device's type with that dtype, else None."""
    kind = device.type
    if not torch.is_autocast_enabled(kind):
        return None
    dt = torch.get_autocast_dtype(kind)
    return dt if dt in _HALF else None


def _dtype_of(lib):
    return {0: torch.float32, 1: torch.float64, 2: torch.bfloat16, 3: torch.float16}[lib.dtype]


def _stream(device):
    """The caller's stream for the ABI: torch's current CUDA stream on `device`, NULL on the CPU."""
    return torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None


def _ptrs(ts):
    return [t.data_ptr() if t.numel() else None for t in ts]


def _workspace_bytes(lib, T, B):
    n = lib.workspace_bytes(T, B)
    if n <= 0:
        raise RuntimeError(f"{lib.name}: no workspace for T={T}, B={B} (too large)")
    return n


def full_workspace(view):
    """The whole workspace behind the 0-element view that forward returns."""
    return torch.empty(0, dtype=torch.uint8, device=view.device).set_(view.untyped_storage(), 0,
                                                                     (view.untyped_storage().nbytes(),))


def _forward_impl(model: int, params: Tensor, inputs: List[Tensor], states: List[Tensor], T: int, B: int,
                  seed: int = -1, lengths: Optional[Tensor] = None, key: Optional[Tensor] = None) -> List[Tensor]:
    """Outputs [T, B, w] in order, final states [depth, B, w], the loss (a 0-d tensor), the
    workspace (uint8; what backward reads). The bundle writes them straight into these tensors.
    seed -1 is evaluation; else training, and dropout and zoneout draw their masks from it.
    lengths: None, or int32 [B] on the CPU (a model compiled with --lengths). key: None, or one
    int64 on the CPU: training with it as the seed (a compiled graph draws it without .item())."""
    lib = _lookup(model)
    _check_args(lib, params, inputs, states, T, B)
    if key is not None:
        if key.device.type != "cpu" or key.dtype != torch.int64 or key.numel() != 1:
            raise ValueError(f"{lib.name}: key must be one int64 on the CPU, not {key.dtype} {list(key.shape)} "
                             f"on {key.device}")
        seed = int(key.item()) & (2**63 - 1)
    if lengths is not None:
        if not lib.has_lengths:
            raise RuntimeError(f"{lib.name} was compiled without --lengths: load it with rnnc.load(..., lengths=True)")
        if lengths.device.type != "cpu" or lengths.dtype != torch.int32 or tuple(lengths.shape) != (B,):
            raise ValueError(f"{lib.name}: lengths must be int32 [B = {B}] on the CPU, not {lengths.dtype} "
                             f"{list(lengths.shape)} on {lengths.device}")
        lengths = lengths.contiguous()
    params = params.contiguous()
    dt, dev = _dtype_of(lib), params.device
    ws = torch.empty(_workspace_bytes(lib, T, B), dtype=torch.uint8, device=dev)
    outs = [torch.empty(T, B, o.width, dtype=dt, device=dev) for o in lib.outputs]
    finals = [torch.empty(s.depth, B, s.width, dtype=dt, device=dev) for s in lib.states]
    loss = torch.zeros((), dtype=dt, device=dev)
    ins = [x.contiguous() for x in inputs]
    sts = [s.contiguous() for s in states]
    lp = C.cast(lengths.data_ptr(), C.POINTER(C.c_int32)) if lengths is not None else None
    options = _abi.RunOptions(1 if seed >= 0 else 0, max(seed, 0), 0, lp) if seed >= 0 or lp else None
    lib.forward(ws.data_ptr(), T, B, params.data_ptr(), [x.data_ptr() for x in ins], _ptrs(sts),
                _ptrs(outs), _ptrs(finals), loss.data_ptr() if lib.has_loss else None, _stream(dev), options)
    # The workspace leaves as a view of no elements on its storage: autograd keeps it alive, and
    # its bytes (backward's part uninitialized) are no visible result.
    return outs + finals + [loss, ws[:0]]


def _forward_fake(model, params, inputs, states, T, B, seed=-1, lengths=None, key=None):
    lib = _lookup(model)
    dt = _dtype_of(lib)
    result = [params.new_empty(T, B, o.width, dtype=dt) for o in lib.outputs]
    result += [params.new_empty(s.depth, B, s.width, dtype=dt) for s in lib.states]
    result.append(params.new_empty((), dtype=dt))
    _workspace_bytes(lib, T, B)
    result.append(params.new_empty(0, dtype=torch.uint8))
    return result


def _backward_impl(model: int, ws: Tensor, params: Tensor, inputs: List[Tensor], output_grads: List[Tensor],
                   state_grads: List[Tensor], loss_grad: Tensor, T: int, B: int,
                   input_grads_mask: Optional[List[bool]] = None) -> List[Tensor]:
    """After forward on `ws` with `inputs` (given again: the bundle reads them in place): the
    gradient of g * loss + sum <y, dy> + sum <s_final, ds>, where output_grads and state_grads
    hold dy for every output and ds for every state (empty: zero) and loss_grad holds g (empty:
    zero). Returns [param grads (flat)] + [one per input (empty where the objective does not
    reach it, or where input_grads_mask says False: its product is skipped)] + [one per state:
    the initial state's gradient]."""
    lib = _lookup(model)
    if not lib.has_backward:
        raise RuntimeError(f"{lib.name}: this is a forward-only build; it has no backward")
    dt, dev = _dtype_of(lib), params.device
    params = params.contiguous()
    if params.dtype != dt or params.numel() != lib.param_elements:
        raise RuntimeError(f"{lib.name}: params must be {lib.param_elements} {dt} elements")
    # The workspace: forward's 0-element view on it, or the whole of it (opcheck passes copies).
    n, view = lib.workspace_bytes(T, B), ws.numel() == 0
    if ws.dtype != torch.uint8 or ws.device != dev or not (
            ws.storage_offset() == 0 and ws.untyped_storage().nbytes() == n if view
            else ws.numel() == n and ws.is_contiguous()):
        raise RuntimeError(f"{lib.name}: the workspace is not one of this model's for T={T}, B={B}")
    if view:
        ws = full_workspace(ws)
    _check_inputs(lib, params, inputs, T, B)
    ins = [x.contiguous() for x in inputs]
    if len(output_grads) != len(lib.outputs) or len(state_grads) != len(lib.states):
        raise RuntimeError(f"{lib.name}: backward takes one gradient per output and per state (empty for none)")
    seeded = {s.name for s in lib.seeds}
    by_name = {}
    for o, g in zip(lib.outputs, output_grads):
        if g.numel():
            if o.name not in seeded:
                if torch.any(g):
                    raise NotImplementedError(f"output '{o.name}' of {lib.name} has a gradient, but the compiled "
                                              "objective does not reach it")
                continue
            by_name[o.name] = g.to(dt).contiguous()
    seeds = [by_name.get(s.name) for s in lib.seeds]
    sseeds = [g.to(dt).contiguous() if g.numel() else None for g in state_grads]
    if any(g is not None for g in sseeds) and not lib.has_state_seeds:
        raise NotImplementedError(f"{lib.name} was compiled without final-state seeds")
    wanted = _wanted_grads(lib, input_grads_mask)
    stream = _stream(dev)

    def run(scale):
        param_grads = torch.empty(lib.param_elements, dtype=dt, device=dev)
        input_grads = [torch.empty(T, B, x.width, dtype=dt, device=dev) if w
                       else torch.empty(0, dtype=dt, device=dev) for x, w in zip(lib.inputs, wanted)]
        initial_grads = [torch.empty(s.depth, B, s.width, dtype=dt, device=dev) for s in lib.states]
        sd = [s if s is None or scale == 1 else s * scale for s in seeds]
        ss = [s if s is None or scale == 1 else s * scale for s in sseeds]
        # The ABI's backward writes its scratch into the workspace; a copy keeps the
        # forward's intact, so backward may run again (retain_graph, gradcheck).
        w = ws.clone()
        lib.backward(w.data_ptr(), T, B, params.data_ptr(), [x.data_ptr() for x in ins],
                     [None if s is None else s.data_ptr() for s in sd],
                     [None if s is None else s.data_ptr() for s in ss], param_grads.data_ptr(), _ptrs(input_grads),
                     _ptrs(initial_grads), stream)
        return [param_grads] + input_grads + initial_grads

    if not lib.has_loss:
        return run(1)
    g = float(loss_grad) if loss_grad.numel() else 0.0
    if g == 1.0:
        return run(1)
    if all(s is None for s in seeds + sseeds):
        return [g * r for r in run(1)]
    # The ABI's objective is loss + <seeds>: b(s) = dL + J's and b(2s) = dL + 2 J's,
    # so g dL + J's = g (2 b(s) - b(2s)) + b(2s) - b(s).
    b1, b2 = run(1), run(2)
    return [g * (2 * x - y) + (y - x) for x, y in zip(b1, b2)]


def _wanted_grads(lib, input_grads_mask):
    """Per input: does backward return its gradient (the objective reaches it, and the mask, if
    any, asks for it)?"""
    if input_grads_mask is not None and len(input_grads_mask) != len(lib.inputs):
        raise RuntimeError(f"rnnc::backward: input_grads_mask has {len(input_grads_mask)} entries for "
                           f"{len(lib.inputs)} inputs")
    reached = {g.name for g in lib.input_grads}
    return [x.name in reached and (input_grads_mask is None or bool(input_grads_mask[k]))
            for k, x in enumerate(lib.inputs)]


def _backward_fake(model, ws, params, inputs, output_grads, state_grads, loss_grad, T, B, input_grads_mask=None):
    lib = _lookup(model)
    dt = _dtype_of(lib)
    wanted = _wanted_grads(lib, input_grads_mask)
    return ([params.new_empty(lib.param_elements, dtype=dt)] +
            [params.new_empty((T, B, x.width) if w else (0,), dtype=dt) for x, w in zip(lib.inputs, wanted)] +
            [params.new_empty(s.depth, B, s.width, dtype=dt) for s in lib.states])


def _setup_context(ctx, inputs, output):
    model, params, ins, states, T, B = inputs[:6]
    ctx.model, ctx.T, ctx.B = model, T, B
    ctx.n_inputs, ctx.has_states = len(ins), len(states) > 0
    # An input that does not require grad (a batch of data) gets none: its product is skipped.
    ctx.input_grads_mask = [x.requires_grad for x in ins]
    ctx.save_for_backward(output[-1], params, *ins)


def _backward_rule(ctx, grads):
    ws, params, *ins = ctx.saved_tensors
    lib = _lookup(ctx.model)
    n_out, n_state = len(lib.outputs), len(lib.states)
    empty = params.new_empty(0)
    out_grads = [empty if g is None else g for g in grads[:n_out]]
    state_grads = [empty if g is None else g for g in grads[n_out:n_out + n_state]]
    g = grads[n_out + n_state]
    res = torch.ops.rnnc_py.backward(ctx.model, ws, params, ins, out_grads, state_grads, empty if g is None else g,
                                     ctx.T, ctx.B, ctx.input_grads_mask)
    param_grads, rest = res[0], res[1:]
    input_grads = [gi if gi.numel() else None for gi in rest[:ctx.n_inputs]]
    initial_grads = list(rest[ctx.n_inputs:]) if ctx.has_states else []
    return None, param_grads, input_grads, initial_grads, None, None, None, None, None


def _no_double_backward(ctx, *grads):
    raise RuntimeError("rnnc: a gradient of a gradient (double backward) through a compiled cell is not "
                       "supported: the generated code computes first derivatives only")


class _CustomOps:
    """rnnc_py::forward and rnnc_py::backward: torch.library.custom_op over the C ABI by ctypes."""
    name = "custom_op"

    def __init__(self):
        fwd = torch.library.custom_op("rnnc_py::forward", _forward_impl, mutates_args=())
        fwd.register_fake(_forward_fake)
        bwd = torch.library.custom_op("rnnc_py::backward", _backward_impl, mutates_args=())
        bwd.register_fake(_backward_fake)
        torch.library.register_autograd("rnnc_py::forward", _backward_rule, setup_context=_setup_context)
        torch.library.register_autograd("rnnc_py::backward", _no_double_backward,
                                        setup_context=lambda ctx, inputs, output: None)
        self.forward = torch.ops.rnnc_py.forward
        self.backward = torch.ops.rnnc_py.backward


class _CppOps:
    """rnnc::forward and rnnc::backward from the C++ op library (csrc/ops.cpp, built and cached on
    first use, loaded with torch.ops.load_library); autograd in C++, fake kernels here."""
    name = "cpp"

    def __init__(self):
        torch.ops.load_library(_build.build_ops_library())
        torch.library.register_fake("rnnc::forward", _forward_fake)
        torch.library.register_fake("rnnc::backward", _backward_fake)
        self.forward = torch.ops.rnnc.forward
        self.backward = torch.ops.rnnc.backward
        self.register = torch.ops.rnnc.register_model
        for address in list(_LIBS):
            self.register(address)


_BINDINGS = {"custom_op": _CustomOps, "cpp": _CppOps}
_BINDING = None


def binding(name=None):
    """The ops the layers call: "cpp" (the C++ op library, the default) or "custom_op"
    (torch.library.custom_op over ctypes); $RNNC_TORCH_BINDING picks one. With a name,
    switches to that binding (for tests and benchmarks)."""
    global _BINDING
    name = name or (_BINDING.name if _BINDING else os.environ.get("RNNC_TORCH_BINDING", "cpp"))
    if name not in _BINDINGS:
        raise ValueError(f"$RNNC_TORCH_BINDING is {name!r}: it takes cpp or custom_op")
    if _BINDING is None or _BINDING.name != name:
        with _LOCK:
            made = _MADE.get(name)
            if made is None:
                made = _MADE[name] = _BINDINGS[name]()
            _BINDING = made
    return _BINDING


_MADE = {}


def _read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in ("F32", "F64"):
            raise ValueError(f"{path}: {name} is {info['dtype']}, not F32 or F64")
        begin, end = info["data_offsets"]
        dtype = torch.float32 if info["dtype"] == "F32" else torch.float64
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype)
        out[name] = t.reshape(info["shape"])
    return out


def _cuda_arch(device):
    """The compute capability of `device` as nvcc's -arch (sm_90 where there is no GPU)."""
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(device if device.index is not None else None)
        return f"sm_{major}{minor}"
    return "sm_90"


def _check_cuda(device, what):
    if not torch.cuda.is_available():
        raise RuntimeError(f"rnnc: {what} on {device}, but there is no CUDA device "
                           "(torch.cuda.is_available() is False)")


class _Source:
    """What a Recurrent compiles its builds from: the text of a .rnn file, its dims and entity
    (rnnc.load), or a bundle written ahead of time (rnnc.load_bundle), which has one build."""

    def __init__(self, text=None, dims=None, entity=None, bundle=None, lengths=False):
        self.text, self.dims, self.entity, self.lengths = text, dims or {}, entity, lengths
        self.bundles = {}  # (target, forward_only[, "bf16" or "f16"]) -> (manifest, files)
        if bundle is not None:
            manifest, files = bundle
            half = manifest.get("dtype") if manifest.get("dtype") in ("bf16", "f16") else None
            self.bundles[(manifest["target"], False) + ((half,) if half else ())] = bundle

    def bundle(self, target, forward_only, half=None):
        """The bundle for `target` (half: "bf16" or "f16" for a 16-bit one, else the f32/f64 one);
        None for a forward-only one that cannot be compiled here."""
        key = (target, forward_only) if half is None else (target, forward_only, half)
        if key not in self.bundles:
            if self.text is None:
                if forward_only:
                    return None  # a prebuilt bundle: its training build runs under no_grad too
                have = ", ".join(sorted(k[0] for k in self.bundles))
                what = f"{target}" if half is None else f"--dtype {half} {target}"
                raise RuntimeError(f"this model was loaded from a {have} bundle; it has no {what} build "
                                   f"(compile one with `rnnc compile --target {target}"
                                   f"{'' if half is None else ' --dtype ' + half}`)")
            with tempfile.TemporaryDirectory(prefix="rnnc-load-") as work:
                path = _build.compile_bundle(self.text, work, entity=self.entity, dims=self.dims, target=target,
                                             forward_only=forward_only, lengths=self.lengths, dtype=half)
                self.bundles[key] = _build.read_bundle(path)
        return self.bundles[key]


class Recurrent(torch.nn.Module):
    """A compiled cell or model. Parameters are named as the manifest names
    them; forward(*inputs, state=None, batch_first=False) -> (outputs, final_state)."""

    def __init__(self, source, dtype, init, target="cpu"):
        super().__init__()
        self._source = source
        self._manifest = source.bundle(target, False, _HALF.get(dtype))[0]
        self._libs = {}  # (dtype, target, arch, forward_only) -> Library
        self._fast = {}  # (dtype, device) -> [training Library, forward-only Library or None]: forward's lookup
        lib = self._library(dtype, torch.device(target))
        dt = dtype
        order = sorted(lib.params, key=lambda p: p.offset)
        expect = 0
        for p in order:
            if p.offset != expect:
                raise RuntimeError(f"{lib.name}: the params are not laid out back to back at {p.name}")
            expect += int(torch.Size(p.shape).numel())
        if expect != lib.param_elements:
            raise RuntimeError(f"{lib.name}: the param table covers {expect} of {lib.param_elements} elements")
        self._order = [p.name for p in order]
        self._slots = []  # (module, leaf name) per param in the table's order: a fast path to each
        for p in order:
            value = init[p.name].to(dt) if init is not None else torch.zeros(p.shape, dtype=dt)
            if tuple(value.shape) != p.shape:
                raise RuntimeError(f"{p.name}: rnnc init gave shape {tuple(value.shape)}, the bundle {p.shape}")
            # "h1.W_hh" is W_hh of a submodule h1, so named_parameters() and
            # state_dict() give the manifest's full names.
            *path, leaf = p.name.split(".")
            owner = self
            for part in path:
                if not hasattr(owner, part):
                    owner.add_module(part, torch.nn.Module())
                owner = getattr(owner, part)
            owner.register_parameter(leaf, torch.nn.Parameter(value.clone()))
            self._slots.append((owner, leaf))

    def _library(self, dtype, device, forward_only=False):
        """The build for dtype on device (the forward-only one if asked and available), built lazily."""
        if dtype not in _DTYPES:
            raise TypeError(f"{self._manifest['model']} takes torch.float32, torch.float64, torch.bfloat16 or "
                            f"torch.float16, not {dtype}")
        if device.type not in ("cpu", "cuda"):
            raise NotImplementedError(f"device {device}: rnnc runs on the CPU and on CUDA")
        half = _HALF.get(dtype)
        arch = _cuda_arch(device) if device.type == "cuda" else None
        key = (dtype, device.type, arch, forward_only)
        lib = self._libs.get(key)
        if lib is None:
            bundle = self._source.bundle(device.type, forward_only, half)
            if bundle is None:
                return self._library(dtype, device, False)
            manifest, files = bundle
            lib = _build.build_library(manifest, files, 8 if dtype == torch.float64 else 2 if half else 4,
                                       arch=arch or "sm_90")
            _register(lib)
            self._libs[key] = lib
        return lib

    def workspace_bytes(self, T, B, *, forward_only=False):
        """Bytes of workspace for T steps of B sequences: the training build's, or the forward-only
        build's (what runs under no_grad) with forward_only=True."""
        p = self._param_probe()
        return self._library(p.dtype, p.device, forward_only).workspace_bytes(T, B)

    def _param_probe(self):
        return self._slots[0][0]._parameters[self._slots[0][1]] if self._slots else torch.empty(0)

    @property
    def _lib(self):
        p = self._param_probe()
        return self._library(p.dtype, p.device)

    def param(self, name):
        """The parameter of a manifest name ("h1.W_hh")."""
        return self.get_parameter(name)

    def _flat_params(self):
        ps = [owner._parameters[leaf].reshape(-1) for owner, leaf in self._slots]
        if len(ps) == 1:
            return ps[0]
        return torch.cat(ps) if ps else torch.empty(0)

    @property
    def inputs(self):
        return [x.name for x in self._lib.inputs]

    @property
    def outputs(self):
        return [o.name for o in self._lib.outputs]

    @property
    def states(self):
        return {s.name: (s.depth, s.width) for s in self._lib.states}

    def forward(self, *inputs, state=None, batch_first=False, lengths=None):
        """inputs [T, B, n] ([B, T, n] with batch_first; [T, B] for an index), or
        PackedSequences (then the outputs are PackedSequences too); lengths: each
        sequence's steps ([B] ints, 1..T; a model loaded with lengths=True), as
        docs/lengths.md says: outputs zero past the end, final states after each
        sequence's last step, the loss a mean over the valid steps."""
        packed = [isinstance(x, torch.nn.utils.rnn.PackedSequence) for x in inputs]
        if any(packed):
            if not all(packed) or lengths is not None or batch_first:
                raise TypeError("PackedSequence inputs: every input packed, and no lengths= or batch_first")
            padded = [torch.nn.utils.rnn.pad_packed_sequence(x) for x in inputs]
            lengths = padded[0][1]
            if any(not torch.equal(n, lengths) for _, n in padded):
                raise ValueError("the packed inputs have different lengths")
            out, final = self.forward(*[x for x, _ in padded], state=state, lengths=lengths)
            pack = lambda y: torch.nn.utils.rnn.pack_padded_sequence(y, lengths, enforce_sorted=False)  # noqa: E731
            if isinstance(out, tuple):
                out = tuple(pack(y) if y.dim() == 3 else y for y in out)
            else:
                out = pack(out) if out.dim() == 3 else out
            return out, final
        p = self._param_probe()
        dev, dt = p.device, p.dtype
        # Under torch.autocast to bf16 or f16, float32 params and inputs run in a 16-bit build,
        # cast differentiably: the gradients reach the float32 params (their master copies).
        cast = _autocast_dtype(dev) if dt == torch.float32 else None
        if cast is not None:
            dt = cast
            inputs = [x.to(cast) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            if state is not None:
                state = {k: v.to(cast) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                         for k, v in state.items()}
        pair = self._fast.get((dt, dev))
        if pair is None:
            if dev.type == "cuda":
                _check_cuda(dev, self._manifest["model"])
            pair = self._fast[(dt, dev)] = [self._library(dt, dev), None]
        lib = pair[0]
        if len(inputs) != len(lib.inputs):
            raise TypeError(f"{lib.name} takes {len(lib.inputs)} inputs ({', '.join(self.inputs)}), "
                            f"not {len(inputs)}")
        tracing = torch.compiler.is_compiling()
        xs = []
        T = B = None
        for x, info in zip(inputs, lib.inputs):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"input '{info.name}' must be a tensor, not {type(x).__name__}")
            if x.device != dev:
                raise ValueError(f"input '{info.name}' is on {x.device}; this {lib.name} is on {dev}")
            if batch_first:
                x = x.transpose(0, 1)
            want_rank = 2 if info.is_index else 3
            if x.dim() != want_rank:
                raise ValueError(f"input '{info.name}' must be [T, B{'' if info.is_index else ', ' + str(info.width)}]"
                                 f", not {list(x.shape)}")
            if info.is_index:
                if x.dtype not in (torch.int64, torch.int32):
                    raise TypeError(f"input '{info.name}' holds indices: int64, not {x.dtype}")
                # On CUDA the bundle checks the indices itself (no sync here).
                if dev.type == "cpu" and not tracing and x.numel() and (int(x.min()) < 0 or int(x.max()) >= info.width):
                    raise IndexError(f"input '{info.name}': an index out of [0, {info.width})")
                x = x.to(torch.int32)
            else:
                if x.dtype != dt:
                    raise TypeError(f"input '{info.name}' is {x.dtype}; this {lib.name} computes in {dt}")
                if x.shape[2] != info.width:
                    raise ValueError(f"input '{info.name}' has width {x.shape[2]}, not {info.width}")
            if T is None:
                T, B = x.shape[0], x.shape[1]
            elif (x.shape[0], x.shape[1]) != (T, B):
                raise ValueError(f"input '{info.name}' is [{x.shape[0]}, {x.shape[1]}, ...], "
                                 f"the first input [{T}, {B}, ...]")
            xs.append(x.contiguous())
        if T is None:
            raise TypeError(f"{lib.name} has no inputs")
        if T < 1 or B < 1:
            raise ValueError(f"T and B must be at least 1, not T={T}, B={B}")
        states = []
        if state is not None:
            unknown = set(state) - {s.name for s in lib.states}
            if unknown:
                raise KeyError(f"{lib.name} has no state {sorted(unknown)[0]!r} (it has {sorted(self.states)})")
            for s in lib.states:
                v = state.get(s.name)
                if v is None:
                    v = torch.zeros(s.depth, B, s.width, dtype=dt, device=dev)
                elif not isinstance(v, torch.Tensor):
                    raise TypeError(f"state '{s.name}' must be a tensor, not {type(v).__name__}")
                elif tuple(v.shape) != (s.depth, B, s.width) or v.dtype != dt:
                    raise ValueError(f"state '{s.name}' must be [{s.depth}, {B}, {s.width}] {dt}, "
                                     f"not {list(v.shape)} {v.dtype}")
                elif v.device != dev:
                    raise ValueError(f"state '{s.name}' is on {v.device}; this {lib.name} is on {dev}")
                states.append(v.contiguous())
        if lengths is not None:
            if not lib.has_lengths:
                raise RuntimeError(f"{lib.name} was loaded without lengths: rnnc.load(..., lengths=True) compiles "
                                   "it with --lengths")
            lengths = torch.as_tensor(lengths).to("cpu", torch.int64)
            if tuple(lengths.shape) != (B,):
                raise ValueError(f"lengths must be [B = {B}], not {list(lengths.shape)}")
            # Traced, the bundle checks them (forward fails with the length named).
            if not tracing and lengths.numel() and (int(lengths.min()) < 1 or int(lengths.max()) > T):
                raise ValueError(f"every length must be in 1..T (T = {T}), not {lengths.tolist()}")
            lengths = lengths.to(torch.int32)
        # Longest first, as PyTorch packs a batch: the compiled code then computes at each step only
        # the sequences still running (docs/lengths.md). The results come back in the caller's order.
        order = None
        if lengths is not None and (tracing or bool((lengths[1:] > lengths[:-1]).any())):
            order = torch.argsort(lengths, descending=True, stable=True)
            lengths = lengths.index_select(0, order)
            on_dev = order.to(dev)
            xs = [x.index_select(1, on_dev) for x in xs]
            states = [v.index_select(1, on_dev) for v in states]
        params = self._flat_params()
        if cast is not None:
            params = params.to(cast)
        need_grad = torch.is_grad_enabled() and (params.requires_grad or any(x.requires_grad for x in xs) or
                                                 any(v.requires_grad for v in states))
        if need_grad or (pair[1] is None and tracing):
            run = lib  # traced, the training build: building the forward-only one is no graph op
        else:
            if pair[1] is None:
                pair[1] = self._library(dt, dev, forward_only=True)
            run = pair[1]
        # Training: dropout and zoneout draw masks from a seed drawn from torch's generator (so
        # torch.manual_seed reproduces them), passed as a tensor (no .item(): torch.compile keeps
        # the draw in its graph); evaluation: their expectations.
        key = None
        if self.training and lib.has_masks:
            key = torch.randint(0, 2**62, (), dtype=torch.int64)
        res = (_BINDING or binding()).forward(run.address, params, xs, states, int(T), int(B), -1, lengths, key)
        n_out = len(lib.outputs)
        if order is not None:  # back to the caller's order (the loss is a mean: it stays)
            back = torch.argsort(order).to(dev)
            n_back = n_out + len(lib.states)
            res = [r.index_select(1, back) for r in res[:n_back]] + list(res[n_back:])
        outs = res[:n_out]
        if batch_first:
            outs = [o.transpose(0, 1) for o in outs]
        final = {s.name: v for s, v in zip(lib.states, res[n_out:n_out + len(lib.states)])}
        if lib.has_loss:
            outs = list(outs) + [res[n_out + len(lib.states)]]
        out = outs[0] if len(outs) == 1 else tuple(outs)
        return out, final

    def extra_repr(self):
        return f"{self._manifest['model']}"


def load(source, *, entity=None, dtype=torch.float32, device="cpu", seed=0, lengths=False, **dims):
    """Compiles `source` (a path or the text of a .rnn file) and returns its Recurrent on `device`
    (the CPU, or CUDA: the bundle is built with nvcc). lengths=True compiles it with --lengths:
    forward then takes lengths= or PackedSequences (docs/lengths.md)."""
    device = torch.device(device)
    if device.type not in ("cpu", "cuda"):
        raise NotImplementedError(f"device {device}: rnnc runs on the CPU and on CUDA")
    if dtype not in _DTYPES:
        raise TypeError(f"dtype {dtype}: rnnc takes torch.float32, torch.float64, torch.bfloat16 or torch.float16")
    if _build.is_path(source):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such .rnn file: {path}")
        with open(path) as f:
            text = f.read()
    else:
        text = source
    src = _Source(text, dims, entity, lengths=lengths)
    with tempfile.TemporaryDirectory(prefix="rnnc-load-") as work:
        src.bundles[("cpu", False)] = _build.read_bundle(
            _build.compile_bundle(source, work, entity=entity, dims=dims, target="cpu", lengths=lengths))
        path = os.fspath(source) if _build.is_path(source) else os.path.join(work, "cell.rnn")
        init = _read_safetensors(_build.init_params(path, dims, entity, seed, work))
    rec = Recurrent(src, dtype, init)
    if device.type == "cuda":
        rec._library(dtype, device)  # built now, so a missing nvcc or a bad build shows here
        _check_cuda(device, f"rnnc.load({rec._manifest['model']})")
        rec.to(device)
    return rec


def load_bundle(directory, *, dtype=None):
    """A bundle `rnnc compile` wrote (cpu or cuda), built and loaded; params start at zero
    (load a state_dict). A cuda bundle's model is on the current CUDA device. dtype: the
    bundle's own for a --dtype bf16|f16 bundle (the default), else float32 (or float64)."""
    manifest, files = _build.read_bundle(directory)
    target = manifest["target"]
    own = {"bf16": torch.bfloat16, "f16": torch.float16}.get(manifest.get("dtype"))
    if dtype is None:
        dtype = own or torch.float32
    elif own is not None and dtype != own or own is None and dtype in _HALF:
        raise TypeError(f"{directory} is a --dtype {manifest.get('dtype', 'f32')} bundle; it runs in "
                        f"{own or 'torch.float32 or torch.float64'}, not {dtype}")
    rec = Recurrent(_Source(bundle=(manifest, files)), dtype, None, target=target)
    if target == "cuda":
        _check_cuda(torch.device("cuda"), f"rnnc.load_bundle({directory})")
        rec.to("cuda")
    return rec


CELLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cells")  # copies of samples/lstm.rnn, gru.rnn


def from_torch(module):
    """nn.LSTM or nn.GRU (one layer, one direction, with bias) as the Recurrent of samples/lstm.rnn or
    gru.rnn, with its weights, on its device."""
    kinds = {torch.nn.LSTM: "lstm.rnn", torch.nn.GRU: "gru.rnn"}
    kind = kinds.get(type(module))
    if kind is None:
        raise TypeError(f"from_torch takes nn.LSTM or nn.GRU, not {type(module).__name__}")
    if module.num_layers != 1 or module.bidirectional or not module.bias or getattr(module, "proj_size", 0):
        raise ValueError("from_torch takes one layer, one direction, with bias, no projection")
    dt, dev = module.weight_ih_l0.dtype, module.weight_ih_l0.device
    rec = load(os.path.join(CELLS, kind), dtype=dt, device=dev, I=module.input_size, H=module.hidden_size)
    names = {"W_ih": "weight_ih_l0", "W_hh": "weight_hh_l0", "b_ih": "bias_ih_l0", "b_hh": "bias_hh_l0"}
    with torch.no_grad():
        for ours, theirs in names.items():
            rec.param(ours).copy_(getattr(module, theirs))
    return rec
