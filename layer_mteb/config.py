"""How texts become vectors: the settings that change a pooled vector, validated once, up front."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Literal, get_args

from layer_mteb.errors import UserError

if TYPE_CHECKING:
    import torch

Readout = Literal["final_norm", "raw"]
Pooling = Literal["mean", "last", "first"]
DType = Literal["float32", "bfloat16", "float16"]

READOUTS: tuple[str, ...] = get_args(Readout)
POOLINGS: tuple[str, ...] = get_args(Pooling)
DTYPES: tuple[str, ...] = get_args(DType)


@dataclass(frozen=True)
class EncodeConfig:
    """Everything besides the model that decides a pooled vector (and so keys caches and results).

    ``readout="final_norm"`` applies the model's final norm to every intermediate layer, as the paper's
    truncated models did; ``"raw"`` reads the residual stream as ``output_hidden_states`` returns it.
    ``batch_size``, ``max_batch_tokens``, ``device`` and ``device_map`` change speed and placement, not the vectors
    meant, so they are not part of :meth:`key`. Batches are length-sorted; ``max_batch_tokens`` also caps a batch's
    padded size (texts x longest), so batches of short texts grow and batches of long ones shrink (less padding;
    on CPU ~512-1024 tokens is the measured sweet spot, see ``benchmarks/README.md``).
    """

    readout: Readout = "final_norm"
    pooling: Pooling = "mean"
    max_length: int = 512
    dtype: DType = "float32"
    batch_size: int = 32
    device: str = "cpu"
    device_map: str | None = None
    max_batch_tokens: int | None = None

    def __post_init__(self) -> None:
        _check_choice("readout", self.readout, READOUTS)
        _check_choice("pooling", self.pooling, POOLINGS)
        _check_choice("dtype", self.dtype, DTYPES)
        if self.max_length < 1:
            raise UserError(f"--max-length must be a positive integer, got {self.max_length}")
        if self.batch_size < 1:
            raise UserError(f"--batch-size must be a positive integer, got {self.batch_size}")
        if self.max_batch_tokens is not None and self.max_batch_tokens < 1:
            raise UserError(f"--max-batch-tokens must be a positive integer, got {self.max_batch_tokens}")
        if self.device.startswith("cuda") and not _cuda_available():
            raise UserError(f"--device {self.device} was asked for but no CUDA GPU is available; use --device cpu")

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.dtype)

    def key(self) -> dict[str, str | int]:
        """The settings that change vectors: part of every cache key and of mteb's experiment name."""
        return {k: v for k, v in asdict(self).items() if k in SETTINGS_COLUMNS}


_PLACEMENT = ("batch_size", "max_batch_tokens", "device", "device_map")
#: The encode settings as columns of every table (scores, metrics) and parts of every key: EncodeConfig's fields
#: that change vectors, in declaration order.
SETTINGS_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(EncodeConfig) if f.name not in _PLACEMENT)


def default_device() -> str:
    return "cuda" if _cuda_available() else "cpu"


def _cuda_available() -> bool:
    import torch  # here, not at the top: the command line parses its options without loading torch

    return torch.cuda.is_available()


def _check_choice(option: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise UserError(f"--{option.replace('_', '-')} must be one of {', '.join(choices)}; got {value!r}")
