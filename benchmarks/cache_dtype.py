"""What a half-precision vector store would do to the scores, measured before such a store is offered.

A float16 or bfloat16 store (``--cache-dtype``, optional in the paper-scale issue) would halve the all-layer store.
Here each layer's float32 pooled vectors come from one ``LayerCache``; mteb scores them as they are, rounded to
float16 and rounded to bfloat16 (each evaluation from the task's same random state, no result cache). The table
gives, per model and readout, the largest |score difference| over layers and tasks and the largest |pooled value|:
float16 overflows to inf above 65,504.

    python benchmarks/cache_dtype.py                                   # MiniLM-L6 and SmolLM2-135M, five tasks
    python benchmarks/cache_dtype.py --models minilm-l6 --quick        # 200 rows per split
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, load_tasks, machine_line, table

from layer_mteb.evaluation.encoder import LayerEncoder

STORES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


class RoundedLayer(LayerEncoder):
    """One layer whose vectors pass through ``store`` (as a half-precision store would keep them) on their way out."""

    def __init__(self, cache, layer: int, store: torch.dtype | None):
        super().__init__(cache.model, layer, cache=cache)
        self.store = store

    def encode(self, inputs, **kwargs):
        vectors = super().encode(inputs, **kwargs)
        if self.store is None:
            return vectors
        return torch.from_numpy(vectors).to(self.store).to(torch.float32).numpy()


def scores_by_store(cache, tasks: list, layers: range) -> tuple[dict, float]:
    """{(store, task, layer): main score}, and the largest |pooled value| seen."""
    import mteb

    from layer_mteb.tasks.state import TaskRandomState

    scores = {}
    for task in tasks:
        state = TaskRandomState.of(task)
        for layer in layers:
            for name, store in [("float32", None), *STORES.items()]:
                state.restore(task)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = mteb.evaluate(RoundedLayer(cache, layer, store), task, cache=None, show_progress_bar=False)
                scores[name, task.metadata.name, layer] = result.task_results[0].get_score()
    return scores, float(cache.vectors(list(cache.index)).abs().max())  # every task's texts are in the cache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="minilm-l6,smollm2-135m")
    parser.add_argument("--readouts", default="final_norm,raw")
    parser.add_argument(
        "--tasks", default="STSBenchmark,BIOSSES,STS17,TwitterSemEval2015,AmazonCounterfactualClassification"
    )
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="each split cut to its first 200 rows")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    logging.getLogger("mteb").setLevel(logging.ERROR)  # 'superseded by' notes, once per task object

    from layer_mteb import EncodeConfig, LayerCache, load_model

    print(machine_line("cpu"))
    rows = []
    for name in args.models.split(","):
        for readout in args.readouts.split(","):
            config = EncodeConfig(readout=readout)
            model = load_model(name, config)
            if readout == "raw" and model.final_norm is None:
                continue  # an encoder has no final norm: raw is final_norm
            tasks = load_tasks(args.tasks.split(","), args.data_dir, 200 if args.quick else None)
            cache = LayerCache(model, config)
            scores, largest = scores_by_store(cache, tasks, range(model.n_layers + 1))
            for store in STORES:
                diffs = {
                    (t, layer): abs(v - scores["float32", t, layer])
                    for (s, t, layer), v in scores.items()
                    if s == store
                }
                worst = max(diffs, key=diffs.get)
                rows.append(
                    {
                        "model": model.name,
                        "readout": readout,
                        "store": store,
                        "layers x tasks": len(diffs),
                        "max |score diff|": f"{diffs[worst]:.2e}",
                        "at (task, layer)": f"{worst[0]}, {worst[1]}",
                        "mean |score diff|": f"{np.mean(list(diffs.values())):.2e}",
                        "identical": sum(d == 0 for d in diffs.values()),
                        "largest |pooled value|": f"{largest:.4g}",
                    }
                )
    print(table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
