"""``LayerEncoder``: one layer of a model as an mteb encoder, reading pooled vectors from the all-layer cache."""

from __future__ import annotations

from typing import Any

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.plan import resolve_layer
from layer_mteb.model.architectures import LoadedModel
from layer_mteb.model.loading import load_model
from layer_mteb.vectors.store import LayerCache


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
        self.cache = cache if cache is not None else LayerCache(self.model, config)
        self.config = self.cache.config  # with the attention the model really runs
        self._meta = model_meta(self.model, self.layer, self.config, data_fingerprint)

    @property
    def mteb_model_meta(self) -> ModelMeta:
        return self._meta

    def encode(self, inputs, *, task_metadata, hf_split: str, hf_subset: str, prompt_type=None, **kwargs: Any):
        texts = [text for batch in inputs for text in batch["text"]]
        vectors = self.cache.layer_rows(texts, self.layer)  # on the host, gathered in chunks
        if not np.isfinite(vectors).all():
            raise UserError(
                f"layer {self.layer} of {self.model.name} gives NaN/inf vectors in {self.config.dtype} "
                "(overflow); rerun with --dtype float32 or --dtype bfloat16"
            )
        return vectors


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
