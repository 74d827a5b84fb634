"""Where a sweep's time went, per model, from the ``run.json`` of finished runs (no model is run here).

Each task's entry in ``run.json`` holds its wall time, the seconds of each phase, the forward pass's texts per
second and the process's peak memory (:func:`layer_mteb.evaluation.workers.time_record`). This prints one row per
run folder: totals over the tasks that encoded and evaluated something (a task a later run read back counts with
the record of the run that computed it), the share of each phase, and wall ÷ (forward + evaluators ÷ cores), the
ratio the project aims to keep at or below 1.15.
Usage: ``python benchmarks/run_breakdown.py results/minilm-l6 results/mpnet-base ...``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from layer_mteb.common.run_folder import RUN_LOG

PHASES = ("forward", "pooling", "tokenize", "token_metrics", "task_metrics", "cache_io", "evaluators")


def breakdown(run: Path) -> dict[str, object] | None:
    """One run folder's totals over its timed tasks, or None when none was timed."""
    # a task a later run only read back keeps the computing run's record under "computed"
    entries = [{**e, **e.get("computed", {})} for e in json.loads((run / RUN_LOG).read_text())["tasks"]]
    entries = [e for e in entries if e.get("overhead_ratio")]
    if not entries:
        return None
    total = {phase: sum(e["seconds"].get(phase, 0.0) for e in entries) for phase in (*PHASES, "wall")}
    work = sum(total[p] for p in PHASES)
    texts = sum(e["texts_encoded"] for e in entries)
    # each task's bare time (forward + evaluators over its cores) is its wall over its ratio
    bare = sum(e["seconds"]["wall"] / e["overhead_ratio"] for e in entries)
    row: dict[str, object] = {
        "model": entries[0]["model"].split("/")[-1],
        "tasks": len(entries),
        "wall_min": total["wall"] / 60,
        "texts": texts,
        "texts_per_s": texts / total["forward"] if total["forward"] else float("nan"),
        **{f"{p}_%": 100 * total[p] / work for p in ("forward", "pooling", "evaluators")},
        "other_%": 100 * (work - total["forward"] - total["pooling"] - total["evaluators"]) / work,
        "peak_GB": max(e["peak_rss_bytes"] for e in entries) / 1e9,
        "ratio": total["wall"] / bare,
        "worst_task_ratio": max(e["overhead_ratio"] for e in entries),
        "eval_workers": ",".join(sorted({str(e["eval_workers"]) for e in entries})),
    }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (each with a run.json)")
    args = parser.parse_args()
    rows = [row for row in map(breakdown, args.runs) if row is not None]
    if not rows:
        raise SystemExit("no timed task in these runs (run.json entries before timing was recorded have none)")
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row.values()) + " |")


if __name__ == "__main__":
    main()
