"""Layers scored by several worker processes against one, on a run whose time goes to mteb's evaluators.

Every layer of all-MiniLM-L6-v2 on Banking77 and Emotion (logistic regressions, ten per layer). The tasks' vectors
are computed once first (a warm vector cache), so both sides time the evaluation of every layer, not the forward
pass; each evaluator runs on one thread in both. The scores must be identical. The load average is printed: other
processes on the machine take cores away from the workers.

    python benchmarks/eval_workers.py                        # --eval-workers 2 against 1
    python benchmarks/eval_workers.py --workers 1,2,4 --repeats 2
    python benchmarks/eval_workers.py --quick
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, common_options, load_tasks, start, table

from layer_mteb import sweep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--tasks", default="Banking77Classification,EmotionClassification")
    parser.add_argument("--workers", default="1,2", help="worker counts to compare; the first is the reference")
    parser.add_argument("--repeats", type=int, default=1)
    common_options(parser)
    args = parser.parse_args(argv)
    names, config, loaded = start(args, quick_limit=500)
    counts = [int(w) for w in args.workers.split(",")]
    os.environ["LAYER_MTEB_CACHE"] = tempfile.mkdtemp(prefix="eval-workers-")
    sweep(loaded, load_tasks(names, args.data_dir, args.limit), config=config, progress=False, eval_workers=1)
    rows = []
    for repeat in range(args.repeats):
        reference = None
        for workers in counts:
            tasks = load_tasks(names, args.data_dir, args.limit)
            load_before = os.getloadavg()[0]
            with Timer() as timer:
                frame = sweep(loaded, tasks, config=config, progress=False, eval_workers=workers)
            if reference is None:
                reference = (timer.seconds, frame)
            identical = frame["main_score"].tolist() == reference[1]["main_score"].tolist()
            rows.append(
                {
                    "run": repeat + 1,
                    "eval workers": workers,
                    "layers x tasks": len(frame),
                    "wall s": timer.seconds,
                    "speed-up": reference[0] / timer.seconds,
                    "identical scores": "yes" if identical else "NO",
                    "load before / after": f"{load_before:.1f} / {os.getloadavg()[0]:.1f}",
                }
            )
            print(f"run {repeat + 1}, {workers} worker(s): {timer.seconds:.1f} s", flush=True)
    print(table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
