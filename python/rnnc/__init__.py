"""rnnc in PyTorch: `rnnc.load("cell.rnn", H=512)` compiles a recurrent cell
written in rnnc's language and returns it as an `nn.Module` backed by the
generated code (docs/torch.md)."""
from ._build import CompileError, find_rnnc  # noqa: F401
from .torch import Recurrent, from_torch, load, load_bundle  # noqa: F401

__version__ = "0.1.0"
