"""A sweep that asks only for shallow layers should cost only the shallow blocks.

Runs ``sweep`` cold (``vector_cache=False``) for layer ranges 0..k and for all layers, side by side,
and reports wall time, block calls (forward hooks on the blocks) and that every layer's score equals the full
sweep's.

    python benchmarks/shallow_layers.py --threads 1          # SmolLM2-135M on STS17, k = 3, 10, 20, all
    python benchmarks/shallow_layers.py --quick
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    Timer,
    common_options,
    counting,
    load_tasks,
    main_scores,
    start,
    table,
)

from layer_mteb import sweep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tasks", default="STS17", help="comma-separated offline tasks")
    parser.add_argument("--depths", default="3,10,20", help="deepest layer of each shallow sweep")
    common_options(parser)
    args = parser.parse_args(argv)
    names, config, loaded = start(args, quick_limit=60)
    cut = f" (first {args.limit} rows per split)" if args.limit else ""
    print(f"model {loaded.name} ({loaded.n_layers} blocks), tasks {', '.join(names)}{cut}")

    runs = {}
    for depth in [*(int(d) for d in args.depths.split(",")), loaded.n_layers]:
        tasks = load_tasks(names, args.data_dir, args.limit)
        with counting(loaded) as counter, Timer(config.device) as timer:
            frame = sweep(loaded, tasks, layers=f"0:{depth + 1}", config=config, vector_cache=False, progress=False)
        runs[depth] = (timer.seconds, counter.block_calls, main_scores(frame))
        print(f"layers 0..{depth}: {timer.seconds:.1f} s", flush=True)
    full_s, full_blocks, full_scores = runs[loaded.n_layers]
    rows = []
    for depth, (seconds, blocks, scores) in runs.items():
        diff = max(abs(score - full_scores[key]) for key, score in scores.items())
        rows.append(
            {
                "layers": f"0..{depth}",
                "wall s": seconds,
                "x of full sweep time": seconds / full_s,
                "block calls": blocks,
                "x of full block calls": blocks / full_blocks,
                "blocks needed / L": max(depth, 1) / loaded.n_layers,
                "max abs score diff vs full": f"{diff:.1e}",
            }
        )
    print("\n### shallow sweeps vs the full sweep\n")
    print(table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
