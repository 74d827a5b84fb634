"""What the all-layer cache of the paper's biggest tasks needs, and where it lives with the default budget.

Computed from N (unique texts per task, counted with mteb's own loaders and samplers on hub-shaped data), L+1 and
D, with the budget module's rule for the default budget (half the free GPU memory, at most half the host's
available memory) on a box with an 80 GB GPU and 128 GB of host memory. A task whose store fits the budget keeps it
on the GPU; one that does not writes one file per layer (peak GPU for vectors: one batch). Evaluating a layer reads
that layer (N x D) and hands mteb one row per text it asked for, gathered on the host in chunks.

    python benchmarks/memory_table.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import table

from layer_mteb.vectors.memory import store_bytes

GB = 10**9
GIB = 2**30

#: task -> (unique texts, rows handed to mteb per layer and encode call when more than the unique texts)
TASKS = {
    "ArxivClusteringS2S": (628_078, None),
    "StackExchangeClustering": (277_050, None),
    "SciDocsRR": (88_446, None),
    "StackOverflowDupQuestions": (82_798, None),
    "RedditClustering": (64_337, None),
    "TwitterURLCorpus": (45_633, None),
    "MindSmallReranking": (42_439, 2_362_514),
    "BiorxivClusteringS2S": (41_555, None),
}

#: model -> (hidden states L+1, D, GPU bytes of the weights in the dtype it would run in)
MODELS = {
    "Pythia-410m": (25, 1024, 1.6 * GB),  # float32
    "Mamba-130m": (25, 768, 0.5 * GB),  # float32
    "Llama-3 8B / LLM2Vec": (33, 4096, 16.1 * GB),  # bfloat16
}


def default_budget(gpu_free: float, host_available: float) -> float:
    """:func:`layer_mteb.vectors.memory.auto_memory_limit` on a given box."""
    return min(gpu_free / 2, host_available / 2)


def rows(gpu: float, host: float, os_reserve: float) -> list[dict]:
    out = []
    for task, (n, answer_rows) in TASKS.items():
        for model, (states, hidden, weights) in MODELS.items():
            store = store_bytes(n, states, hidden)
            budget = default_budget(gpu - weights, host - os_reserve)
            in_memory = store <= budget
            one_layer = store_bytes(n, 1, hidden)
            answer = store_bytes(answer_rows or n, 1, hidden)
            out.append(
                {
                    "task": task,
                    "N": f"{n:,}",
                    "model": model,
                    "all-layer store GiB": f"{store / GIB:.1f}",
                    "default budget GB": f"{budget / GB:.0f}",
                    "store goes to": "GPU memory" if in_memory else "one .npy per layer on disk",
                    "GPU for vectors GiB": f"{store / GIB:.1f}" if in_memory else "one batch",
                    "host per layer evaluated GiB": f"{(one_layer * (not in_memory) + answer) / GIB:.1f}",
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu-gb", type=float, default=80)
    parser.add_argument("--host-gb", type=float, default=128)
    parser.add_argument("--os-reserve-gb", type=float, default=8, help="host memory not available to the run")
    args = parser.parse_args(argv)
    found = rows(args.gpu_gb * GB, args.host_gb * GB, args.os_reserve_gb * GB)
    print(table(found, list(found[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
