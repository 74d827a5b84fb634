"""How close the sweep gets to its floor: one bare forward pass plus mteb's evaluators, measured in the same run.

1. ``sweep``: ``layer_mteb.evaluation.sweep`` over all layers, cold (a fresh, empty vector-cache folder; the default
   ``vector_cache=True``, so writing the cache is included).
2. ``bare forward``: the unique texts the sweep encoded (read back from its vector cache), tokenized and run
   through the model once in the same length-sorted batches, ``output_hidden_states=False``, no readout, no pooling,
   no cache.
3. ``evaluators``: ``mteb.evaluate`` of every (task, layer) with an encoder that only looks up precomputed vectors.

overhead = sweep - (bare forward + evaluators); the goal is sweep <= 1.10 x (bare forward + evaluators). The sweep
scores its layers with one worker (``--eval-workers``), as the evaluators are timed one layer after another.
The time the sweep spends inside the model's forward (hooks on the base model) is shown as well.

    python benchmarks/sweep_vs_limit.py --threads 1              # SmolLM2-135M on STS17 + BIOSSES
    python benchmarks/sweep_vs_limit.py --quick
    python benchmarks/sweep_vs_limit.py --device cuda --dtype bfloat16 --max-batch-tokens 16384
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import mteb
import numpy as np
import torch
from mteb.models.abs_encoder import AbsEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, common_options, counting, forward_batches, load_tasks, start, table

from layer_mteb import EncodeConfig, LayerCache, sweep
from layer_mteb.evaluation.encoder import model_meta, resolve_settings
from layer_mteb.model.architectures import LoadedModel
from layer_mteb.model.forward import length_sorted_batches, tokenize
from layer_mteb.vectors.store import store_folder


class ForwardClock:
    """Wall time spent inside the base model's forward, from a pre-hook to a post-hook."""

    def __init__(self, model: torch.nn.Module, device: str):
        self.seconds, self.device = 0.0, device
        self._handles = [model.register_forward_pre_hook(self._start), model.register_forward_hook(self._stop)]

    def _start(self, *_) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        self._t = time.perf_counter()

    def _stop(self, *_) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        self.seconds += time.perf_counter() - self._t

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


class PrecomputedEncoder(AbsEncoder):
    """Looks vectors up by text: mteb.evaluate with this costs only the evaluator (and mteb's own bookkeeping)."""

    def __init__(self, loaded: LoadedModel, layer: int, config: EncodeConfig, index: dict[str, int], vectors):
        self.index, self.vectors = index, vectors
        meta = model_meta(loaded, layer, resolve_settings(loaded, config))
        self._meta = meta.model_copy(update={"name": "bench/precomputed"})

    @property
    def mteb_model_meta(self):
        return self._meta

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs) -> np.ndarray:
        return self.vectors[[self.index[t] for batch in inputs for t in batch["text"]]]


def bare_forward(loaded: LoadedModel, texts: list[str], config: EncodeConfig) -> tuple[float, float, int, int]:
    """-> (seconds in total, seconds of which tokenizing, real tokens, padded tokens), in the sweep's batches."""
    with Timer(config.device) as total:
        with Timer() as tok_timer:
            ids, _ = tokenize(loaded.tokenizer, texts, config)
        batches = length_sorted_batches([len(i) for i in ids], config.batch_size, config.max_batch_tokens)
        padded_tokens = forward_batches(loaded, ids, batches)
    return total.seconds, tok_timer.seconds, sum(len(i) for i in ids), padded_tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tasks", default="STS17,BIOSSES", help="comma-separated offline tasks")
    parser.add_argument("--repeats", type=int, default=1, help="repeat the three measurements, report each")
    parser.add_argument("--eval-workers", type=int, default=1, help="the sweep's evaluation workers")
    common_options(parser)
    args = parser.parse_args(argv)
    names, config, loaded = start(args, quick_limit=60)
    cut = f" (first {args.limit} rows per split)" if args.limit else ""
    print(f"model {loaded.name} ({loaded.n_layers + 1} hidden states), tasks {', '.join(names)}{cut}")
    print(f"batch size {config.batch_size}, token budget {config.max_batch_tokens}, {args.dtype} on {args.device}")

    rows = []
    for repeat in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["LAYER_MTEB_CACHE"] = tmp  # cold: nothing to reuse
            tasks = load_tasks(names, args.data_dir, args.limit)
            clock = ForwardClock(loaded.model, config.device)
            with counting(loaded) as counter, Timer(config.device) as sweep_timer:
                sweep(loaded, tasks, layers="all", config=config, progress=False, eval_workers=args.eval_workers)
            clock.close()
            settings = resolve_settings(loaded, config)
            stored = [LayerCache(loaded, config, store_folder(loaded, settings, task.metadata.name)) for task in tasks]
        texts = [list(cache.index) for cache in stored]
        n_texts = sum(len(t) for t in texts)
        assert counter.texts == n_texts, f"sweep ran {counter.texts} texts through the model for {n_texts} unique"

        bare_s = tok_s = 0.0
        tokens = padded_tokens = 0
        for task_texts in texts:
            seconds, tokenize_s, n_tokens, n_padded = bare_forward(loaded, task_texts, config)
            bare_s, tok_s = bare_s + seconds, tok_s + tokenize_s
            tokens, padded_tokens = tokens + n_tokens, padded_tokens + n_padded

        tasks = load_tasks(names, args.data_dir, args.limit)  # loaded before timing, as the sweep loads once too
        with counting(loaded) as eval_counter, Timer(config.device) as eval_timer:
            for task, cache in zip(tasks, stored, strict=True):
                vectors = cache.vectors(list(cache.index)).cpu().numpy()
                for layer in range(loaded.n_layers + 1):
                    encoder = PrecomputedEncoder(loaded, layer, config, cache.index, vectors[layer])
                    mteb.evaluate(encoder, task, cache=None, show_progress_bar=False)
        assert eval_counter.texts == 0

        floor = bare_s + eval_timer.seconds
        rows.append(
            {
                "run": repeat + 1,
                "unique texts": n_texts,
                "tokens": tokens,
                "sweep s": sweep_timer.seconds,
                "bare forward s": bare_s,
                "(tokenize s)": tok_s,
                "evaluators s": eval_timer.seconds,
                "overhead s": sweep_timer.seconds - floor,
                "sweep / (bare + evaluators)": sweep_timer.seconds / floor,
                "forward in sweep s": clock.seconds,
                "forward calls": counter.calls,
                "padded tokens sweep / bare": f"{counter.block_tokens // loaded.n_layers:,} / {padded_tokens:,}",
                "bare tok/s": tokens / bare_s,
                "met (<= 1.10)": "yes" if sweep_timer.seconds <= 1.10 * floor else "no",
            }
        )
        print(f"run {repeat + 1}: sweep {sweep_timer.seconds:.1f} s, floor {floor:.1f} s", flush=True)
    print("\n### sweep vs bare forward + evaluators\n")
    print(table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
