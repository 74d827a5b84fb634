"""Cost of a label-free agreement pick per task: ``agreement_curves`` at n = 256 (mutual k-NN and CKA with each
outlier treatment, TwoNN ID) with the sampled vectors already in the run's vector store and the reference's store,
as a pick made after a sweep would find them. Model and reference loads are timed once, apart.

    python benchmarks/agreement_cost.py                     # SmolLM2-135M (31 layers), every task it scored
    python benchmarks/agreement_cost.py --run results/gemma3-270m --tasks STS12 Banking77Classification

Run ``scripts/agreement_study.py`` on the run first (or this fills the stores in an untimed warm-up).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, scored_run_and_tasks, scored_run_options, table

from layer_mteb.metrics.agreement.compute import agreement_curves, model_source, references_for
from layer_mteb.model.loading import load_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    scored_run_options(parser)
    args = parser.parse_args(argv)
    run, tasks = scored_run_and_tasks(args)
    with Timer() as model_load:
        load_model(model_source(run), run.config)
    with Timer() as reference_load:
        references_for(run.model, None)
    agreement_curves(args.run, tasks, n=args.n, write=False)  # warm-up: fills the stores if they are cold
    rows = []
    for task in tasks:
        with Timer() as timer:
            frame = agreement_curves(args.run, task, n=args.n, write=False)
        rows.append({"task": task, "texts": int(frame["n"].iloc[0]), "seconds": timer.seconds})
    with Timer() as together:
        agreement_curves(args.run, tasks, n=args.n, write=False)
    print(f"load average before the table: {os.getloadavg()[0]:.2f}")
    loads = f"model load {model_load.seconds:.1f} s, reference load {reference_load.seconds:.1f} s"
    print(f"{loads} (every call below repeats both: they are inside its seconds)")
    print(table(rows, ["task", "texts", "seconds"]))
    print(f"max {max(r['seconds'] for r in rows):.1f} s, mean {sum(r['seconds'] for r in rows) / len(rows):.1f} s")
    print(f"all {len(tasks)} tasks in one call (one model and reference load): {together.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
