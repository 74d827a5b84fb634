"""All metrics of every layer for one text source, from the single forward pass that yields pooled vectors.
Token metrics are reduced per batch (:class:`TokenMetrics`: one scalar per layer and prompt, never all token
states); InfoNCE, LiDAR and DiME need a second pass over augmented views only."""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Sequence
from functools import partial
from itertools import product
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from layer_mteb.common.config import EncodeConfig, default_device
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.common.table import layer_columns
from layer_mteb.metrics import METRICS_TABLE, PROMPT_ENTROPIES, authors_arithmetic, representation, tidy_metrics
from layer_mteb.metrics.metric_settings import MetricSettings
from layer_mteb.metrics.representation import Normalization, augment, masked_mean, normalize_entropy
from layer_mteb.metrics.texts import TextSource, encoded_texts_label, load_texts
from layer_mteb.model.architectures import LoadedModel
from layer_mteb.model.attention import with_model_attention
from layer_mteb.model.forward import encode_all_layers
from layer_mteb.model.loading import load_model

logger = logging.getLogger(__name__)


class TokenMetrics:
    """Batch observer: prompt entropy and curvature of every prompt at every layer, kept as [L+1, n] scalars.
    ``curvature=False`` skips curvature (left invalid) for callers that read entropy only."""

    def __init__(self, n_states: int, n_texts: int, settings: MetricSettings, *, curvature: bool = True):
        self.settings, self.with_curvature = settings, curvature
        self.entropies_of = _arithmetic(settings).token_entropies
        self.curvatures_of = (
            authors_arithmetic.token_curvatures
            if settings.authors
            else partial(representation.token_curvatures, absolute=settings.absolute_curvature)
        )
        self.entropy, self.curvature = (torch.zeros(n_states, n_texts, dtype=torch.float64) for _ in range(2))
        self.entropy_valid, self.curvature_valid = (torch.zeros(n_states, n_texts, dtype=torch.bool) for _ in range(2))
        self.lengths = torch.zeros(n_texts, dtype=torch.float64)
        self.hidden_size = 0

    def __call__(self, states: Sequence[torch.Tensor], mask: torch.Tensor, positions: Sequence[int]) -> None:
        """Every layer's values computed on the device, then copied to the host once per batch (stacked): a check or
        a copy per layer would each wait for the device."""
        rows = torch.as_tensor(list(positions), dtype=torch.long)
        self.hidden_size = states[0].shape[-1]
        padding = ~mask.bool().to(states[0].device)
        # every real token's state finite; a boolean-mask gather would wait for the device to count the tokens
        finite = [(torch.isfinite(hidden).all(dim=-1) | padding).all() for hidden in states]
        entropies = [self.entropies_of(hidden, mask, self.settings.alpha) for hidden in states]
        bends = [self.curvatures_of(hidden, mask) for hidden in states] if self.with_curvature else []
        bad = [layer for layer, ok in enumerate(torch.stack(finite).tolist()) if not ok]
        if bad:
            raise UserError(f"layer {bad[0]} produced NaN or inf hidden states; try --dtype float32")
        entropy, lengths, valid = _on_host(entropies)
        self.entropy[:, rows], self.entropy_valid[:, rows], self.lengths[rows] = entropy, valid, lengths[0].double()
        if bends:
            self.curvature[:, rows], self.curvature_valid[:, rows] = _on_host(bends)

    def normalized(self, normalization: Normalization) -> torch.Tensor:
        """[L+1, n] prompt entropies normalised per prompt (N: its token count, D: the hidden size)."""
        # prompts under 2 tokens are invalid (masked out); clamping only keeps their placeholder finite
        return normalize_entropy(self.entropy, normalization, self.lengths.clamp(min=2), max(self.hidden_size, 2))

    def summary(self) -> dict[str, list[tuple[float, int] | None]]:
        """metric -> per layer (mean over valid prompts, their count), or None where no prompt was valid."""
        out = {name: _masked_means(self.normalized(how), self.entropy_valid) for name, how in PROMPT_ENTROPIES.items()}
        out["curvature"] = _masked_means(self.curvature, self.curvature_valid)
        return out


class TaskTextMetrics:
    """Label-free metrics of the texts mteb encodes for a task, gathered while the sweep fills its all-layer cache
    (token metrics via :meth:`observe`, dataset metrics from the cached pooled vectors)."""

    def __init__(self, model: LoadedModel, settings: MetricSettings | None = None):
        self.model = model
        self.settings = settings or MetricSettings(views=0)
        self.parts: list[TokenMetrics] = []

    def observe(self, n_texts: int) -> TokenMetrics:
        """A new observer for one fill of ``n_texts`` texts."""
        part = TokenMetrics(self.model.n_layers + 1, n_texts, self.settings)
        self.parts.append(part)
        return part

    @property
    def n_observed(self) -> int:
        """How many texts' token states this object saw (vectors read from a stored cache were never seen)."""
        return sum(part.lengths.shape[0] for part in self.parts)

    def observe_again(self, texts: Sequence[str], config: EncodeConfig, progress: bool = False) -> None:
        """Observe ``texts`` afresh in one forward pass: their pooled vectors came from a stored cache."""
        self.parts = []
        observer = self.observe(len(texts))
        encode_all_layers(self.model, texts, config, progress=progress, on_batch=observer, into=discard_vectors)

    def rows(self, task: str, pooled: torch.Tensor, config: EncodeConfig) -> pd.DataFrame:
        """Tidy ``metrics.csv`` rows of texts ``encoded:<task>`` (all the evaluator encodes, not ``task:<task>``'s
        splits); empty when this run encoded none of them."""
        if not self.parts:
            return tidy_metrics([])
        source = TextSource(encoded_texts_label(task), (), task, pooled.shape[1])
        rows: list[dict] = []
        add = _row_adder(rows, self.model, config, source, self.settings)
        summaries = [part.summary() for part in self.parts]
        for name, layer in product(summaries[0], range(self.model.n_layers + 1)):
            entries = [s[name][layer] for s in summaries if s[name][layer] is not None]
            count = sum(n for _, n in entries)
            if count:
                add(layer, name, sum(v * n for v, n in entries) / count, count)
        _dataset_metrics(pooled, self.settings, add)
        return tidy_metrics(rows)


def compute_metrics(
    model: LoadedModel | str,
    texts: str | Sequence[str] = "wikitext",
    *,
    config: EncodeConfig | None = None,
    settings: MetricSettings | None = None,
    data_dir: str | Path | None = None,
    output: str | Path | None = None,
    revision: str | None = None,
    trust_remote_code: bool = False,
    progress: bool = True,
) -> pd.DataFrame:
    """Every metric of every layer of ``model`` on ``texts`` (``"wikitext"``, ``"task:<TaskName>"``, a file or a
    list of strings) as a tidy frame; with ``output``, merged into its ``metrics.csv``."""
    settings = settings or MetricSettings()
    model, config = loaded_model(model, config, revision=revision, trust_remote_code=trust_remote_code)
    source = _source(texts, model, settings, data_dir)
    rows: list[dict] = []
    add = _row_adder(rows, model, config, source, settings)

    augmented = min(settings.augment_prompts, len(source.texts)) if settings.views else 0
    logger.info(
        "metrics of %s%s: %d prompts%s, %d layers (%d texts to encode)",
        source.name,
        f" [{source.data}]" if source.data else "",
        len(source.texts),
        f", {settings.views} views x {augmented} prompts" if augmented else ", no views (InfoNCE, LiDAR, DiME skipped)",
        model.n_layers + 1,
        len(source.texts) + settings.views * augmented,
    )
    observer = TokenMetrics(model.n_layers + 1, len(source.texts), settings)
    pooled, _ = encode_all_layers(model, source.texts, config, progress=progress, on_batch=observer)
    for name, per_layer in observer.summary().items():
        if all(v is None for v in per_layer):
            logger.warning("%s skipped: no prompt of %s has enough tokens", name, source.name)
        for layer, entry in enumerate(per_layer):
            if entry is not None:
                add(layer, name, *entry)
    _dataset_metrics(pooled, settings, add)
    del pooled
    if settings.views:
        _view_metrics(view_vectors(model, config, settings, source, progress), settings, add)

    frame = tidy_metrics(rows)
    if output is not None:
        RunFolder(output).update(METRICS_TABLE, frame)
    return frame


def loaded_model(
    model: LoadedModel | str, config: EncodeConfig | None, **loading: Any
) -> tuple[LoadedModel, EncodeConfig]:
    """``model`` as given or loaded by name (``loading``: load_model's keywords), and ``config`` (default: on the
    default device) with the model's own attention filled in, so keys name what ran."""
    config = config or EncodeConfig(device=default_device())
    model = model if isinstance(model, LoadedModel) else load_model(model, config, **loading)
    return model, with_model_attention(config, model)


def _dataset_metrics(pooled: torch.Tensor, settings: MetricSettings, add: Callable) -> None:
    """Dataset entropy (raw and ÷ min(log N, log D)) and effective rank of the [L+1, N, D] pooled vectors."""
    n, d = pooled.shape[1], pooled.shape[2]
    entropy_of = _arithmetic(settings).matrix_entropy
    for layer in range(pooled.shape[0]):
        raw = _guard("dataset entropy", layer, entropy_of, pooled[layer], settings.alpha)
        shannon = raw if settings.alpha == 1.0 else _guard("effective rank", layer, entropy_of, pooled[layer])
        add(layer, "dataset_entropy_raw", raw, n)
        add(layer, "dataset_entropy", _guard("dataset entropy", layer, normalize_entropy, raw, "maxEntropy", n, d), n)
        add(layer, "effective_rank", math.exp(shannon), n)


def view_vectors(model, config, settings: MetricSettings, source: TextSource, progress: bool) -> torch.Tensor:
    """The pooled vectors [L+1, prompts, views, D] of ``settings.views`` seeded views of a seeded sample of
    ``settings.augment_prompts`` prompts: the same for both arithmetics, so they may share one pass."""
    prompts = list(source.texts)
    if len(prompts) > settings.augment_prompts:
        prompts = random.Random(settings.seed).sample(prompts, settings.augment_prompts)
    views = augment(prompts, settings.views, p=settings.p, seed=settings.seed)
    flat = [view for per_prompt in views for view in per_prompt]
    pooled, _ = encode_all_layers(model, flat, config, progress=progress)
    return pooled.reshape(pooled.shape[0], len(prompts), settings.views, pooled.shape[-1])


def _view_metrics(pooled: torch.Tensor, settings: MetricSettings, add: Callable) -> None:
    """InfoNCE, LiDAR and DiME of every layer's views, in ``settings``' arithmetic."""
    n, arithmetic = pooled.shape[1], _arithmetic(settings)
    lidar_kwargs = {"delta": settings.delta, "alpha": settings.alpha}
    dime_kwargs = {"alpha": settings.alpha, "n_permutations": settings.dime_permutations, "seed": settings.seed}
    for layer, per_layer in enumerate(pooled):
        first, second = per_layer[:, 0], per_layer[:, 1]
        add(layer, "infonce", _guard("InfoNCE", layer, arithmetic.infonce, first, second, settings.temperature), n)
        add(layer, "lidar", _guard("LiDAR", layer, arithmetic.lidar, per_layer, **lidar_kwargs), n)
        add(layer, "dime", _guard("DiME", layer, arithmetic.dime, first, second, **dime_kwargs), n)


def _source(texts, model: LoadedModel, settings: MetricSettings, data_dir) -> TextSource:
    if isinstance(texts, str):
        return load_texts(
            texts, tokenizer=model.tokenizer, n_prompts=settings.n_prompts, data_dir=data_dir, seed=settings.seed
        )
    unique = list(dict.fromkeys(t for t in texts if isinstance(t, str) and t.strip()))
    if len(unique) < 2:
        raise UserError(f"need at least 2 non-empty, distinct texts for metrics, got {len(unique)}")
    return TextSource("custom", tuple(unique), None, len(unique))


def _row_adder(
    rows: list[dict], model: LoadedModel, config: EncodeConfig, source: TextSource, settings: MetricSettings
) -> Callable:
    fixed = {"texts": source.name, "task": source.task, "data": source.data, "arithmetic": settings.arithmetic}
    fixed |= config.key()  # the same for every row: computed once

    def add(layer: int, metric: str, value: float, n: int) -> None:
        row = {"metric": metric, "value": float(value), "n": int(n), **fixed}
        rows.append({**layer_columns(model, layer), **row})

    return add


def discard_vectors(rows: Sequence[int], vectors: torch.Tensor) -> None:
    """A pooled-vector sink that keeps nothing: a pass run only for its token metrics."""


def _guard(what: str, layer: int, compute: Callable[..., float], *args, **kwargs) -> float:
    """Turn a maths error (NaN input, empty spectrum) into one line naming the metric and layer."""
    try:
        value = compute(*args, **kwargs)
    except ValueError as err:
        raise UserError(f"{what} at layer {layer}: {err}") from None
    if not math.isfinite(value):
        raise UserError(f"{what} at layer {layer} is not finite ({value}); try --dtype float32")
    return value


def _masked_means(values: torch.Tensor, valid: torch.Tensor) -> list[tuple[float, int] | None]:
    means, counts = masked_mean(values, valid)
    return [(float(m), int(c)) if c > 0 else None for m, c in zip(means, counts, strict=True)]


def _on_host(per_layer: list[tuple[torch.Tensor, ...]]) -> list[torch.Tensor]:
    """Each part of per-layer results stacked over the layers and copied to the host: one copy, not one per layer."""
    return [torch.stack(part).cpu() for part in zip(*per_layer, strict=True)]


def _arithmetic(settings: MetricSettings):
    """The module of the metrics in ``settings``' arithmetic: both name their functions alike."""
    return authors_arithmetic if settings.authors else representation
