"""Peak memory and time of a sweep whose all-layer cache is bigger than its budget, against the in-memory sweep.

A synthetic STS task of many unique short texts (``big_task.py``) and a tiny random Llama with many blocks: the
all-layer cache [L+1, N, D] is over 1 GB while the forward stays cheap on a CPU. Each run is a fresh process: the
model and the loaded task first, then the resident memory just before ``sweep`` is the baseline, and the peak RSS
above it is sampled every millisecond while every layer is encoded and scored. ``--max-cache-memory`` runs write
one file per layer and read one layer per evaluation; the in-memory run keeps the whole cache.

    python benchmarks/bounded_memory.py                      # 100,000 pairs (200,000 texts), 24 blocks, D = 64
    python benchmarks/bounded_memory.py --quick              # 10,000 pairs
    python benchmarks/bounded_memory.py --budgets 256MB,512MB --repeats 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_line, table
from big_task import TASK, build_task, tiny_deep_model
from memory import RssSampler

from layer_mteb.vectors.memory import parse_size, store_bytes

GB = 10**9


def child(spec: dict) -> dict:
    """One sweep in this process -> peak RSS above the baseline, wall time, scores."""
    import torch

    from layer_mteb import EncodeConfig, sweep
    from layer_mteb.tasks.catalog import TaskSpec, load_task

    torch.set_num_threads(spec["threads"])
    model = tiny_deep_model(spec["layers"], spec["hidden"])
    task = load_task(TaskSpec(TASK), "test", Path(spec["data"]))
    task.load_data()
    budget = parse_size(spec["budget"]) if spec["budget"] != "memory" else 10**12
    config = EncodeConfig(batch_size=spec["batch_size"], max_length=64, max_cache_memory=budget)
    sampler = RssSampler()
    sampler.start()
    started = time.perf_counter()
    frame = sweep(model, [task], config=config, vector_cache=False, eval_workers=1, progress=False)
    seconds = time.perf_counter() - started
    growth = sampler.stop()
    return {"peak": growth, "seconds": seconds, "scores": frame["main_score"].tolist()}


def run_child(spec: dict) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def max_diff(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--budgets", default="256MB")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data", default=None, help="folder for the synthetic task (default: a temporary one)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    if args.quick:
        args.pairs = 10_000
    data = Path(args.data or tempfile.mkdtemp(prefix="big-task-"))
    build_task(data, args.pairs)
    n_texts = 2 * args.pairs
    print(machine_line("cpu"))
    cache = store_bytes(n_texts, args.layers + 1, args.hidden)
    print(
        f"{n_texts:,} texts, {args.layers + 1} hidden states x D = {args.hidden}: all-layer cache {cache / GB:.2f} GB"
    )
    base = {"data": str(data), "layers": args.layers, "hidden": args.hidden, "batch_size": args.batch_size}
    base["threads"] = args.threads
    variants = ["memory", *args.budgets.split(",")]
    warm = "import layer_mteb, mteb, transformers"  # the first process pays for reading the libraries from disk
    subprocess.run([sys.executable, "-c", warm], check=True)
    rows = []
    for repeat in range(args.repeats):
        measured = {v: run_child({**base, "budget": v}) for v in variants}
        reference = measured["memory"]
        for variant, got in measured.items():
            budget = parse_size(variant) if variant != "memory" else None
            rows.append(
                {
                    "run": repeat + 1,
                    "cache": "in memory" if budget is None else f"--max-cache-memory {variant}",
                    "peak RSS above baseline GB": f"{got['peak'] / GB:.3f}",
                    "goal GB": "-" if budget is None else f"<= {(budget + 0.3 * GB) / GB:.3f}",
                    "wall s": f"{got['seconds']:.1f}",
                    "wall / in-memory": f"{got['seconds'] / reference['seconds']:.3f}",
                    "peak / in-memory": f"{got['peak'] / reference['peak']:.3f}",
                    "max abs score diff": max(
                        abs(a - b) for a, b in zip(got["scores"], reference["scores"], strict=True)
                    ),
                }
            )
    print(table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
