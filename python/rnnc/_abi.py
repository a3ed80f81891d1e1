"""The C ABI of a compiled model (runtime/include/rnnc/model.h), seen through
ctypes: a loaded shared library, its `rnnc_model` table and calls on it.
Nothing here knows about torch: pointers in, status codes out."""
import ctypes as C

ABI_VERSION = 7
DEVICE_CPU, DEVICE_CUDA = 0, 1


class Tensor(C.Structure):
    _fields_ = [("name", C.c_char_p), ("rank", C.c_int32), ("shape", C.c_int64 * 2), ("offset", C.c_int64),
                ("is_index", C.c_int32), ("depth", C.c_int32), ("init_normal", C.c_int32),
                ("init_scale", C.c_double)]


_P = C.c_void_p
_PP = C.POINTER(C.c_void_p)


class RunOptions(C.Structure):
    """rnnc_run_options: training or evaluation, the masks' seed, and each
    sequence's length (--lengths models)."""
    _fields_ = [("train", C.c_int32), ("seed", C.c_uint64), ("call", C.c_uint64),
                ("lengths", C.POINTER(C.c_int32)), ("loss_scale", C.c_double)]


class Model(C.Structure):
    _fields_ = [("abi_version", C.c_int32), ("name", C.c_char_p), ("source_hash", C.c_char_p),
                ("real_bytes", C.c_int32), ("dtype", C.c_int32), ("param_elements", C.c_int64),
                ("n_params", C.c_int32), ("params", C.POINTER(Tensor)),
                ("n_inputs", C.c_int32), ("inputs", C.POINTER(Tensor)),
                ("n_outputs", C.c_int32), ("outputs", C.POINTER(Tensor)),
                ("n_states", C.c_int32), ("states", C.POINTER(Tensor)),
                ("has_loss", C.c_int32),
                ("n_seeds", C.c_int32), ("seeds", C.POINTER(Tensor)),
                ("n_input_grads", C.c_int32), ("input_grads", C.POINTER(Tensor)),
                ("has_state_seeds", C.c_int32), ("has_backward", C.c_int32), ("has_masks", C.c_int32),
                ("has_lengths", C.c_int32),
                ("workspace_bytes", C.CFUNCTYPE(C.c_int64, C.c_int64, C.c_int64)),
                ("forward", C.CFUNCTYPE(C.c_int, _P, C.c_int64, C.c_int64, _P, _P, _P, _P, _P, _P, _P, _P)),
                ("backward", C.CFUNCTYPE(C.c_int, _P, C.c_int64, C.c_int64, _P, _P, _P, _P, _P, _P, _P, _P)),
                ("read_output", C.CFUNCTYPE(None, _P, C.c_int64, C.c_int64, C.c_int32, _P, _P)),
                ("read_final_state", C.CFUNCTYPE(None, _P, C.c_int64, C.c_int64, C.c_int32, _P, _P)),
                ("read_loss", C.CFUNCTYPE(C.c_double, _P, C.c_int64, C.c_int64, _P)),
                ("last_error", C.CFUNCTYPE(C.c_char_p)),
                ("device", C.c_int32),
                ("synchronize", C.CFUNCTYPE(C.c_int, _P)),
                ("device_alloc", C.CFUNCTYPE(_P, C.c_int64)),
                ("device_free", C.CFUNCTYPE(None, _P)),
                ("device_copy", C.CFUNCTYPE(C.c_int, _P, _P, C.c_int64, C.c_int32))]


class TensorInfo:
    """One param, port or state of the table, as plain Python values."""

    def __init__(self, t):
        self.name = t.name.decode()
        self.rank = t.rank
        self.shape = tuple(t.shape[d] for d in range(t.rank))
        self.offset = t.offset
        self.is_index = bool(t.is_index)
        self.depth = t.depth
        self.width = t.shape[0]

    def __repr__(self):
        return f"TensorInfo({self.name!r}, shape={self.shape})"


def _table(ptr, n):
    return [TensorInfo(ptr[i]) for i in range(n)]


class Library:
    """A bundle's shared library, loaded, and its model table."""

    def __init__(self, path, symbol):
        self.path = path
        self.dll = C.CDLL(path, mode=C.RTLD_LOCAL)
        try:
            entry = getattr(self.dll, symbol)
        except AttributeError:
            raise RuntimeError(f"{path} has no {symbol}: not a bundle of this model") from None
        entry.restype = C.POINTER(Model)
        entry.argtypes = []
        ptr = entry()
        if not ptr:
            raise RuntimeError(f"{symbol} in {path} returned no model")
        self.model = ptr.contents
        if self.model.abi_version != ABI_VERSION:
            raise RuntimeError(f"{path} speaks ABI {self.model.abi_version}; this package speaks {ABI_VERSION}: "
                               "compile the bundle again with this rnnc")
        m = self.model
        self.address = C.addressof(m)  # the table, for the C++ op library
        self.name = m.name.decode()
        self.real_bytes = m.real_bytes
        self.dtype = m.dtype  # RNNC_DTYPE_*: 0 f32, 1 f64, 2 bf16, 3 f16
        self.param_elements = m.param_elements
        self.params = _table(m.params, m.n_params)
        self.inputs = _table(m.inputs, m.n_inputs)
        self.outputs = _table(m.outputs, m.n_outputs)
        self.states = _table(m.states, m.n_states)
        self.seeds = _table(m.seeds, m.n_seeds)
        self.input_grads = _table(m.input_grads, m.n_input_grads)
        self.has_loss = bool(m.has_loss)
        self.has_state_seeds = bool(m.has_state_seeds)
        self.has_backward = bool(m.has_backward)
        self.has_masks = bool(m.has_masks)
        self.has_lengths = bool(m.has_lengths)
        self.device = m.device
        self._fwd, self._bwd = m.forward, m.backward

    def error(self):
        msg = self.model.last_error()
        return msg.decode() if msg else "unknown error"

    def workspace_bytes(self, T, B):
        return self.model.workspace_bytes(T, B)

    def forward(self, ws, T, B, params, inputs, states, outputs, final_states, loss, stream=None, options=None):
        """Pointers (ints or None) in, options a RunOptions or None (evaluation);
        raises RuntimeError with the bundle's reason."""
        opts = C.cast(C.pointer(options), _P) if options is not None else None
        if self._fwd(ws, T, B, params, _array(inputs), _array(states), _array(outputs), _array(final_states),
                     loss, opts, stream) != 0:
            raise RuntimeError(f"{self.name}: {self.error()}")

    def backward(self, ws, T, B, params, inputs, seeds, state_seeds, param_grads, input_grads, state_grads,
                 stream=None):
        """inputs: forward's again (the same values), which the bundle reads in place."""
        if self._bwd(ws, T, B, params, _array(inputs), _array(seeds), _array(state_seeds), param_grads, _array(input_grads),
                     _array(state_grads), stream) != 0:
            raise RuntimeError(f"{self.name}: {self.error()}")

    def synchronize(self, stream=None):
        if self.model.synchronize(stream) != 0:
            raise RuntimeError(f"{self.name}: {self.error()}")


def _array(ptrs):
    """A list of pointers (ints, None for NULL) as a C array; None or [] for NULL."""
    if not ptrs:
        return None
    return (C.c_void_p * len(ptrs))(*ptrs)
