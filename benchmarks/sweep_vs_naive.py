"""One-pass sweep against the per-layer protocol of the paper, side by side in one run.

(a) naive, as the authors scored layers: for each layer k a model truncated to its first k blocks (the final norm
    still applied on top, as in a truncated deployed model), its own ``mteb.evaluate`` and its own forward passes,
    through a plain mteb encoder that mean-pools the truncated model's output over the batches mteb hands it.
    The truncated model is a slice of the block list of the already-loaded model, so naive pays no model loads
    (the authors loaded a model per layer): this favours naive. ``--naive-batching sorted`` favours it further:
    each call's texts are length-sorted into batches like the sweep's, so only the block passes differ.
(b) ``layer_mteb.evaluation.sweep`` with ``vector_cache=False``: a cold run, one forward pass per unique text per task.

Prints wall time, forward calls and block passes of each (counted with forward hooks), their ratios, and checks
that both give the same score for every (task, layer).

    python benchmarks/sweep_vs_naive.py                 # SmolLM2-135M and MiniLM-L6, STS17 + BIOSSES
    python benchmarks/sweep_vs_naive.py --quick         # about a minute
    python benchmarks/sweep_vs_naive.py --models smollm2-135m --tasks STS17 --device cuda --dtype bfloat16
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import mteb
import numpy as np
import torch
from mteb.models.abs_encoder import AbsEncoder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    Timer,
    common_options,
    counting,
    encode_config,
    load_tasks,
    machine_line,
    main_scores,
    setup,
    table,
    warm_up,
)

from layer_mteb import EncodeConfig, load_model, sweep
from layer_mteb.common.scores import tidy_scores
from layer_mteb.evaluation.encoder import model_meta
from layer_mteb.evaluation.mteb_call import score_rows
from layer_mteb.model.architectures import LoadedModel, first_blocks


class TruncatedModelEncoder(AbsEncoder):
    """What a user scoring one layer with a truncated model would write: encode mteb's batches as they come."""

    def __init__(self, loaded: LoadedModel, k: int, config: EncodeConfig, sort: bool = False):
        self.loaded, self.k, self.config, self.sort = loaded, k, config, sort
        self._meta = model_meta(loaded, k, config).model_copy(update={"name": "naive/truncated"})

    @property
    def mteb_model_meta(self):
        return self._meta

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs) -> np.ndarray:
        texts = [list(batch["text"]) for batch in inputs]
        order = None
        if self.sort:  # the generous variant: the same length-sorted batches as the sweep
            flat = [t for batch in texts for t in batch]
            lengths = [
                len(ids)
                for ids in self.loaded.tokenizer(flat, truncation=True, max_length=self.config.max_length)["input_ids"]
            ]
            order = sorted(range(len(flat)), key=lambda i: -lengths[i])
            size = self.config.batch_size
            texts = [[flat[i] for i in order[s : s + size]] for s in range(0, len(order), size)]
        out = []
        tok = self.loaded.tokenizer
        norm = self.loaded.final_norm  # a truncated model still ends in it; first_blocks leaves it out
        with torch.inference_mode(), first_blocks(self.loaded, self.k):
            for batch in texts:
                enc = tok(
                    batch,
                    padding=True,
                    truncation=True,
                    max_length=self.config.max_length,
                    return_tensors="pt",
                ).to(self.loaded.device)
                hidden = self.loaded.model(**enc, **self.loaded.forward_options).last_hidden_state
                hidden = (hidden if norm is None else norm(hidden)).float()
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                out.append(((hidden * mask).sum(1) / mask.sum(1)).cpu())
        vectors = torch.cat(out)
        if order is not None:
            vectors = vectors[torch.argsort(torch.tensor(order))]
        return vectors.numpy().astype(np.float32)


def run_naive(loaded: LoadedModel, args, config: EncodeConfig):
    tasks = load_tasks(args.tasks, args.data_dir, args.limit)
    rows: list[dict] = []
    with counting(loaded) as counter, Timer(config.device) as timer:
        for task in tasks:
            for k in range(loaded.n_layers + 1):
                encoder = TruncatedModelEncoder(loaded, k, config, sort=args.naive_batching == "sorted")
                result = mteb.evaluate(
                    encoder,
                    task,
                    cache=None,
                    encode_kwargs={"batch_size": config.batch_size},
                    show_progress_bar=False,
                )
                encoder.model = loaded  # score_rows reads .model/.config/.layer
                encoder.layer = k
                rows += score_rows(result.task_results[0], task=task, encoder=encoder, data="local")
    return tidy_scores(rows), timer.seconds, counter.as_dict()


def run_sweep(loaded: LoadedModel, args, config: EncodeConfig):
    tasks = load_tasks(args.tasks, args.data_dir, args.limit)
    with counting(loaded) as counter, Timer(config.device) as timer:
        frame = sweep(loaded, tasks, layers="all", config=config, vector_cache=False, progress=False)
    return frame, timer.seconds, counter.as_dict()


def compare(name: str, args) -> tuple[dict, list[dict]]:
    config = encode_config(args)
    loaded = load_model(name, config)
    print(f"\n## {loaded.name}: {loaded.n_layers} blocks, {loaded.n_layers + 1} hidden states", flush=True)
    print(f"base model class {type(loaded.model).__name__} (no LM head)", flush=True)
    warm_up(loaded)
    sweep_frame, sweep_s, sweep_n = run_sweep(loaded, args, config)
    print(f"sweep done in {sweep_s:.1f} s", flush=True)
    naive_frame, naive_s, naive_n = run_naive(loaded, args, config)
    print(f"naive done in {naive_s:.1f} s", flush=True)

    naive_scores, sweep_scores = main_scores(naive_frame), main_scores(sweep_frame)
    assert naive_scores.keys() == sweep_scores.keys(), "the two runs scored different (task, layer) units"
    diffs = [abs(naive_scores[key] - sweep_scores[key]) for key in naive_scores]
    per_task = []
    for task in sorted({t for t, _ in naive_scores}):
        keys = [key for key in naive_scores if key[0] == task]
        per_task.append(
            {
                "model": loaded.name,
                "task": task,
                "layers": len(keys),
                "max abs score diff": f"{max(abs(naive_scores[k] - sweep_scores[k]) for k in keys):.1e}",
                "best layer (sweep)": max(keys, key=lambda k: sweep_scores[k])[1],
                "best layer (naive)": max(keys, key=lambda k: naive_scores[k])[1],
            }
        )
    summary = {
        "model": loaded.name,
        "hidden states": loaded.n_layers + 1,
        "naive s": naive_s,
        "sweep s": sweep_s,
        "speed-up": naive_s / sweep_s,
        "forward calls naive/sweep": f"{naive_n['calls']:,} / {sweep_n['calls']:,}",
        "texts through model naive/sweep": f"{naive_n['texts']:,} / {sweep_n['texts']:,}",
        "block passes (text x block) naive/sweep": f"{naive_n['block_texts']:,} / {sweep_n['block_texts']:,}",
        "ratio block passes": naive_n["block_texts"] / max(sweep_n["block_texts"], 1),
        "ratio padded token-block passes": naive_n["block_tokens"] / max(sweep_n["block_tokens"], 1),
        "max abs score diff": f"{max(diffs):.1e}",
        "same scores (<=1e-4)": "yes" if max(diffs) <= 1e-4 else "NO",
    }
    return summary, per_task


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="smollm2-135m,minilm-l6", help="comma-separated models")
    parser.add_argument("--tasks", default="STS17,BIOSSES", help="comma-separated offline tasks")
    parser.add_argument(
        "--naive-batching",
        choices=["mteb", "sorted"],
        default="mteb",
        help="naive encodes mteb's batches as given (mteb), or length-sorts each call's texts like the sweep",
    )
    common_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.limit = args.limit or 16
    args.tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    setup(args)
    print(machine_line(args.device))
    rows_per_task = f" (first {args.limit} rows per split)" if args.limit else ""
    print(f"tasks: {', '.join(args.tasks)}{rows_per_task}; batch size {args.batch_size}", end="")
    print(f"; {args.dtype} on {args.device}; naive batching: {args.naive_batching}")
    summaries, details = [], []
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        summary, per_task = compare(name, args)
        summaries.append(summary)
        details += per_task
    columns = list(summaries[0])
    print("\n### naive per-layer runs vs one-pass sweep\n")
    print(table(summaries, columns))
    print("\n### per task\n")
    print(table(details, list(details[0])))
    same = all(s["same scores (<=1e-4)"] == "yes" for s in summaries)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
