"""Labelled layer selection (``select --labels K``) with several worker processes against one.

Every layer of a committed run is scored on K labelled examples in each of ``--draws`` draws; the (draw, layer)
pairs are independent, so ``--eval-workers`` scores them in forked processes, one thread each. Default: the 31
layers of SmolLM2-135M on EmotionClassification at K = 64, where logistic regression on unscaled decoder states
dominates. The picks must be identical. Vectors come from the run's vector store (one forward pass for the task
when it is cold, done before either side is timed). The load average is printed: other processes take cores away.

    python benchmarks/label_workers.py
    python benchmarks/label_workers.py --run results/gemma3-270m --task Banking77Classification --k 32
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, table

from layer_mteb.analysis.labels.budget import iter_task_layers, pick_layers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default="results/smollm2-135m", help="a run folder with scores.csv")
    parser.add_argument("--task", default="EmotionClassification")
    parser.add_argument("--k", type=int, default=64, help="labelled examples per draw")
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--workers", default="1,2", help="worker counts to compare; the first is the reference")
    parser.add_argument("--data-dir", default=None, help="task data folder (default: $LAYER_MTEB_DATA)")
    args = parser.parse_args(argv)
    (unit,) = iter_task_layers(args.run, tasks=[args.task], data_dir=args.data_dir)
    rows, reference = [], None
    for workers in (int(w) for w in args.workers.split(",")):
        load_before = os.getloadavg()[0]
        with Timer() as timer:
            picks = pick_layers(unit, args.k, args.draws, seed=0, workers=workers)
        reference = reference or (timer.seconds, picks)
        rows.append(
            {
                "eval workers": workers,
                "draws x layers": args.draws * len(unit.scores),
                "wall s": timer.seconds,
                "speed-up": reference[0] / timer.seconds,
                "identical picks": "yes" if picks == reference[1] else "NO",
                "load before / after": f"{load_before:.1f} / {os.getloadavg()[0]:.1f}",
            }
        )
        print(f"{workers} worker(s): {timer.seconds:.1f} s, picks {picks}", flush=True)
    print(f"{unit.model}, {unit.name}, K = {args.k}, {args.draws} draws, {len(unit.scores)} layers")
    print(table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
