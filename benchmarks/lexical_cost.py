"""Cost of a lexical agreement pick per task from stored vectors: the seeded sample's layer vectors read from the
run's vector store, each lexical reference (``tfidf``, ``tfidf-lsa``, ``bm25``) fitted on the 256 texts, and the
mutual k-NN curve over every layer; beside it, what a trained reference (all-mpnet-base-v2) costs to encode the same
texts when its vectors are not stored, on the first ``--compare`` tasks.

    python benchmarks/lexical_cost.py                          # SmolLM2-135M (31 layers), every task it scored
    python benchmarks/lexical_cost.py --run results/gemma3-270m --tasks STS12 Banking77Classification

Run ``scripts/lexical_study.py`` on the run first (or this fills the store in an untimed warm-up).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, scored_run_and_tasks, scored_run_options, table

from layer_mteb.metrics.agreement.lexical import LEXICAL_KINDS, lexical_vectors, parse_lexical
from layer_mteb.metrics.agreement.measures import agreement_curve
from layer_mteb.metrics.agreement.reference import load_reference
from layer_mteb.metrics.agreement.run import layer_vectors, model_source, sample_texts
from layer_mteb.model.loading import load_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    scored_run_options(parser)
    parser.add_argument("--compare", type=int, default=2, help="tasks on which mpnet encodes the sample too")
    args = parser.parse_args(argv)
    run, tasks = scored_run_and_tasks(args)
    model = load_model(model_source(run), run.config)
    samples = {task: sample_texts(task, args.n, 0) for task in tasks}
    for task, texts in samples.items():  # warm-up: fills the store if it is cold
        layer_vectors(model, run.config, task, texts)
    rows = []
    for task, texts in samples.items():
        row: dict = {"task": task, "texts": len(texts)}
        with Timer() as read:
            layers = layer_vectors(model, run.config, task, texts)
        row["read vectors"] = read.seconds
        for kind in LEXICAL_KINDS:
            with Timer() as fit:
                reference = lexical_vectors(texts, parse_lexical(kind), 0)
            with Timer() as knn:
                agreement_curve(layers, reference, "mknn", "none", 10)
            row[f"{kind} fit"], row[f"{kind} total"] = fit.seconds, read.seconds + fit.seconds + knn.seconds
        rows.append(row)
    mpnet = load_reference("mpnet-base") if args.compare else None
    for row in rows[: args.compare]:
        with Timer() as encode:
            mpnet.encode(samples[row["task"]])  # no store: what a trained reference costs when nothing is stored
        row["mpnet encode"] = encode.seconds
    print(f"load average before the table: {os.getloadavg()[0]:.2f}; model {run.model}, {layers.shape[0]} layers")
    columns = ["task", "texts", "read vectors", *[f"{k} {p}" for k in LEXICAL_KINDS for p in ("fit", "total")]]
    print(table(rows, [*columns, "mpnet encode"] if args.compare else columns))
    for kind in LEXICAL_KINDS:
        totals = [r[f"{kind} total"] for r in rows]
        print(f"{kind}: max {max(totals):.2f} s, mean {sum(totals) / len(totals):.2f} s per task (read + fit + k-NN)")
    for row in rows[: args.compare]:
        ratio = row["mpnet encode"] / row["tfidf-lsa total"]
        print(f"{row['task']}: mpnet encoding alone {row['mpnet encode']:.1f} s = {ratio:.0f} x the tfidf-lsa pick")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
