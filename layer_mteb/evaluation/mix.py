"""``LayerMixEncoder``: the mean of several layers of the all-layer cache as one mteb encoder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from mteb.models.model_meta import ModelMeta

from layer_mteb.common.errors import UserError
from layer_mteb.common.settings import RunSettings
from layer_mteb.evaluation.encoder import LayerEncoder, model_meta
from layer_mteb.evaluation.plan import resolve_layer
from layer_mteb.vectors.store import LayerCache


class LayerMixEncoder(LayerEncoder):
    """The element-wise mean of the pooled hidden states ``layers`` of the vectors in ``cache``.

    A view like :class:`LayerEncoder` (same cache, same checks), over a combination of layers instead of one:
    each text's vector is the mean of its cached vectors of those layers, summed in float64 and handed to mteb as
    float32, so a combination of one layer gives that layer's vectors exactly. ``experiment_kwargs`` name the
    layers and the combination instead of a single layer, so mteb's result cache never serves one for the other.
    """

    COMBINE = "mean"

    def __init__(self, cache: LayerCache, layers: Sequence[int], *, settings: RunSettings):
        if not layers:
            raise ValueError("a layer combination needs at least one layer")
        super().__init__(cache, layers[0], settings=settings)
        resolved = [resolve_layer(layer, self.model.n_layers) for layer in layers]
        if len(set(resolved)) != len(resolved):
            raise ValueError(f"layers {list(layers)} name a layer twice")
        self.layers = tuple(sorted(resolved))
        self._meta = mix_meta(model_meta(self.model, self.layers[0], settings), self.layers)

    @property
    def label(self) -> str:
        """``mean:3,4,5``: the combination as tables name it."""
        return f"{self.COMBINE}:{','.join(map(str, self.layers))}"

    def encode(self, inputs, *, task_metadata, hf_split: str, hf_subset: str, prompt_type=None, **kwargs: Any):
        texts = [text for batch in inputs for text in batch["text"]]
        total = np.zeros((len(texts), self.model.hidden_size), dtype=np.float64)
        for layer in self.layers:
            total += self.cache.layer_rows(texts, layer)
        vectors = (total / len(self.layers)).astype(np.float32)
        if not np.isfinite(vectors).all():
            raise UserError(
                f"layers {self.label} of {self.model.name} give NaN/inf vectors in {self.config.dtype} "
                "(overflow); rerun with --dtype float32 or --dtype bfloat16"
            )
        return vectors


def mix_meta(single: ModelMeta, layers: tuple[int, ...]) -> ModelMeta:
    """``single``'s meta (one layer's) with the layer replaced by the combined layers and how they combine."""
    experiment = {key: value for key, value in (single.experiment_kwargs or {}).items() if key != "layer"}
    experiment = {"layers": list(layers), "combine": LayerMixEncoder.COMBINE, **experiment}
    return single.model_copy(update={"experiment_kwargs": experiment})
