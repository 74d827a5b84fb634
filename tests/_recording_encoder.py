"""An mteb encoder that records the texts mteb's evaluators ask it to encode (what a task reads ahead is checked
against it)."""

from __future__ import annotations

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction


class RecordingEncoder(AbsEncoder):
    """Records every text mteb's evaluator asks it to encode; vectors are a fixed function of the text."""

    def __init__(self):
        self.texts: list[str] = []
        self.mteb_model_meta = ModelMeta.create_empty(
            {"name": "test/recorder", "similarity_fn_name": ScoringFunction.COSINE, "framework": ["PyTorch"]}
        )

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        texts = [text for batch in inputs for text in batch["text"]]
        self.texts += texts
        return np.stack([np.random.default_rng(sum(map(ord, t))).standard_normal(8) for t in texts]).astype(np.float32)
