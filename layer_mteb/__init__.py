"""layer_mteb: which layer of a language model makes the best text embeddings, scored with mteb's own evaluators.

The public names below load on first use (PEP 562), so ``import layer_mteb`` and ``layer-mteb --help`` stay fast:
mteb, transformers' models and the plotting stack are imported only by the code that needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from layer_mteb._lazy import lazy_names

if TYPE_CHECKING:
    from layer_mteb.architectures import ARCHITECTURES, LoadedModel
    from layer_mteb.config import EncodeConfig
    from layer_mteb.correlation import correlate
    from layer_mteb.encoder import LayerEncoder
    from layer_mteb.errors import UserError
    from layer_mteb.loading import PACKAGED_MODELS, load_model, wrap_model
    from layer_mteb.metrics.runner import MetricSettings, compute_metrics
    from layer_mteb.report import write_report
    from layer_mteb.selection import leaderboard, select_layers
    from layer_mteb.store import LayerCache
    from layer_mteb.sweep import sweep
    from layer_mteb.table1 import build_table1
    from layer_mteb.tasks import load_tasks

#: public name -> the module that defines it
_HOMES = {
    "ARCHITECTURES": "architectures",
    "LoadedModel": "architectures",
    "EncodeConfig": "config",
    "correlate": "correlation",
    "LayerEncoder": "encoder",
    "UserError": "errors",
    "PACKAGED_MODELS": "loading",
    "load_model": "loading",
    "wrap_model": "loading",
    "MetricSettings": "metrics.runner",
    "compute_metrics": "metrics.runner",
    "write_report": "report",
    "build_table1": "table1",
    "leaderboard": "selection",
    "select_layers": "selection",
    "LayerCache": "store",
    "load_tasks": "tasks",
    "sweep": "sweep",
}

__all__ = [
    "ARCHITECTURES",
    "PACKAGED_MODELS",
    "EncodeConfig",
    "LayerCache",
    "LayerEncoder",
    "LoadedModel",
    "MetricSettings",
    "UserError",
    "build_table1",
    "compute_metrics",
    "correlate",
    "leaderboard",
    "load_model",
    "load_tasks",
    "select_layers",
    "sweep",
    "wrap_model",
    "write_report",
]
__version__ = "0.1.0"


__getattr__, __dir__ = lazy_names(__name__, _HOMES)
