"""The settings of one (model, task) unit, decided once before encoding and only read afterwards: every choice an
:class:`~layer_mteb.common.config.EncodeConfig` leaves open made, so ``run.json``, ``scores.csv``, mteb's
``experiment_kwargs`` and the vector-cache key are written from one object and cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.instructions import Instructions
from layer_mteb.common.prompts import Prompts


@dataclass(frozen=True)
class RunSettings:
    """What one (model, task) runs with: the encode settings (the attention the model runs, the memory limit), the
    data's origin and fingerprint, the prompts or instructions (which replace them), and ``settings_from``."""

    encode: EncodeConfig
    data: str | None = None
    data_fingerprint: str | None = None
    prompts: Prompts | None = None
    instructions: Instructions | None = None
    settings_from: str | None = None

    def __post_init__(self) -> None:
        if self.encode.attention is None:
            raise ValueError("RunSettings need the attention the model runs; build them with resolve_settings")

    def key(self) -> dict[str, str | int | bool | None]:
        """The settings that change vectors (the columns of every table, the parts of every key)."""
        return self.encode.key()

    def experiment(self, layer: int, n_layers: int) -> dict[str, object]:
        """mteb's ``experiment_kwargs`` for ``layer``: mteb keys stored results by (name, revision, these, task)."""
        experiment: dict[str, object] = {"layer": layer, "n_layers": n_layers, **self.key()}
        if self.data_fingerprint is not None:
            experiment["data"] = self.data_fingerprint
        if self.prompts is not None:  # a prompted run's results are never an unprompted run's
            experiment["prompts"] = self.prompts.digest()
        if self.instructions is not None:
            experiment["instructions"] = self.instructions.digest()
        return experiment

    def prompt_for(self, task_metadata, prompt_type) -> str:
        """The prompt or instruction put before the texts of a task encoded as ``prompt_type`` ("" without)."""
        if self.instructions is not None:
            return self.instructions.text_for(task_metadata, prompt_type)
        return self.prompts.text_for(task_metadata, prompt_type) if self.prompts is not None else ""

    def record(self, eval_workers: int, task_metadata: object = None) -> dict[str, object]:
        """The settings as ``run.json`` states them for one task (with ``task_metadata``: its instruction texts)."""
        return {
            "settings": self.key(),
            "data": self.data,
            "data_fingerprint": self.data_fingerprint,
            "max_cache_memory": self.encode.max_cache_memory,
            "eval_workers": eval_workers,
            **({"prompts": self.prompts.record()} if self.prompts is not None else {}),
            **({"instructions": self.instructions.record(task_metadata)} if self.instructions is not None else {}),
            **({"settings_from": self.settings_from} if self.settings_from is not None else {}),
        }
