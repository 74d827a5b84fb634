"""How texts become vectors: the settings that change a pooled vector, validated once, up front."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin, get_type_hints

from layer_mteb.common.errors import UserError
from layer_mteb.common.pooling import POOLINGS, Pooling

if TYPE_CHECKING:
    import torch

Readout = Literal["final_norm", "raw"]
DType = Literal["float32", "bfloat16", "float16"]
Attention = Literal["bidirectional", "causal"]
#: how the representation metrics are computed from the vectors: ``paper``, the paper's formulas exactly; ``authors``,
#: as the authors' final code computes them (its preprocessing and its departures from the formulas, docs/selection.md)
Arithmetic = Literal["paper", "authors"]

#: bytes per element of each dtype
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
#: texts per batch when none is given, on a CPU and on a GPU (see :meth:`EncodeConfig.batch_limits`)
CPU_BATCH_SIZE = 32
GPU_BATCH_SIZE = 1024
#: on a GPU without a given token cap: the bytes one batch's hidden states of every layer may take, and a ceiling
GPU_STATE_BYTES = 4 * 2**30
GPU_BATCH_TOKENS = 65536

READOUTS: tuple[str, ...] = get_args(Readout)
DTYPES: tuple[str, ...] = get_args(DType)
ATTENTIONS: tuple[str, ...] = get_args(Attention)
ARITHMETICS: tuple[str, ...] = get_args(Arithmetic)
#: the device "cuda where there is one", decided by :meth:`EncodeConfig.placed` once torch may load
AUTO = "auto"
#: the settings a model's own protocol decides (``run --protocol model``: its sentence-transformers pipeline, the dtype
#: its mteb registry entry loads it in) and the paper fixes
PIPELINE_SETTINGS = ("pooling", "max_length", "normalize", "dtype")


@dataclass(frozen=True)
class EncodeConfig:
    """Everything besides the model that decides a pooled vector (and so keys caches and results).

    The fields with a ``help`` change vectors (:meth:`key`); the rest place the work. ``max_batch_tokens`` caps a
    batch's padded size (on CPU ~512-1024 is the measured sweet spot, ``benchmarks/README.md``). ``attention=None`` is
    the model's own, filled in once loaded so keys name what ran. ``max_cache_memory`` (bytes) bounds the pooled
    vectors a task keeps in memory (default: automatic); beyond it they go to disk.
    """

    readout: Readout = field(
        default="final_norm", metadata={"help": "apply the final norm to every layer, or read raw"}
    )
    pooling: Pooling = field(
        default="mean", metadata={"help": "how token states become one vector", "choices": POOLINGS}
    )
    max_length: int = field(default=512, metadata={"help": "tokens per text, longer texts are truncated"})
    dtype: DType = field(default="float32", metadata={"help": "of the weights and activations"})
    batch_size: int | None = None
    device: str = "cpu"
    device_map: str | None = None
    max_batch_tokens: int | None = None
    attention: Attention | None = field(
        default=None, metadata={"help": "decoder self-attention; bidirectional for LLM2Vec adapters, else causal"}
    )
    normalize: bool = field(
        default=False, metadata={"help": "L2-normalise each pooled vector, as sentence-transformers' Normalize does"}
    )
    max_cache_memory: int | None = None

    def __post_init__(self) -> None:
        for setting in SETTINGS:
            value = getattr(self, setting.name)
            if setting.choices and value is not None and value not in setting.choices:
                raise UserError(f"{setting.option} must be one of {', '.join(setting.choices)}; got {value!r}")
        for name in ("max_length", "batch_size", "max_batch_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserError(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
        if self.max_cache_memory is not None and self.max_cache_memory < 1:
            raise UserError(f"--max-cache-memory must be positive, got {self.max_cache_memory} bytes")
        if self.device.startswith("cuda") and not _cuda_available():  # AUTO is checked by placed()
            raise UserError(f"--device {self.device} was asked for but no CUDA GPU is available; use --device cpu")

    def placed(self) -> EncodeConfig:
        """These settings on the device to compute on: :data:`AUTO` is cuda where available, else cpu; under
        ``accelerate launch`` / ``torchrun`` a bare ``cuda`` is this process's GPU."""
        device = process_device(default_device() if self.device == AUTO else self.device)
        return self if device == self.device else replace(self, device=device)

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch  # as in _cuda_available

        return getattr(torch, self.dtype)

    def batch_limits(self, n_states: int, hidden_size: int) -> tuple[int, int | None]:
        """(texts, padded tokens or None) per batch for ``n_states`` hidden states of width ``hidden_size``: the ones
        given, else the device's. A CPU gains nothing from big batches; a GPU is launch-bound on small ones, so it
        takes up to :data:`GPU_BATCH_SIZE` texts whose states fit :data:`GPU_STATE_BYTES`."""
        on_gpu = self.device.startswith("cuda")
        size = self.batch_size or (GPU_BATCH_SIZE if on_gpu else CPU_BATCH_SIZE)
        tokens = self.max_batch_tokens
        if tokens is None and on_gpu:
            per_token = n_states * hidden_size * DTYPE_BYTES[self.dtype]
            tokens = max(1, min(GPU_BATCH_TOKENS, GPU_STATE_BYTES // per_token))
        return size, tokens

    def key(self) -> dict[str, str | int | bool | None]:
        """The settings that change vectors: part of every cache key and of mteb's experiment name."""
        return {k: v for k, v in asdict(self).items() if k in SETTINGS_COLUMNS}

    @classmethod
    def from_key(cls, key: Mapping[str, Any], **placement: Any) -> EncodeConfig:
        """The settings a :meth:`key` or a table row names (as tables hold them: numpy numbers, ``"True"``, an empty
        cell), plus ``placement``; a setting the row lacks keeps its default."""
        return cls(**{s.name: s.read(key[s.name]) for s in SETTINGS if s.name in key}, **placement)


@dataclass(frozen=True)
class Setting:
    """One field of :class:`EncodeConfig` that changes vectors (it has a ``help``), as options and tables need it."""

    name: str
    kind: type
    choices: tuple[str, ...] | None
    may_be_none: bool
    default: Any
    help: str

    @property
    def option(self) -> str:
        return f"--{self.name.replace('_', '-')}"

    def read(self, value: Any) -> Any:
        """The value a table cell or key holds, as EncodeConfig takes it."""
        if self.may_be_none and (value is None or str(value) == "nan"):
            return None
        return str(value) == "True" if self.kind is bool else self.kind(value)


def _settings() -> tuple[Setting, ...]:
    hints, found = get_type_hints(EncodeConfig), []
    for f in (f for f in fields(EncodeConfig) if "help" in f.metadata):
        hint = hints[f.name]
        optional = get_origin(hint) is not Literal and type(None) in get_args(hint)
        kind = next(k for k in get_args(hint) if k is not type(None)) if optional else hint
        choices = f.metadata.get("choices") or (get_args(kind) if get_origin(kind) is Literal else None)
        found.append(Setting(f.name, str if choices else kind, choices, optional, f.default, f.metadata["help"]))
    return tuple(found)


#: the settings that change vectors, in declaration order: an option of every command that encodes, a table column
SETTINGS: tuple[Setting, ...] = _settings()
#: their names: columns of every table (scores, metrics, cost) and parts of every key
SETTINGS_COLUMNS: tuple[str, ...] = tuple(s.name for s in SETTINGS)

#: The settings that change a metric computed from the same vectors (not the vectors): an option of ``metrics``, a
#: column of ``metrics.csv`` and of every table made from it (a table written before one existed reads as its default).
METRIC_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "arithmetic",
        str,
        ARITHMETICS,
        False,
        "paper",
        "paper: the paper's formulas; authors: as the authors' final code computes them (centred unit rows, "
        "elementwise-clamped Gram, |cos| curvature, ...; docs/selection.md)",
    ),
)
METRIC_SETTINGS_COLUMNS: tuple[str, ...] = tuple(s.name for s in METRIC_SETTINGS)


def option(help: str, default: Any = None, **argparse_keywords: Any) -> Any:
    """A settings field that is also a command's option: the one place the option's default and help are said.

    The command line's ``add_fields`` makes the option from it: ``--<field-name>`` (``flags=`` where the option is
    named otherwise), its type, choices or on/off action from the field's annotation and default; other keywords go
    to argparse's ``add_argument`` as they are. The parser's help ends each option with its default, so the help
    never restates it.
    """
    return field(default=default, metadata={"help": help, "argparse": argparse_keywords})


def default_device() -> str:
    """cuda where there is one, else cpu."""
    return "cuda" if _cuda_available() else "cpu"


def process_device(device: str) -> str:
    """Under ``accelerate launch`` / ``torchrun`` on GPUs each process takes its own GPU (``LOCAL_RANK``)."""
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        return f"cuda:{os.environ['LOCAL_RANK']}"
    return device


def _cuda_available() -> bool:
    import torch  # here, not at the top: the command line parses its options without loading torch

    return torch.cuda.is_available()
