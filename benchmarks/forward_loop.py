"""The all-layer forward loop of two checkouts side by side: the same texts through ``encode_all_layers`` of each.

Each checkout runs in its own interpreter (``PYTHONPATH`` set to it), the checkouts interleaved per repeat so that
drift on a shared machine shows, and each times the whole loop (forward, readout, pooling, where the pooled vectors
go) for three sinks: the in-memory store, per-layer files on disk (a memory limit of one layer) and the token
metrics' observer. Seconds and the ratio of each checkout to the first are printed.

    git archive <old commit> | tar -x -C /tmp/old        # a checkout of the code before a change
    python benchmarks/forward_loop.py --threads 1 --checkouts /tmp/old,.
    python benchmarks/forward_loop.py --quick --checkouts /tmp/old,.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import common_options, machine_line, setup, table, warm_up

SINKS = ("memory", "disk", "token metrics")


def child(args: argparse.Namespace) -> None:
    """Time each sink once in this interpreter (its ``layer_mteb`` is the checkout's); print the seconds as JSON."""
    from batching import task_texts

    from layer_mteb import EncodeConfig, load_model
    from layer_mteb.metrics.runner import MetricSettings, TokenMetrics, discard_vectors
    from layer_mteb.model.forward import encode_all_layers
    from layer_mteb.vectors.memory import store_bytes
    from layer_mteb.vectors.store import LayerCache

    setup(args)
    config = EncodeConfig(device=args.device, dtype=args.dtype, batch_size=args.batch_size, max_length=args.max_length)
    loaded = load_model(args.model, config)
    texts = task_texts(Path(args.data_dir), [t.strip() for t in args.tasks.split(",") if t.strip()])
    random.Random(0).shuffle(texts)
    texts = texts[: args.texts]
    warm_up(loaded)
    n_states = loaded.n_layers + 1
    seconds = {}
    for sink in SINKS:
        started = time.perf_counter()
        if sink == "memory":
            encode_all_layers(loaded, texts, config)
        elif sink == "disk":
            limit = store_bytes(len(texts), 1, loaded.hidden_size)  # one layer fits, all do not: files
            LayerCache(loaded, config, memory_limit=limit).fill(texts)  # in a temporary folder
        else:
            observer = TokenMetrics(n_states, len(texts), MetricSettings(views=0))
            encode_all_layers(loaded, texts, config, on_batch=observer, into=discard_vectors)
        seconds[sink] = time.perf_counter() - started
    print(json.dumps(seconds))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tasks", default="STS17,BIOSSES", help="comma-separated offline tasks (test.jsonl texts)")
    parser.add_argument("--texts", type=int, default=300, help="seeded sample of the unique texts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--checkouts", default=".", help="comma-separated checkouts to compare (first: the baseline)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    common_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.texts, args.repeats = 100, 1
    if args.child:
        child(args)
        return 0
    checkouts = [str(Path(c).resolve()) for c in args.checkouts.split(",")]
    given = list(argv if argv is not None else sys.argv[1:])
    passed = [a for i, a in enumerate(given) if not a.startswith("--checkouts") and given[i - 1 : i] != ["--checkouts"]]
    print(machine_line(args.device))
    print(f"model {args.model}, {args.texts} texts of {args.tasks}, batch size {args.batch_size}, {args.dtype}")
    rows = []
    for repeat in range(args.repeats):
        for checkout in checkouts:
            env = {**os.environ, "PYTHONPATH": checkout}
            command = [sys.executable, __file__, "--child", *passed]
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"{checkout} failed:\n{done.stderr[-2000:]}")
            seconds = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append({"run": repeat + 1, "checkout": checkout, **seconds})
            print(f"run {repeat + 1} {checkout}: {seconds}", flush=True)
    print("\n### seconds of the all-layer loop per sink\n")
    print(table(rows, ["run", "checkout", *SINKS]))
    base = [r for r in rows if r["checkout"] == checkouts[0]]
    ratios = []
    for checkout in checkouts[1:]:
        mine = [r for r in rows if r["checkout"] == checkout]
        ratio = {s: statistics.median(b[s] / m[s] for b, m in zip(base, mine, strict=True)) for s in SINKS}
        ratios.append({"checkout": checkout, **ratio})
    if ratios:
        print(f"\n### speed-up over {checkouts[0]} (median over runs of baseline s / checkout s)\n")
        print(table(ratios, ["checkout", *SINKS]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
