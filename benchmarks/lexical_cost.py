"""Cost of a lexical agreement pick per task from stored vectors, phase by phase: the seeded sample's layer vectors
read from the run's vector store, the layers' k nearest neighbours (once per task: they serve every reference), each
lexical reference (``tfidf``, ``tfidf-lsa``, ``bm25``) fitted on the sample and its own neighbours, and the mutual
k-NN curve over every layer. A pick with one reference, as ``select --by agreement --agreement-with KIND`` makes
it, costs read + layers' k-NN + that reference's fit and k-NN. Beside it, on the first ``--compare`` tasks, what a
trained reference (all-mpnet-base-v2) costs to encode the same texts when its vectors are not stored.

    python benchmarks/lexical_cost.py                          # SmolLM2-135M (31 layers), every task it scored
    python benchmarks/lexical_cost.py --run results/gemma3-270m --tasks STS12 Banking77Classification --repeat 3

Each task is timed ``--repeat`` times and its fastest repeat kept (the others were slowed by whatever else ran);
the machine's load average (1, 5, 15 minutes, as ``uptime`` prints it) is printed before and after the table. The
curves are checked against :func:`~layer_mteb.metrics.agreement.measures.agreement_curve`: the phases add up to the
same numbers. Run ``scripts/lexical_study.py`` on the run first (or this fills the store in an untimed warm-up).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, scored_run_and_tasks, scored_run_options, table

from layer_mteb.metrics.agreement.compute import layer_vectors, model_source, sample_texts
from layer_mteb.metrics.agreement.lexical import LEXICAL_KINDS, lexical_vectors, parse_lexical
from layer_mteb.metrics.agreement.measures import DEFAULT_K, agreement_curve, neighbour_sets, shared_neighbours
from layer_mteb.metrics.agreement.reference import load_reference
from layer_mteb.model.loading import load_model


def time_task(model, config, task: str, texts: list[str]) -> dict:
    """One task's phases in seconds, and each kind's curve (to check against the one-call path)."""
    row: dict = {"task": task, "texts": len(texts)}
    with Timer() as read:
        layers = layer_vectors(model, config, task, texts)
    with Timer() as knn:
        mine = neighbour_sets(layers, DEFAULT_K)
    row["read"], row["layers k-NN"], row["curves"] = read.seconds, knn.seconds, {}
    for kind in LEXICAL_KINDS:
        with Timer() as fit:
            reference = lexical_vectors(texts, parse_lexical(kind), 0)
        with Timer() as theirs:
            values = shared_neighbours(mine, neighbour_sets(reference, DEFAULT_K), DEFAULT_K).numpy()
        row[f"{kind} fit"], row[f"{kind} k-NN"] = fit.seconds, theirs.seconds
        row[f"{kind} pick"] = read.seconds + knn.seconds + fit.seconds + theirs.seconds
        row["curves"][kind] = (layers, reference, values)
    row["all three"] = read.seconds + knn.seconds + sum(row[f"{k} fit"] + row[f"{k} k-NN"] for k in LEXICAL_KINDS)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    scored_run_options(parser)
    parser.add_argument("--repeat", type=int, default=3, help="timings per task; the fastest is kept")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--compare", type=int, default=0, help="tasks on which mpnet encodes the sample too")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    run, tasks = scored_run_and_tasks(args)
    model = load_model(model_source(run), run.config)
    samples = {task: sample_texts(task, args.n, 0) for task in tasks}
    for task, texts in samples.items():  # warm-up: fills the store if it is cold
        layer_vectors(model, run.config, task, texts)
    print(
        f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; torch threads "
        f"{torch.get_num_threads()}; model {run.model}"
    )
    rows = []
    for task, texts in samples.items():
        timed = [time_task(model, run.config, task, texts) for _ in range(max(1, args.repeat))]
        row = min(timed, key=lambda r: r["all three"])
        for layers, reference, values in row.pop("curves").values():  # the phases are the one-call curve
            np.testing.assert_array_equal(values, agreement_curve(layers, reference, "mknn", "none", DEFAULT_K))
        rows.append(row)
    mpnet = load_reference("mpnet-base") if args.compare else None
    for row in rows[: args.compare]:
        with Timer() as encode:
            mpnet.encode(samples[row["task"]])  # no store: what a trained reference costs when nothing is stored
        row["mpnet encode"] = encode.seconds
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    columns = ["task", "texts", "read", "layers k-NN", *[f"{k} {p}" for k in LEXICAL_KINDS for p in ("fit", "k-NN")]]
    columns += [f"{k} pick" for k in LEXICAL_KINDS] + ["all three"]
    print(table(rows, [*columns, "mpnet encode"] if args.compare else columns))
    for name in [*(f"{k} pick" for k in LEXICAL_KINDS), "all three"]:
        values = [r[name] for r in rows]
        print(f"{name}: median {statistics.median(values):.2f} s, max {max(values):.2f} s per task")
    for row in rows[: args.compare]:
        ratio = row["mpnet encode"] / row["tfidf-lsa pick"]
        print(f"{row['task']}: mpnet encoding alone {row['mpnet encode']:.1f} s = {ratio:.0f} x the tfidf-lsa pick")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
