"""How many times does each post-run command read each table of its run folder?

Copies the committed run folders (``results/smollm2-135m``, ``results/minilm-l6``) to a temporary folder, runs each
command in this process through ``layer_mteb.cli.main`` with ``pandas.read_csv`` counting the files it opens, and
prints one Markdown row per command: ``scores.csv`` reads first, then every other table read. The commands that load
a model use the packaged all-MiniLM-L6-v2 on the CPU at small sizes (a minute or two in all).

    python benchmarks/table_reads.py [--only correlate,report]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pandas as pd

from layer_mteb.cli import main

RESULTS = Path(__file__).resolve().parent.parent / "results"

#: (name, argv with RUN standing for a fresh copy of the run folder, TMP for a scratch folder, the run copied)
COMMANDS = [
    ("correlate", ["correlate", "--run", "RUN", "--permutations", "10"], "smollm2-135m"),
    ("report", ["report", "--run", "RUN", "--output", "TMP/report"], "smollm2-135m"),
    ("select", ["select", "--run", "RUN"], "smollm2-135m"),
    ("select --by auto", ["select", "--run", "RUN", "--by", "auto"], "smollm2-135m"),
    ("select --by agreement", ["select", "--run", "RUN", "--by", "agreement"], "smollm2-135m"),
    ("export --by auto", ["export", "--run", "RUN", "--by", "auto", "--output", "TMP/st"], "minilm-l6"),
    ("cost", ["cost", "--run", "RUN", "--texts", "wikitext", "--n-texts", "8", "--repeats", "1", "--device", "cpu"],
     "minilm-l6"),
    ("metrics --run", ["metrics", "--run", "RUN", "--texts", "wikitext", "--n-prompts", "16", "--views", "0",
                       "--device", "cpu"], "minilm-l6"),
    ("stress --run", ["stress", "--run", "RUN", "--tests", "repetition", "--n-prompts", "4", "--device", "cpu"],
     "minilm-l6"),
]  # fmt: skip


def count_reads(argv: list[str]) -> tuple[int, Counter]:
    """The exit code of ``argv`` and how many times it read each file (by name)."""
    reads: Counter = Counter()
    read_csv = pd.read_csv

    def counted(path, *args, **kwargs):
        reads[Path(str(path)).name] += 1
        return read_csv(path, *args, **kwargs)

    pd.read_csv = counted
    try:
        code = main(argv)
    finally:
        pd.read_csv = read_csv
    return code, reads


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="comma-separated command names (default: all)")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    rows = []
    for name, argv, run in COMMANDS:
        if only and name not in only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            folder = shutil.copytree(RESULTS / run, Path(tmp) / run)
            code, reads = count_reads([a.replace("RUN", str(folder)).replace("TMP", tmp) for a in argv])
        others = ", ".join(f"{f} {n}" for f, n in sorted(reads.items()) if f != "scores.csv")
        rows.append(f"| `{name}` | {code} | {reads['scores.csv']} | {others} |")
    print("| command | exit | scores.csv reads | other reads |\n| --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main_()
