"""``LayerEncoder``: one layer of the all-layer cache as an mteb encoder; and the settings of one (model, task)
resolved once (:func:`resolve_settings`) that every encoder, cache and record of it reads."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.instructions import NONE as NO_INSTRUCTIONS
from layer_mteb.common.instructions import Instructions
from layer_mteb.common.prompts import Prompts
from layer_mteb.common.settings import RunSettings
from layer_mteb.evaluation.plan import resolve_layer
from layer_mteb.evaluation.request import own_settings
from layer_mteb.model.architectures import LoadedModel
from layer_mteb.model.attention import with_model_attention
from layer_mteb.model.loading import load_model
from layer_mteb.vectors.memory import resolve_memory_limit
from layer_mteb.vectors.store import LayerCache


def resolve_settings(
    loaded: LoadedModel,
    config: EncodeConfig,
    *,
    data: str | None = None,
    data_fingerprint: str | None = None,
    prompts: Prompts | None = None,
    instructions: Instructions | None = None,
    settings_from: str | None = None,
) -> RunSettings:
    """Every open choice of ``config`` made for ``loaded`` before anything is encoded: the attention it runs, and the
    memory limit measured now that the model takes its memory."""
    limit = resolve_memory_limit(config.max_cache_memory, config.device)
    return RunSettings(
        encode=replace(with_model_attention(config, loaded), max_cache_memory=limit),
        data=data,
        data_fingerprint=data_fingerprint,
        prompts=prompts,
        instructions=instructions,
        settings_from=settings_from,
    )


class LayerEncoder(AbsEncoder):
    """Pooled hidden state ``layer`` (0: embeddings; negative counts from the end) of ``cache``, for ``mteb.evaluate``.

    Views share one :class:`LayerCache`, so a text is encoded once for all layers; the layer and ``settings`` go
    into ``ModelMeta.experiment_kwargs`` so mteb's result cache keeps them apart.
    """

    def __init__(self, cache: LayerCache, layer: int = -1, *, settings: RunSettings):
        if not isinstance(cache, LayerCache):
            raise TypeError(f"LayerEncoder views a LayerCache, not {cache!r}; LayerEncoder.from_model builds one")
        made = cache.config  # may leave the attention open (the model's own): the settings name it
        if made.attention is None:
            made = replace(made, attention=settings.encode.attention)
        if made.key() != settings.key():
            raise ValueError(f"the cache's vectors were made with {made.key()}, not with {settings.key()}")
        self.cache, self.settings = cache, settings
        self.model = cache.model
        self.layer = resolve_layer(layer, self.model.n_layers)
        self._meta = model_meta(self.model, self.layer, settings)

    @classmethod
    def from_model(
        cls,
        model: LoadedModel | str,
        layer: int = -1,
        *,
        config: EncodeConfig | None = None,
        revision: str | None = None,
        trust_remote_code: bool = False,
    ) -> LayerEncoder:
        """``layer`` of ``model`` (loaded, or a name) over a cache of its own; ``config`` defaults to the model's own
        sentence-transformers pipeline, as in :func:`~layer_mteb.evaluation.sweep.sweep` (no instructions, so neither
        their registry entry's tokenizer arguments nor its dtype)."""
        if config is None:
            config = EncodeConfig(**own_settings([model], revision, "model", NO_INSTRUCTIONS).settings)
        if not isinstance(model, LoadedModel):
            model = load_model(model, config, revision=revision, trust_remote_code=trust_remote_code)
        settings = resolve_settings(model, config)
        return cls(LayerCache(model, settings.encode), layer, settings=settings)

    @property
    def config(self) -> EncodeConfig:
        """The encode settings that ran (the attention filled in)."""
        return self.settings.encode

    @property
    def mteb_model_meta(self) -> ModelMeta:
        return self._meta

    def encode(self, inputs, *, task_metadata, hf_split: str, hf_subset: str, prompt_type=None, **kwargs: Any):
        """mteb's encode: this layer's cached vectors of the batches' texts as the model reads them (the run's prompt
        for the task and type first), encoding the unseen ones; unless an overflow in the model's dtype made some
        NaN/inf: then a one-line error naming the fix."""
        prompt = self.settings.prompt_for(task_metadata, prompt_type)
        texts = [prompt + text for batch in inputs for text in batch["text"]]
        vectors = self.cache.layer_rows(texts, self.layer)  # on the host, gathered in chunks
        if not np.isfinite(vectors).all():
            raise UserError(
                f"layer {self.layer} of {self.model.name} gives NaN/inf vectors in {self.config.dtype} (overflow); "
                "rerun with --dtype float32 or --dtype bfloat16"
            )
        return vectors

    def similarity(self, embeddings1, embeddings2) -> torch.Tensor:
        """mteb's cosine of every row pair, in float32 on the CPU: mteb's own moves to a GPU where there is one, which
        a forked worker cannot use and which changes the last bits (so retrieval ties)."""
        return _unit_rows(embeddings1) @ _unit_rows(embeddings2).T

    def similarity_pairwise(self, embeddings1, embeddings2) -> torch.Tensor:
        """mteb's cosine of each row with the same row of the other, on the CPU like :meth:`similarity`."""
        return (_unit_rows(embeddings1) * _unit_rows(embeddings2)).sum(dim=-1)


def _unit_rows(embeddings) -> torch.Tensor:
    """Embeddings (numpy or torch, one vector or a matrix) as a float32 CPU matrix of unit rows."""
    rows = torch.as_tensor(embeddings).to(device="cpu", dtype=torch.float32)
    return torch.nn.functional.normalize(rows.reshape(1, -1) if rows.dim() == 1 else rows, p=2, dim=1)


def model_meta(model: LoadedModel, layer: int, settings: RunSettings) -> ModelMeta:
    """A real ``ModelMeta``: the model's name and revision; the layer and everything else that changes a score go in
    ``experiment_kwargs``, as mteb keys stored results by (name, revision, experiment_kwargs, task) only."""
    return ModelMeta(
        loader=None,
        name=model.name,
        revision=model.revision,
        release_date=None,
        languages=None,
        n_parameters=sum(p.numel() for p in model.model.parameters()),
        memory_usage_mb=None,
        max_tokens=settings.encode.max_length,
        embed_dim=model.hidden_size,
        license=None,
        open_weights=True,
        public_training_code=None,
        public_training_data=None,
        framework=["PyTorch"],
        similarity_fn_name=ScoringFunction.COSINE,
        use_instructions=False,
        training_datasets=None,
        experiment_kwargs=settings.experiment(layer, model.n_layers),
    )
