"""Add the lexical-reference agreement curves of the lexical study (issue #39, docs/agreement.md) to a run's
``agreement.csv``: rows of references ``tfidf``, ``tfidf-lsa``, ``bm25`` and their sensitivity variants, beside the
trained references' rows, which stay as they are.

    python scripts/lexical_study.py results/smollm2-135m [--seeds 0 1 2] [--sensitivity-tasks STS12 ...]

Per task, the seed-0 sample of 256 texts (the one ``agreement_study.py`` drew; 1024 on a sensitivity task, of which
those 256 are the first: samples nest) is read from the run's vector store (a forward pass fills what it lacks).
Each lexical reference is fitted on the first ``n`` texts alone (refitted per n: it is part of what a smaller sample
gives). Rows written, all mutual k-NN with k = 10:

- ``tfidf``, ``tfidf-lsa``, ``bm25`` (the settings fixed before the study) at n = 64, 128, 256, outliers ``none``,
  and at n = 256 also ``standardize`` and ``clamp`` (the layers' rogue dimensions tamed);
- the vectoriser variants at n = 256, outliers ``none``: unigrams (``tfidf:ngrams=1``, ``tfidf-lsa:ngrams=1``,
  ``bm25:ngrams=1``), LSA to 50 and 300 dimensions (``tfidf-lsa:dims=50``, ``tfidf-lsa:dims=300``) and the BM25
  weighting (``bm25:k1=0.5``, ``bm25:k1=2``: term frequency saturating sooner or later; ``bm25:b=0``, ``bm25:b=1``:
  no or full document-length normalisation);
- on each of ``--sensitivity-tasks``: the three fixed references at n = 512 and 1024 (a task with fewer texts: all
  of them), and each further seed of ``--seeds``, a sample of 256 texts of its own (its vectors from the store, or
  a forward pass), outliers ``none``.

No intrinsic-dimension or trained-reference row is written, so the rows already in the file keep their bytes.
"""

from __future__ import annotations

import argparse
import logging
import time

from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics.agreement import AGREEMENT_TABLE, tidy_agreement
from layer_mteb.metrics.agreement.compute import (
    DEFAULT_N,
    TaskSample,
    curve_rows,
    layer_vectors,
    model_source,
    sample_texts,
)
from layer_mteb.metrics.agreement.lexical import LEXICAL_KINDS, lexical_vectors, parse_lexical
from layer_mteb.metrics.agreement.measures import OUTLIERS
from layer_mteb.model.loading import load_model

SIZES = (64, 128, DEFAULT_N)
LARGE_SIZES = (512, 1024)  # on the sensitivity tasks only
VARIANTS = (
    "tfidf:ngrams=1",
    "tfidf-lsa:ngrams=1",
    "bm25:ngrams=1",
    "tfidf-lsa:dims=50",
    "tfidf-lsa:dims=300",
    "bm25:k1=0.5",
    "bm25:k1=2",
    "bm25:b=0",
    "bm25:b=1",
)

logger = logging.getLogger("lexical_study")


def lexical_rows(model, config, task: str, seed: int, texts: list[str], layers, names, n: int, outliers=("none",)):
    """Rows of each lexical reference of ``names`` fitted on the first ``n`` texts: mutual k-NN, k = 10, by default
    no outlier treatment (the agreement study's default, fixed before this study)."""
    n = min(n, len(texts))
    references = {}
    for name in names:
        spec = parse_lexical(name)
        references[spec.name] = (spec.revision, lexical_vectors(texts[:n], spec, seed))
    sample = TaskSample(task, seed, texts[:n], layers[:, :n], references)
    return curve_rows(model, config, sample, sizes=[n], metrics=["mknn"], outliers=list(outliers), with_id=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a run folder with scores.csv (e.g. results/smollm2-135m)")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0], help="seeds other than 0: n = 256 on --sensitivity-tasks"
    )
    parser.add_argument(
        "--sensitivity-tasks", nargs="+", default=[], help="tasks measured at n = 512 and 1024 and the further seeds"
    )
    parser.add_argument("--tasks", nargs="+", help="default: every task of scores.csv")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    run = RunFolder(args.run).setting(device="cpu")
    model = load_model(model_source(run), run.config)
    tasks = args.tasks or sorted(RunFolder(args.run).scores()["task"].unique())
    rows: list[dict] = []
    for task in tasks:
        started = time.perf_counter()
        sensitive = task in args.sensitivity_tasks
        texts = sample_texts(task, max(LARGE_SIZES) if sensitive else DEFAULT_N, 0)
        layers = layer_vectors(model, run.config, task, texts)
        for n in SIZES:
            outliers = OUTLIERS if n == DEFAULT_N else ("none",)
            rows += lexical_rows(model, run.config, task, 0, texts, layers, LEXICAL_KINDS, n, outliers)
        rows += lexical_rows(model, run.config, task, 0, texts, layers, VARIANTS, DEFAULT_N)
        for n in LARGE_SIZES if sensitive and len(texts) > DEFAULT_N else ():
            rows += lexical_rows(model, run.config, task, 0, texts, layers, LEXICAL_KINDS, n)
        for seed in [s for s in args.seeds if s != 0 and sensitive]:
            other = sample_texts(task, DEFAULT_N, seed)
            vectors = layer_vectors(model, run.config, task, other)
            rows += lexical_rows(model, run.config, task, seed, other, vectors, LEXICAL_KINDS, DEFAULT_N)
        logger.info("%s: %d rows so far, %.1f s", task, len(rows), time.perf_counter() - started)
    # once: merging into a large agreement.csv takes seconds
    RunFolder(args.run).update(AGREEMENT_TABLE, tidy_agreement(rows))


if __name__ == "__main__":
    main()
