"""`layer-mteb run --eval-workers 2` against `--eval-workers 1`, whole process, this checkout beside earlier revisions.

Every layer of all-MiniLM-L6-v2 on Banking77, Emotion and TweetSentimentExtraction (logistic regressions, ten per
layer), the case the workers exist for: the tasks' vectors are computed first by one untimed run per checkout (a
warm vector cache), then every timed run writes a fresh output folder, so both sides time what a rerun pays (start-up,
the up-front plan, loading, the evaluation of every layer), not the forward pass. A serial part a change adds before
the first layer is scored shows here and not in the evaluators' seconds of ``run.json`` (#54).

Each revision of ``--compare-with`` is exported with ``git archive`` into a temporary folder and run from there by
the same Python (its code, this environment's packages); runs alternate checkout by checkout and worker count by
worker count, so a machine that slows down mid-benchmark slows every side alike. Printed per checkout and worker
count: the median wall seconds, the median CPU seconds of the command and its workers, and the median of the 2/1 wall
ratios paired repeat by repeat (the figure to compare; it is only meaningful on an idle machine: other processes take
cores away from the workers, so the load average is printed). Scores must be identical for every worker count.

    python benchmarks/eval_workers.py --compare-with HEAD~1            # this working tree beside its parent commit
    python benchmarks/eval_workers.py --compare-with 8f25b2a --compare-with ae3f2c6 --repeats 5
    python benchmarks/eval_workers.py --repeats 1 --tasks EmotionClassification   # a quick look
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, REPO, table

TASKS = "Banking77Classification,EmotionClassification,TweetSentimentExtractionClassification"


@dataclass
class Checkout:
    """Code to run (``root`` on ``PYTHONPATH``) with a vector cache of its own (a revision may key it otherwise)."""

    label: str
    root: Path
    cache: Path
    runs: dict[int, list[tuple[float, float]]] = field(default_factory=dict)  # workers -> [(wall s, cpu s)]
    scores: dict[int, list[float]] = field(default_factory=dict)  # workers -> main scores of the last run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA), help="folder of local task data")
    parser.add_argument("--workers", default="1,2", help="worker counts; ratios are to the first")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each checkout and worker count")
    parser.add_argument(
        "--compare-with", action="append", default=[], metavar="REV", help="a git revision to run beside this checkout"
    )
    parser.add_argument(
        "--cache", help="folder of the vector caches, one per checkout (kept and reused; default: a temporary one)"
    )
    args = parser.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",")]
    with tempfile.TemporaryDirectory(prefix="eval-workers-") as scratch:
        caches = Path(args.cache) if args.cache else Path(scratch) / "caches"
        checkouts = [Checkout("this checkout", REPO, caches / "this-checkout")]
        for rev in args.compare_with:
            checkouts.append(Checkout(rev, export(rev, Path(scratch) / f"rev-{len(checkouts)}"), caches / rev))
        print(f"machine: {os.cpu_count()} CPU cores, load average {load()} at the start", flush=True)
        for checkout in checkouts:  # the vectors once per checkout, untimed (kept in a --cache given again)
            if not (checkout.cache / "vectors").is_dir():
                run(checkout, args, counts[0], Path(scratch) / "warm" / checkout.cache.name)
        for repeat in range(args.repeats):
            for checkout in checkouts:
                for workers in counts if repeat % 2 == 0 else counts[::-1]:
                    output = Path(scratch) / "out" / f"{checkout.cache.name}-{workers}-{repeat}"
                    wall, cpu, scores = run(checkout, args, workers, output)
                    checkout.runs.setdefault(workers, []).append((wall, cpu))
                    checkout.scores[workers] = scores
                    print(f"{checkout.label}, {workers} worker(s), run {repeat + 1}: {wall:.1f} s", flush=True)
        print(f"load average {load()} at the end")
    print(table(summary(checkouts, counts), ["checkout", "eval workers", "wall s", "cpu s", "ratio", "same scores"]))
    return 0


def export(rev: str, folder: Path) -> Path:
    """The files of ``rev`` (``git archive``) in ``folder``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def run(checkout: Checkout, args: argparse.Namespace, workers: int, output: Path) -> tuple[float, float, list[float]]:
    """One ``layer-mteb run`` of ``checkout`` -> (wall s, CPU s of it and its workers, main scores in row order)."""
    command = [sys.executable, "-m", "layer_mteb.cli", "run", "--model", args.model, "--tasks", args.tasks]
    command += ["--data-dir", args.data_dir, "--eval-workers", str(workers), "--output", str(output)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(checkout.root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "LAYER_MTEB_CACHE": str(checkout.cache),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    before, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(command, env=env, cwd=checkout.root, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _children_cpu() - before
    if done.returncode:
        raise SystemExit(f"{checkout.label}: `{' '.join(command)}` failed:\n{done.stderr[-3000:]}")
    frame = pd.read_csv(output / "scores.csv").sort_values(["task", "layer", "split", "subset"])
    return wall, cpu, frame["main_score"].tolist()


def _children_cpu() -> float:
    """User + system seconds of every finished child process (and the workers they waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def summary(checkouts: list[Checkout], counts: list[int]) -> list[dict]:
    rows = []
    for checkout in checkouts:
        reference = checkout.runs[counts[0]]
        for workers in counts:
            runs = checkout.runs[workers]
            ratios = [wall / ref_wall for (wall, _), (ref_wall, _) in zip(runs, reference, strict=True)]
            rows.append(
                {
                    "checkout": checkout.label,
                    "eval workers": workers,
                    "wall s": statistics.median(wall for wall, _ in runs),
                    "cpu s": statistics.median(cpu for _, cpu in runs),
                    "ratio": f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})",
                    "same scores": "yes" if checkout.scores[workers] == checkout.scores[counts[0]] else "NO",
                }
            )
    return rows


def load() -> str:
    return "{:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())


if __name__ == "__main__":
    raise SystemExit(main())
