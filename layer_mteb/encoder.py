"""``LayerEncoder``: one layer of a model as an mteb encoder, reading pooled vectors from the all-layer cache."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction

from layer_mteb.architectures import LoadedModel
from layer_mteb.config import EncodeConfig
from layer_mteb.errors import UserError
from layer_mteb.loading import load_model
from layer_mteb.store import LayerCache


class LayerEncoder(AbsEncoder):
    """Mean-pooled (by default) hidden state ``layer`` of ``model``, usable directly with ``mteb.evaluate``.

    ``layer`` counts hidden states: 0 is the embedding output, ``n_layers`` the last block; negative values count
    from the end. Several ``LayerEncoder`` views may share one :class:`LayerCache`, so a text is encoded once for
    all layers. The layer and encode settings go into ``ModelMeta.experiment_kwargs``: mteb's result cache keeps
    each layer's results apart.
    """

    def __init__(
        self,
        model: LoadedModel | str,
        layer: int = -1,
        *,
        config: EncodeConfig | None = None,
        cache: LayerCache | None = None,
        data_fingerprint: str | None = None,
    ):
        if cache is not None:
            model, config = cache.model, cache.config
        config = config or EncodeConfig()
        self.model = model if isinstance(model, LoadedModel) else load_model(model, config)
        self.layer = resolve_layer(layer, self.model.n_layers)
        self.config = config
        self.cache = cache if cache is not None else LayerCache(self.model, config)
        self._meta = model_meta(self.model, self.layer, config, data_fingerprint)

    @property
    def mteb_model_meta(self) -> ModelMeta:
        return self._meta

    def encode(self, inputs, *, task_metadata, hf_split: str, hf_subset: str, prompt_type=None, **kwargs: Any):
        texts = [text for batch in inputs for text in batch["text"]]
        vectors = self.cache.vectors(texts, layer=self.layer)
        if not torch.isfinite(vectors).all():
            raise UserError(
                f"layer {self.layer} of {self.model.name} gives NaN/inf vectors in {self.config.dtype} "
                "(overflow); rerun with --dtype float32 or --dtype bfloat16"
            )
        return vectors.cpu().numpy().astype(np.float32, copy=False)


def resolve_layer(layer: int, n_layers: int) -> int:
    """Map a possibly negative hidden-state index to 0..n_layers, or explain the valid range."""
    if not -(n_layers + 1) <= layer <= n_layers:
        valid = f"0..{n_layers} (or -{n_layers + 1}..-1)"
        raise UserError(f"layer {layer} is out of range: this model has hidden states {valid}")
    return layer % (n_layers + 1)


def model_meta(model: LoadedModel, layer: int, config: EncodeConfig, data_fingerprint: str | None = None) -> ModelMeta:
    """A real ``ModelMeta``: the model's own name and revision, with the layer and encode settings as experiment.

    mteb keys stored results by (name, revision, experiment_kwargs, task) only, so everything else that changes a
    score (layer, readout, pooling, max length, dtype, and the data when it is a local copy) goes in here.
    """
    experiment = {"layer": layer, "n_layers": model.n_layers, **config.key()}
    if data_fingerprint is not None:
        experiment["data"] = data_fingerprint
    n_parameters = sum(p.numel() for p in model.model.parameters())
    return ModelMeta(
        loader=None,
        name=model.name,
        revision=model.revision,
        release_date=None,
        languages=None,
        n_parameters=n_parameters,
        memory_usage_mb=None,
        max_tokens=config.max_length,
        embed_dim=model.hidden_size,
        license=None,
        open_weights=True,
        public_training_code=None,
        public_training_data=None,
        framework=["PyTorch"],
        similarity_fn_name=ScoringFunction.COSINE,
        use_instructions=False,
        training_datasets=None,
        experiment_kwargs=experiment,
    )
