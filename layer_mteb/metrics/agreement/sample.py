"""The seeded sample of a task's own texts that the agreement curves are measured on, and the curves' default
sample size and seed: read by the curves' computation (:mod:`.run`) and by the selection that reads the stored
curves back (which must know a sample's size without loading any model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from layer_mteb.common.errors import UserError
from layer_mteb.metrics.texts import TASK_TEXTS, load_texts

DEFAULT_N, DEFAULT_SEED = 256, 0


def sample_texts(task: str, n: int = DEFAULT_N, seed: int = DEFAULT_SEED, data_dir: str | Path | None = None) -> list:
    """The first ``n`` of a ``seed``-permutation of the task's unique evaluation texts (all of them when fewer)."""
    if n < 2:
        raise UserError(f"agreement needs at least 2 texts, got n={n}")
    texts = load_texts(f"{TASK_TEXTS}{task}", n_prompts=1 << 62, data_dir=data_dir).texts
    order = np.random.default_rng(seed).permutation(len(texts))
    return [texts[i] for i in order[:n]]
