"""Forward throughput by batching rule: fixed text counts against token budgets, all length-sorted.

The same unique task texts go through the bare model (``output_hidden_states=False``) batched by
``layer_mteb.model.forward.length_sorted_batches`` under each rule; real tokens/s is what a sweep gains, padded tokens
show the waste. Run twice, interleaved, so that drift on a shared machine shows.

    python benchmarks/batching.py --threads 1                     # SmolLM2-135M, STS17 + BIOSSES texts
    python benchmarks/batching.py --quick
    python benchmarks/batching.py --device cuda --dtype bfloat16 --rules 32:,128:,1024:16384,1024:65536
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, common_options, forward_batches, machine_line, setup, table, warm_up

from layer_mteb import EncodeConfig, load_model
from layer_mteb.model.forward import length_sorted_batches, tokenize


def task_texts(data_dir: Path, names: list[str]) -> list[str]:
    texts: list[str] = []
    for name in names:
        for line in (data_dir / name / "test.jsonl").open():
            row = json.loads(line)
            texts += [row[k] for k in ("sentence1", "sentence2", "text") if k in row]
    return list(dict.fromkeys(texts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tasks", default="STS17,BIOSSES", help="comma-separated offline tasks (test.jsonl texts)")
    parser.add_argument(
        "--rules",
        default="8:,16:,32:,64:,256:512,256:1024,256:2048",
        help="comma-separated batch_size:max_batch_tokens (empty budget: count only)",
    )
    parser.add_argument("--texts", type=int, default=300, help="seeded sample of the unique texts")
    parser.add_argument("--repeats", type=int, default=2)
    common_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.texts, args.repeats, args.rules = 100, 1, "32:,256:512"
    setup(args)
    config = EncodeConfig(device=args.device, dtype=args.dtype, max_length=args.max_length)
    loaded = load_model(args.model, config)
    texts = task_texts(Path(args.data_dir), [t.strip() for t in args.tasks.split(",") if t.strip()])
    random.Random(0).shuffle(texts)
    texts = texts[: args.texts]
    ids, _ = tokenize(loaded.tokenizer, texts, config)
    lengths = [len(i) for i in ids]
    print(machine_line(args.device))
    print(f"model {loaded.name}, {len(texts)} texts, {sum(lengths):,} tokens (longest {max(lengths)})")
    warm_up(loaded)
    rules = []
    for rule in args.rules.split(","):
        size, _, budget = rule.partition(":")
        rules.append((int(size), int(budget) if budget else None))
    rows = []
    for repeat in range(args.repeats):
        for size, budget in rules:
            batches = length_sorted_batches(lengths, size, budget)
            with Timer(config.device) as timer:
                padded = forward_batches(loaded, ids, batches)
            rows.append(
                {
                    "run": repeat + 1,
                    "batch size": size,
                    "token budget": budget or "-",
                    "batches": len(batches),
                    "padded tokens": padded,
                    "padding %": 100 * (padded - sum(lengths)) / padded,
                    "s": timer.seconds,
                    "real tok/s": sum(lengths) / timer.seconds,
                }
            )
            print(f"run {repeat + 1} {size}:{budget}: {timer.seconds:.1f} s", flush=True)
    print("\n### bare forward throughput by batching rule\n")
    print(table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
