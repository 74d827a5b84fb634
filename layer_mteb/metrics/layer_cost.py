"""What a model cut at each layer costs: measured seconds per 1,000 texts and forward FLOPs, per depth k = 0..L.

Both come from one seeded sample of the run's own task texts in the run's batches; only the forward is timed.
- **Seconds**: after a warm-up, the median of ``repeats`` passes per depth (one slow pass must not decide), the
  model cut by :func:`~layer_mteb.model.architectures.first_blocks` (final norm off: no matrix product), each pass
  waiting for every GPU the model computes on.
- **FLOPs**: one ``FlopCounterMode`` pass of the full model, the cut at k being the total less blocks k+1..L
  (:func:`depth_flops`; exact, checked in the tests). Only matrix products count; CPU attention is added here
  because torch does not count its kernel.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

import pandas as pd
import torch

from layer_mteb.common.config import SETTINGS_COLUMNS, EncodeConfig
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.common.table import LAYER_COLUMNS, layer_columns
from layer_mteb.metrics.cost_table import COST_TABLE, CostSettings
from layer_mteb.metrics.texts import TextSource, load_texts, seeded_sample, task_texts_label, text_sources
from layer_mteb.model.architectures import LoadedModel, first_blocks
from layer_mteb.model.attention import with_model_attention
from layer_mteb.model.forward import length_sorted_batches, pad_batch, tokenize
from layer_mteb.model.loading import load_scored_model
from layer_mteb.model.placement import model_devices, synchronize

logger = logging.getLogger(__name__)

COST_COLUMNS = [*LAYER_COLUMNS, "texts", "n_texts", "seed", *SETTINGS_COLUMNS]
COST_COLUMNS += ["batch_size", "max_batch_tokens", "device", "threads", "repeats", "seconds", "seconds_per_1000_texts"]
COST_COLUMNS += ["flops", "flops_fraction"]


def sample_texts(sources: Sequence[str], settings: CostSettings, tokenizer, data_dir=None) -> TextSource:
    """``settings.n_texts`` texts drawn (seeded) from the union of ``sources`` (``task:<Task>``, ``wikitext`` or a
    file), each unique text equally likely, so a task with more texts weighs more, as it does in the run's time.
    The sample's ``name`` says where they came from (the ``texts`` column of ``cost.csv``)."""
    found = [
        load_texts(s, tokenizer=tokenizer, n_prompts=10**9, data_dir=data_dir, seed=settings.seed) for s in sources
    ]
    pool = list(dict.fromkeys(text for source in found for text in source.texts))
    names = ",".join(source.name for source in found)  # task:<Task>, a custom task's too
    return TextSource(names, tuple(seeded_sample(pool, settings.n_texts, settings.seed)), n_available=len(pool))


def padded_batches(model: LoadedModel, texts: Sequence[str], config: EncodeConfig) -> list[dict[str, torch.Tensor]]:
    """The run's batches of ``texts``, padded on the device once, so only the model's forward is timed."""
    token_ids, _ = tokenize(model.tokenizer, texts, config)
    limits = config.batch_limits(model.n_layers + 1, model.hidden_size)
    batches = length_sorted_batches([len(ids) for ids in token_ids], *limits)
    return [pad_batch(model, [token_ids[i] for i in batch]) for batch in batches]


def _attention_flops(query, key, value, *_, **__) -> int:
    """FLOPs of one attention call from its shapes (Q·Kᵀ and weights·V, 2 per multiply-add): every query head works
    (grouped-query too), and a causal mask is not halved (the kernel computes the whole score matrix)."""
    batch, heads, n_query, head_dim = query
    n_key, value_dim = key[-2], value[-1]
    return 2 * batch * heads * n_query * n_key * (head_dim + value_dim)


def flop_counter():
    """torch's FLOP counter, with the CPU attention kernel counted as the dense attention it computes."""
    from torch.utils.flop_counter import FlopCounterMode

    cpu_attention = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    return FlopCounterMode(display=False, custom_mapping={cpu_attention: _attention_flops})


def depth_flops(model: LoadedModel, batches: Sequence[dict[str, torch.Tensor]]) -> list[int]:
    """Forward FLOPs of the model cut at each depth k = 0..L on ``batches``: the counted total of one full pass less
    the FLOPs of blocks k+1..L, read from the counter's per-module breakdown (block i is ``<Model>.<blocks>.<i>``)."""
    counter = flop_counter()
    with torch.inference_mode(), counter:
        for batch in batches:
            model.model(**batch, **model.forward_options)
    counts = counter.get_flop_counts()
    root = f"{type(model.model).__name__}.{model.architecture.blocks}"
    missing = [i for i in range(model.n_layers) if f"{root}.{i}" not in counts]
    if missing:
        raise RuntimeError(f"the FLOP counter saw no block {missing[0]} ({root}.{missing[0]}) of {model.name}")
    per_block = [sum(counts[f"{root}.{i}"].values()) for i in range(model.n_layers)]
    total = int(counter.get_total_flops())
    return [total - sum(per_block[k:]) for k in range(model.n_layers + 1)]


def depth_seconds(model: LoadedModel, batches: Sequence[dict[str, torch.Tensor]], repeats: int = 1) -> list[float]:
    """Seconds of one pass per cut depth: the median of ``repeats`` after a warm-up (first calls pick kernels)."""
    devices = model_devices(model.model)

    def one_pass() -> float:
        started = time.perf_counter()
        for batch in batches:
            model.model(**batch, **model.forward_options)
        synchronize(devices)
        return time.perf_counter() - started

    seconds = []
    with torch.inference_mode():
        one_pass()
        for depth in range(model.n_layers + 1):
            with first_blocks(model, depth) if depth < model.n_layers else nullcontext():
                seconds.append(statistics.median(one_pass() for _ in range(repeats)))
            logger.info("cost of %s cut at layer %d: %.4f s", model.name, depth, seconds[-1])
    return seconds


def measure_cost(
    model: LoadedModel, sample: TextSource, config: EncodeConfig, settings: CostSettings | None = None
) -> pd.DataFrame:
    """``cost.csv``'s rows for ``model`` on ``sample``: one per depth k = 0..L, seconds and FLOPs of the cut model."""
    settings = settings or CostSettings()
    config = with_model_attention(config, model)
    batches = padded_batches(model, sample.texts, config)
    flops = depth_flops(model, batches)
    seconds = depth_seconds(model, batches, settings.repeats)
    batch_size, max_batch_tokens = config.batch_limits(model.n_layers + 1, model.hidden_size)
    n = len(sample.texts)
    fixed = {"texts": sample.name, "n_texts": n, "seed": settings.seed, **config.key(), "batch_size": batch_size}
    fixed |= {"max_batch_tokens": max_batch_tokens, "threads": torch.get_num_threads(), "repeats": settings.repeats}
    fixed["device"] = ",".join(str(device) for device in model_devices(model.model))
    frame = pd.DataFrame([layer_columns(model, depth) for depth in range(model.n_layers + 1)])
    frame = frame.assign(**fixed, seconds=seconds, seconds_per_1000_texts=[1000 * s / n for s in seconds], flops=flops)
    frame["flops_fraction"] = [f / flops[-1] if flops[-1] else float("nan") for f in flops]
    return frame[COST_COLUMNS]


def run_cost(
    folder: str | Path | RunFolder,
    *,
    model: str | None = None,
    texts: str | None = None,
    settings: CostSettings | None = None,
    data_dir: str | Path | None = None,
    **placement,
) -> pd.DataFrame:
    """Measure the cost of every depth of the run's model with its settings into ``folder``'s ``cost.csv``.
    ``model`` says how to load it; ``texts`` defaults to the run's tasks' own; ``placement`` (batch sizes, device,
    device map) is not recorded in the run, so it is given."""
    settings = settings or CostSettings()
    folder = RunFolder(folder)
    scores = folder.one_setting()
    scored = folder.setting(scores, **placement)
    recorded = folder.recorded_tasks()  # a custom task is found again through the task file that declared it
    own = [task_texts_label(recorded.tasks_value(task)) for task in sorted(set(scores["task"]))]
    sources = text_sources(texts) if texts else own
    loaded = load_scored_model(scored.model, scored.revision, scored.config, model)
    sample = sample_texts(sources, settings, loaded.tokenizer, data_dir or recorded.data_dir)
    # the rows carry the run's identity, however its model was found
    frame = measure_cost(loaded, sample, scored.config, settings).assign(model=scored.model, revision=scored.revision)
    folder.write_table(COST_TABLE.file, frame, float_format=COST_TABLE.floats)
    return frame
