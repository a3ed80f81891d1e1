"""A compiled cell as a torch `nn.Module` (`Recurrent`), its forward and
backward registered as torch ops (`rnnc::forward`, `rnnc::backward`) with
`torch.library.custom_op`, so autograd, `opcheck` and `torch.compile` see
them; and `from_torch`, which turns an `nn.LSTM` or `nn.GRU` into the
`Recurrent` of samples/lstm.rnn or samples/gru.rnn with its weights."""
import ctypes
import json
import os
import struct
import tempfile
import threading
from typing import List

import torch
from torch import Tensor

from . import _build

_LIBS = []  # (Library, manifest) by id: ops take the id, not the object
_LOCK = threading.Lock()


def _register(lib, manifest):
    with _LOCK:
        _LIBS.append((lib, manifest))
        return len(_LIBS) - 1


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr()) if t is not None else None


def _dtype_of(lib):
    return torch.float64 if lib.real_bytes == 8 else torch.float32


@torch.library.custom_op("rnnc::forward", mutates_args=())
def _forward(model: int, params: Tensor, inputs: List[Tensor], states: List[Tensor], T: int, B: int) -> List[Tensor]:
    """Outputs [T, B, w] in order, final states [depth, B, w], the loss (a 0-d tensor), the workspace."""
    lib, _ = _LIBS[model]
    dt = _dtype_of(lib)
    ws = torch.empty(max(1, lib.workspace_bytes(T, B)), dtype=torch.uint8)
    ins = [x.contiguous() for x in inputs]
    sts = [s.contiguous() for s in states]
    lib.forward(_ptr(ws), T, B, _ptr(params), [x.data_ptr() for x in ins],
                [s.data_ptr() for s in sts] if sts else None)
    result = []
    for k, o in enumerate(lib.outputs):
        out = torch.empty(T, B, o.width, dtype=dt)
        lib.read_output(_ptr(ws), T, B, k, _ptr(out))
        result.append(out)
    for k, s in enumerate(lib.states):
        out = torch.empty(s.depth, B, s.width, dtype=dt)
        lib.read_final_state(_ptr(ws), T, B, k, _ptr(out))
        result.append(out)
    result.append(torch.tensor(lib.read_loss(_ptr(ws), T, B) if lib.has_loss else 0.0, dtype=dt))
    result.append(ws)
    return result


@_forward.register_fake
def _forward_fake(model, params, inputs, states, T, B):
    lib, _ = _LIBS[model]
    dt = _dtype_of(lib)
    result = [params.new_empty(T, B, o.width, dtype=dt) for o in lib.outputs]
    result += [params.new_empty(s.depth, B, s.width, dtype=dt) for s in lib.states]
    result.append(params.new_empty((), dtype=dt))
    result.append(params.new_empty(max(1, lib.workspace_bytes(T, B)), dtype=torch.uint8))
    return result


@torch.library.custom_op("rnnc::backward", mutates_args=())
def _backward(model: int, ws: Tensor, params: Tensor, seeds: List[Tensor], T: int, B: int) -> List[Tensor]:
    """After forward on `ws`: the gradient of loss + sum <y, seed> as
    [param grads (flat)] + [one per input] + [one per state] (zeros where none)."""
    lib, _ = _LIBS[model]
    dt = _dtype_of(lib)
    param_grads = torch.empty(lib.param_elements, dtype=dt)
    by_name = {g.name: g for g in lib.input_grads}
    input_grads = [torch.zeros(T, B, x.width, dtype=dt) if x.name in by_name else torch.zeros(0, dtype=dt)
                   for x in lib.inputs]
    state_grads = [torch.empty(s.depth, B, s.width, dtype=dt) for s in lib.states]
    sd = [s.contiguous() for s in seeds]
    # The ABI's backward writes its scratch into the workspace; a copy keeps the
    # forward's intact, so backward may run again (retain_graph, gradcheck).
    ws = ws.clone()
    lib.backward(_ptr(ws), T, B, _ptr(params), [s.data_ptr() if s.numel() else None for s in sd],
                 _ptr(param_grads), [g.data_ptr() if g.numel() else None for g in input_grads],
                 [g.data_ptr() for g in state_grads])
    return [param_grads] + input_grads + state_grads


@_backward.register_fake
def _backward_fake(model, ws, params, seeds, T, B):
    lib, _ = _LIBS[model]
    dt = _dtype_of(lib)
    by_name = {g.name: g for g in lib.input_grads}
    return ([params.new_empty(lib.param_elements, dtype=dt)] +
            [params.new_empty((T, B, x.width) if x.name in by_name else (0,), dtype=dt) for x in lib.inputs] +
            [params.new_empty(s.depth, B, s.width, dtype=dt) for s in lib.states])


def _setup_context(ctx, inputs, output):
    model, params, ins, states, T, B = inputs
    ctx.model, ctx.T, ctx.B = model, T, B
    ctx.n_inputs, ctx.has_states = len(ins), len(states) > 0
    ctx.save_for_backward(output[-1], params)


def _seeds(lib, grads, T, B, dt):
    """The ABI's seeds from the upstream gradients of outputs and final states."""
    n_out, n_state = len(lib.outputs), len(lib.states)
    out_grads = {o.name: g for o, g in zip(lib.outputs, grads[:n_out])}
    tracing = torch.compiler.is_compiling()  # no data-dependent checks in a traced backward
    for s, g in zip(lib.states, grads[n_out:n_out + n_state]):
        if g is None:
            continue
        # A final state that is also an output (an LSTM's h) seeds the output's last steps.
        out = next((o for o in lib.outputs if o.name == s.name), None)
        if out is None or s.depth > T:
            if tracing or not torch.any(g):
                continue  # under torch.compile such a gradient is not seen (docs/torch.md)
            raise NotImplementedError(f"a gradient for final state '{s.name}', which is not an output of "
                                      f"{lib.name}: the runtime ABI takes none yet")
        prev = out_grads.get(s.name)
        extra = torch.zeros(T, B, s.width, dtype=dt)
        extra[T - s.depth:] = g
        out_grads[s.name] = extra if prev is None else prev + extra
    seeded = {s.name for s in lib.seeds}
    for name, g in out_grads.items():
        if name not in seeded and g is not None and not tracing and torch.any(g):
            raise NotImplementedError(f"output '{name}' of {lib.name} has a gradient, but the compiled "
                                      "objective does not reach it")
    result = []
    for s in lib.seeds:
        g = out_grads.get(s.name)
        result.append(torch.zeros(0, dtype=dt) if g is None else g.to(dt).contiguous())
    return result


def _backward_rule(ctx, grads):
    ws, params = ctx.saved_tensors
    lib, _ = _LIBS[ctx.model]
    dt = _dtype_of(lib)
    T, B = ctx.T, ctx.B
    n = len(lib.outputs) + len(lib.states)
    seeds = _seeds(lib, grads, T, B, dt)
    g = grads[n] if lib.has_loss and len(grads) > n else None
    backward = torch.ops.rnnc.backward
    if not lib.has_loss or g is None or (not torch.compiler.is_compiling() and float(g) == 1.0):
        res = backward(ctx.model, ws, params, seeds, T, B)
    elif all(s.numel() == 0 for s in seeds):
        res = [g * r for r in backward(ctx.model, ws, params, seeds, T, B)]
    else:
        # The ABI's objective is loss + sum <y, seed>: b(s) = dL + J's and
        # b(2s) = dL + 2 J's give g dL + J's = g (2 b(s) - b(2s)) + b(2s) - b(s).
        b1 = backward(ctx.model, ws, params, seeds, T, B)
        b2 = backward(ctx.model, ws, params, [2 * s for s in seeds], T, B)
        res = [g * (2 * x - y) + (y - x) for x, y in zip(b1, b2)]
    param_grads, rest = res[0], res[1:]
    input_grads = [gi if gi.numel() else None for gi in rest[:ctx.n_inputs]]
    state_grads = list(rest[ctx.n_inputs:]) if ctx.has_states else []
    return None, param_grads, input_grads, state_grads, None, None


torch.library.register_autograd("rnnc::forward", _backward_rule, setup_context=_setup_context)


def _no_double_backward(ctx, *grads):
    raise RuntimeError("rnnc: a gradient of a gradient (double backward) through a compiled cell is not "
                       "supported: the generated code computes first derivatives only")


torch.library.register_autograd("rnnc::backward", _no_double_backward, setup_context=lambda ctx, inputs, output: None)


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
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=torch.float32 if info["dtype"] == "F32" else torch.float64)
        out[name] = t.reshape(info["shape"])
    return out


class Recurrent(torch.nn.Module):
    """A compiled cell or model. Parameters are named as the manifest names
    them; forward(*inputs, state=None, batch_first=False) -> (outputs, final_state)."""

    def __init__(self, manifest, files, dtype, init):
        super().__init__()
        self._manifest, self._files = manifest, files
        self._libs = {}  # dtype -> (Library, op id): .double() and .float() load the other build
        lib = self._library(dtype)
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

    def _library(self, dtype):
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{self._manifest['model']} computes in torch.float32 or torch.float64, not {dtype}")
        if dtype not in self._libs:
            lib = _build.build_library(self._manifest, self._files, 8 if dtype == torch.float64 else 4)
            self._libs[dtype] = (lib, _register(lib, self._manifest))
        return self._libs[dtype][0]

    @property
    def _lib(self):
        return self._library(self.get_parameter(self._order[0]).dtype if self._order else torch.float32)

    @property
    def _model(self):
        self._lib
        return self._libs[self.get_parameter(self._order[0]).dtype if self._order else torch.float32][1]

    def param(self, name):
        """The parameter of a manifest name ("h1.W_hh")."""
        return self.get_parameter(name)

    def _flat_params(self):
        return torch.cat([self.get_parameter(n).reshape(-1) for n in self._order])

    @property
    def inputs(self):
        return [x.name for x in self._lib.inputs]

    @property
    def outputs(self):
        return [o.name for o in self._lib.outputs]

    @property
    def states(self):
        return {s.name: (s.depth, s.width) for s in self._lib.states}

    def forward(self, *inputs, state=None, batch_first=False):
        lib = self._lib
        dt = _dtype_of(lib)
        if len(inputs) != len(lib.inputs):
            raise TypeError(f"{lib.name} takes {len(lib.inputs)} inputs ({', '.join(self.inputs)}), "
                            f"not {len(inputs)}")
        xs = []
        T = B = None
        for x, info in zip(inputs, lib.inputs):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"input '{info.name}' must be a tensor, not {type(x).__name__}")
            if x.device.type != "cpu":
                raise ValueError(f"input '{info.name}' is on {x.device}; this {lib.name} runs on the CPU")
            if batch_first:
                x = x.transpose(0, 1)
            want_rank = 2 if info.is_index else 3
            if x.dim() != want_rank:
                raise ValueError(f"input '{info.name}' must be [T, B{'' if info.is_index else ', ' + str(info.width)}]"
                                 f", not {list(x.shape)}")
            if info.is_index:
                if x.dtype not in (torch.int64, torch.int32):
                    raise TypeError(f"input '{info.name}' holds indices: int64, not {x.dtype}")
                if x.numel() and (int(x.min()) < 0 or int(x.max()) >= info.width):
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
                    v = torch.zeros(s.depth, B, s.width, dtype=dt)
                elif tuple(v.shape) != (s.depth, B, s.width) or v.dtype != dt:
                    raise ValueError(f"state '{s.name}' must be [{s.depth}, {B}, {s.width}] {dt}, "
                                     f"not {list(v.shape)} {v.dtype}")
                states.append(v.contiguous())
        res = torch.ops.rnnc.forward(self._model, self._flat_params(), xs, states, int(T), int(B))
        n_out = len(lib.outputs)
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


def load(source, *, entity=None, dtype=torch.float32, device="cpu", seed=0, **dims):
    """Compiles `source` (a path or the text of a .rnn file) for the CPU and returns its Recurrent."""
    if torch.device(device).type != "cpu":
        raise NotImplementedError(f"device {device}: this build of the package runs on the CPU")
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"dtype {dtype}: the CPU takes torch.float32 or torch.float64")
    with tempfile.TemporaryDirectory(prefix="rnnc-load-") as work:
        bundle = _build.compile_bundle(source, work, entity=entity, dims=dims, target="cpu")
        path = os.fspath(source) if _build.is_path(source) else os.path.join(work, "cell.rnn")
        init = _read_safetensors(_build.init_params(path, dims, entity, seed, work))
        manifest, files = _build.read_bundle(bundle)
    return Recurrent(manifest, files, dtype, init)


def load_bundle(directory, *, dtype=torch.float32):
    """A bundle `rnnc compile` wrote, built and loaded; params start at zero (load a state_dict)."""
    manifest, files = _build.read_bundle(directory)
    return Recurrent(manifest, files, dtype, None)


CELLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cells")  # copies of samples/lstm.rnn, gru.rnn


def from_torch(module):
    """nn.LSTM or nn.GRU (one layer, one direction, with bias) as the Recurrent of samples/lstm.rnn or gru.rnn."""
    kinds = {torch.nn.LSTM: "lstm.rnn", torch.nn.GRU: "gru.rnn"}
    kind = kinds.get(type(module))
    if kind is None:
        raise TypeError(f"from_torch takes nn.LSTM or nn.GRU, not {type(module).__name__}")
    if module.num_layers != 1 or module.bidirectional or not module.bias or getattr(module, "proj_size", 0):
        raise ValueError("from_torch takes one layer, one direction, with bias, no projection")
    dt = module.weight_ih_l0.dtype
    rec = load(os.path.join(CELLS, kind), dtype=dt, I=module.input_size, H=module.hidden_size)
    names = {"W_ih": "weight_ih_l0", "W_hh": "weight_hh_l0", "b_ih": "bias_ih_l0", "b_hh": "bias_hh_l0"}
    with torch.no_grad():
        for ours, theirs in names.items():
            rec.param(ours).copy_(getattr(module, theirs))
    return rec
