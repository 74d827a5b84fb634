"""All metrics of every layer for one text source, from the single forward pass that yields pooled vectors.
Token metrics are reduced per batch (:class:`TokenMetrics`: one scalar per layer and prompt, never all token
states); InfoNCE, LiDAR and DiME need a second pass over augmented views only."""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from layer_mteb.common.config import ARITHMETICS, Arithmetic, EncodeConfig, default_device
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.common.table import layer_columns
from layer_mteb.metrics import METRICS_TABLE, authors_arithmetic, tidy_metrics
from layer_mteb.metrics.representation import (
    Normalization,
    augment,
    dime,
    infonce,
    lidar,
    matrix_entropy,
    normalize_entropy,
    token_curvatures,
    token_entropies,
)
from layer_mteb.metrics.texts import TextSource, encoded_texts_label, load_texts
from layer_mteb.model.architectures import LoadedModel
from layer_mteb.model.attention import with_model_attention
from layer_mteb.model.forward import encode_all_layers
from layer_mteb.model.loading import load_model

logger = logging.getLogger(__name__)

#: prompt-entropy columns of ``metrics.csv`` -> how each is normalised (per prompt: N is its token count)
PROMPT_ENTROPIES: dict[str, Normalization] = {
    "prompt_entropy": "maxEntropy",
    "prompt_entropy_raw": "raw",
    "prompt_entropy_logn": "logN",
    "prompt_entropy_logd": "logD",
}

#: sample sizes of the paper's protocol (Skean et al. 2025): MetricSettings' defaults, ``metrics --full-protocol``
PAPER_METRIC_SIZES = {"n_prompts": 1000, "views": 16, "augment_prompts": 200}
#: the CLI's default sizes: about a minute for MiniLM-L6 on a CPU, the same metrics on smaller samples
QUICK_METRIC_SIZES = {"n_prompts": 200, "views": 4, "augment_prompts": 32}


@dataclass(frozen=True)
class MetricSettings:
    """Knobs of the metrics (defaults: the paper's). ``views`` = J views per prompt for LiDAR; InfoNCE and DiME use
    the first two of them; 0 skips all three. ``augment_prompts`` caps how many prompts get views (J passes each).
    ``arithmetic``: the paper's formulas, or the authors' code's (:mod:`.authors_arithmetic`; its curvature is |cos|
    whatever ``absolute_curvature`` says)."""

    n_prompts: int = 1000
    views: int = 16
    augment_prompts: int = 200
    p: float = 0.3
    alpha: float = 1.0
    temperature: float = 0.1
    delta: float = 1e-4
    dime_permutations: int = 10
    absolute_curvature: bool = False
    seed: int = 0
    arithmetic: Arithmetic = "paper"

    def __post_init__(self) -> None:
        if self.views == 1 or self.views < 0:
            raise UserError(f"--views must be 0 (skip InfoNCE, LiDAR, DiME) or at least 2, got {self.views}")
        if self.views and self.augment_prompts < 2:
            raise UserError(f"--augment-prompts must be at least 2, got {self.augment_prompts}")
        if not self.alpha > 0:
            raise UserError(f"--alpha must be positive, got {self.alpha}")
        if not 0 < self.p <= 1:
            raise UserError(f"--augment-p must be in (0, 1], got {self.p}")
        if self.arithmetic not in ARITHMETICS:
            raise UserError(f"--arithmetic must be one of {', '.join(ARITHMETICS)}; got {self.arithmetic!r}")

    @property
    def authors(self) -> bool:
        """Whether the metrics follow the authors' code rather than the paper's formulas."""
        return self.arithmetic == "authors"


class TokenMetrics:
    """Batch observer: prompt entropy and curvature of every prompt at every layer, kept as [L+1, n] scalars.
    ``curvature=False`` skips curvature (left invalid) for callers that read entropy only."""

    def __init__(self, n_states: int, n_texts: int, settings: MetricSettings, *, curvature: bool = True):
        self.settings, self.with_curvature = settings, curvature
        self.entropy = torch.zeros(n_states, n_texts, dtype=torch.float64)
        self.entropy_valid = torch.zeros(n_states, n_texts, dtype=torch.bool)
        self.curvature = torch.zeros(n_states, n_texts, dtype=torch.float64)
        self.curvature_valid = torch.zeros(n_states, n_texts, dtype=torch.bool)
        self.lengths = torch.zeros(n_texts, dtype=torch.float64)
        self.hidden_size = 0

    def __call__(self, states: Sequence[torch.Tensor], mask: torch.Tensor, positions: Sequence[int]) -> None:
        """Every layer's values computed on the device, then copied to the host once per batch (stacked): a check or
        a copy per layer would each wait for the device."""
        rows = torch.as_tensor(list(positions), dtype=torch.long)
        self.hidden_size = states[0].shape[-1]
        padding = ~mask.bool().to(states[0].device)
        finite, entropies, entropies_valid, bends, bends_valid = [], [], [], [], []
        lengths = torch.zeros(0)
        for hidden in states:
            # every real token's state finite; a boolean-mask gather would wait for the device to count the tokens
            finite.append((torch.isfinite(hidden).all(dim=-1) | padding).all())
            entropy_of = authors_arithmetic.token_entropies if self.settings.authors else token_entropies
            entropy, lengths, valid = entropy_of(hidden, mask, self.settings.alpha)
            entropies.append(entropy)
            entropies_valid.append(valid)
            if self.with_curvature and self.settings.authors:
                bend, bend_valid = authors_arithmetic.token_curvatures(hidden, mask)
            elif self.with_curvature:
                bend, bend_valid = token_curvatures(hidden, mask, absolute=self.settings.absolute_curvature)
            if self.with_curvature:
                bends.append(bend)
                bends_valid.append(bend_valid)
        bad = [layer for layer, ok in enumerate(torch.stack(finite).tolist()) if not ok]
        if bad:
            raise UserError(f"layer {bad[0]} produced NaN or inf hidden states; try --dtype float32")
        self.entropy[:, rows] = torch.stack(entropies).cpu()
        self.entropy_valid[:, rows] = torch.stack(entropies_valid).cpu()
        if self.with_curvature:
            self.curvature[:, rows] = torch.stack(bends).cpu()
            self.curvature_valid[:, rows] = torch.stack(bends_valid).cpu()
        self.lengths[rows] = lengths.to(torch.float64).cpu()

    def summary(self) -> dict[str, list[tuple[float, int] | None]]:
        """metric -> per layer (mean over valid prompts, their count), or None where no prompt was valid."""
        # prompts under 2 tokens are invalid (masked out); clamping only keeps their placeholder finite
        tokens, d = self.lengths.clamp(min=2), max(self.hidden_size, 2)
        out = {
            name: _masked_means(normalize_entropy(self.entropy, normalization, tokens, d), self.entropy_valid)
            for name, normalization in PROMPT_ENTROPIES.items()
        }
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
        for name in summaries[0]:
            for layer in range(self.model.n_layers + 1):
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
    config = config or EncodeConfig(device=default_device())
    settings = settings or MetricSettings()
    if not isinstance(model, LoadedModel):
        model = load_model(model, config, revision=revision, trust_remote_code=trust_remote_code)
    config = with_model_attention(config, model)
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
        _invariance_metrics(model, config, settings, source, add, progress)

    frame = tidy_metrics(rows)
    if output is not None:
        RunFolder(output).update(METRICS_TABLE, frame)
    return frame


def _dataset_metrics(pooled: torch.Tensor, settings: MetricSettings, add: Callable) -> None:
    """Dataset entropy (raw and ÷ min(log N, log D)) and effective rank of the [L+1, N, D] pooled vectors."""
    n, d = pooled.shape[1], pooled.shape[2]
    entropy_of = authors_arithmetic.matrix_entropy if settings.authors else matrix_entropy
    for layer in range(pooled.shape[0]):
        raw = _guard("dataset entropy", layer, entropy_of, pooled[layer], settings.alpha)
        shannon = raw if settings.alpha == 1.0 else _guard("effective rank", layer, entropy_of, pooled[layer])
        add(layer, "dataset_entropy_raw", raw, n)
        add(layer, "dataset_entropy", _guard("dataset entropy", layer, normalize_entropy, raw, "maxEntropy", n, d), n)
        add(layer, "effective_rank", math.exp(shannon), n)


def _invariance_metrics(model, config, settings: MetricSettings, source: TextSource, add, progress: bool) -> None:
    _view_metrics(view_vectors(model, config, settings, source, progress), settings, add)


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
    n = pooled.shape[1]
    if settings.authors:
        infonce_of, lidar_of, dime_of = (
            authors_arithmetic.infonce_of_views,
            authors_arithmetic.lidar_of_views,
            authors_arithmetic.dime_of_views,
        )
    else:
        infonce_of, lidar_of, dime_of = infonce, lidar, dime
    for layer, per_layer in enumerate(pooled):
        first, second = per_layer[:, 0], per_layer[:, 1]
        add(layer, "infonce", _guard("InfoNCE", layer, infonce_of, first, second, settings.temperature), n)
        lidar_kwargs = {"delta": settings.delta, "alpha": settings.alpha}
        add(layer, "lidar", _guard("LiDAR", layer, lidar_of, per_layer, **lidar_kwargs), n)
        dime_kwargs = {"alpha": settings.alpha, "n_permutations": settings.dime_permutations, "seed": settings.seed}
        add(layer, "dime", _guard("DiME", layer, dime_of, first, second, **dime_kwargs), n)


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
    def add(layer: int, metric: str, value: float, n: int) -> None:
        rows.append(
            {
                **layer_columns(model, layer),
                "texts": source.name,
                "task": source.task,
                "metric": metric,
                "value": float(value),
                "n": int(n),
                **config.key(),
                "data": source.data,
                "arithmetic": settings.arithmetic,
            }
        )

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
    counts = valid.sum(dim=1)
    sums = torch.where(valid, values, torch.zeros_like(values)).sum(dim=1)
    return [(float(s / c), int(c)) if c > 0 else None for s, c in zip(sums, counts, strict=True)]
