"""layer_mteb: which layer of a language model makes the best text embeddings, scored with mteb's own evaluators.

The public names below load on first use (PEP 562), so ``import layer_mteb`` and ``layer-mteb --help`` stay fast:
mteb, transformers' models and the plotting stack are imported only by the code that needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from layer_mteb.common.package import VERSION, lazy_names

if TYPE_CHECKING:
    from layer_mteb.analysis.report.build import write_report
    from layer_mteb.analysis.report.table1 import build_table1
    from layer_mteb.analysis.runs.mteb_results import mteb_layer_scores
    from layer_mteb.analysis.selection.correlation import correlate
    from layer_mteb.analysis.selection.leaderboard import leaderboard
    from layer_mteb.analysis.selection.picks import select_layers
    from layer_mteb.common.config import EncodeConfig
    from layer_mteb.common.errors import UserError
    from layer_mteb.common.run_folder import RunFolder
    from layer_mteb.evaluation.encoder import LayerEncoder
    from layer_mteb.evaluation.sweep import sweep
    from layer_mteb.metrics.metric_settings import MetricSettings
    from layer_mteb.metrics.runner import compute_metrics
    from layer_mteb.model.architectures import ARCHITECTURES, LoadedModel, wrap_model
    from layer_mteb.model.loading import PACKAGED_MODELS, load_model
    from layer_mteb.tasks.catalog import load_tasks
    from layer_mteb.vectors.store import LayerCache

#: public name -> the module that defines it
_HOMES = {
    "ARCHITECTURES": "model.architectures",
    "LoadedModel": "model.architectures",
    "EncodeConfig": "common.config",
    "correlate": "analysis.selection.correlation",
    "mteb_layer_scores": "analysis.runs.mteb_results",
    "LayerEncoder": "evaluation.encoder",
    "UserError": "common.errors",
    "RunFolder": "common.run_folder",
    "PACKAGED_MODELS": "model.loading",
    "load_model": "model.loading",
    "wrap_model": "model.architectures",
    "MetricSettings": "metrics.metric_settings",
    "compute_metrics": "metrics.runner",
    "write_report": "analysis.report.build",
    "build_table1": "analysis.report.table1",
    "leaderboard": "analysis.selection.leaderboard",
    "select_layers": "analysis.selection.picks",
    "LayerCache": "vectors.store",
    "load_tasks": "tasks.catalog",
    "sweep": "evaluation.sweep",
}

__all__ = [
    "ARCHITECTURES",
    "PACKAGED_MODELS",
    "EncodeConfig",
    "LayerCache",
    "LayerEncoder",
    "LoadedModel",
    "MetricSettings",
    "RunFolder",
    "UserError",
    "build_table1",
    "compute_metrics",
    "correlate",
    "leaderboard",
    "load_model",
    "load_tasks",
    "mteb_layer_scores",
    "select_layers",
    "sweep",
    "wrap_model",
    "write_report",
]

__version__ = VERSION

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
