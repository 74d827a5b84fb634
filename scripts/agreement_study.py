"""Regenerate ``results/<model>/agreement.csv``: the agreement and TwoNN curves of a scored run on every task it
scored, with the sensitivity rows of the agreement study (docs/agreement.md).

    python scripts/agreement_study.py results/smollm2-135m [--n-max 1024] [--seeds 0 1 2 3 4] [--tasks STS12 ...]

Per task, one seeded sample of ``--n-max`` texts goes through the model once (vectors kept in the run's vector
store) and through each reference once (kept beside it); every smaller ``n`` is a prefix of it. Rows written:

- default reference (all-mpnet-base-v2; all-MiniLM-L6-v2 for mpnet itself): mutual k-NN and CKA with each outlier
  treatment, and the TwoNN ID, at every n in N_SIZES up to ``--n-max`` (k = 10, seed 0); mutual k-NN at n = 256
  with every k in K_VALUES;
- every other reference that is not the model: the same at n = 256, k = 10;
- each further seed: a sample of 256 texts of its own, default reference, k = 10, with the ID.

Encoding dominates (2 CPU cores: MiniLM ~40 texts/s, SmolLM2 ~34, mpnet ~11, Gemma ~9); the curves themselves take
well under a second per task. Run it niced beside other work.
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import replace

from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics.agreement import AGREEMENT_TABLE, tidy_agreement
from layer_mteb.metrics.agreement.compute import (
    DEFAULT_N,
    TaskSample,
    curve_rows,
    layer_vectors,
    model_source,
    references_for,
    sample_texts,
)
from layer_mteb.metrics.agreement.reference import REFERENCES, default_reference, is_same_model
from layer_mteb.model.loading import load_model

N_SIZES = (32, 64, 128, 256, 512, 1024)
K_VALUES = (5, 10, 20, 50)

logger = logging.getLogger("agreement_study")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a run folder with scores.csv (e.g. results/minilm-l6)")
    parser.add_argument("--n-max", type=int, default=DEFAULT_N, help="largest sample per task (seed 0)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds; seeds other than 0 use n = 256")
    parser.add_argument("--tasks", nargs="+", help="default: every task of scores.csv")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    run = RunFolder(args.run).setting(device="cpu")
    model = load_model(model_source(run), run.config)
    default = default_reference(run.model)
    others = [r for r in REFERENCES if r != default and not is_same_model(r, run.model)]
    references = {ref.name: ref for ref in references_for(run.model, [default, *others])}
    default_name = next(iter(references))
    tasks = args.tasks or sorted(RunFolder(args.run).scores()["task"].unique())
    for task in tasks:
        started = time.perf_counter()
        rows: list[dict] = []
        for seed in args.seeds:
            size = args.n_max if seed == 0 else DEFAULT_N
            texts = sample_texts(task, size, seed)
            sample = TaskSample(task, seed, texts, layer_vectors(model, run.config, task, texts))
            for name, ref in references.items():
                if name == default_name:
                    sample.references[name] = (ref.revision, ref.encode(texts, ref.store(task)))
                elif seed == 0:  # other references are read at n = 256 only
                    sample.references[name] = (ref.revision, ref.encode(texts[:DEFAULT_N], ref.store(task)))
            rows += _rows(model, run.config, sample, default_name, seed == 0, args.n_max)
        RunFolder(args.run).update(AGREEMENT_TABLE, tidy_agreement(rows))
        logger.info("%s: %d rows in %.1f s", task, len(rows), time.perf_counter() - started)


def _rows(model, config, sample: TaskSample, default_name: str, first_seed: bool, n_max: int) -> list[dict]:
    main = replace(sample, references={default_name: sample.references[default_name]})
    if not first_seed:
        return curve_rows(model, config, main, sizes=[DEFAULT_N])
    rows = curve_rows(model, config, main, sizes=[n for n in N_SIZES if n <= n_max] or [n_max])
    other_ks = [k for k in K_VALUES if k != 10]
    rows += curve_rows(model, config, main, sizes=[DEFAULT_N], ks=other_ks, metrics=["mknn"], with_id=False)
    for name, entry in sample.references.items():
        if name != default_name:
            alone = replace(sample, references={name: entry})
            rows += curve_rows(model, config, alone, sizes=[DEFAULT_N], with_id=False)
    return rows


if __name__ == "__main__":
    main()
