"""``layer-mteb report``: run folders in, a report folder out (Table 1, figures, selector leaderboard).

The folder is built under a temporary name and renamed into place at the end, so a failed report never leaves
half its files; an existing folder is replaced only when it is itself a report.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import pandas as pd

from layer_mteb.analysis.report import figures, stress_report
from layer_mteb.analysis.report.cost_figure import STEM as COST_STEM
from layer_mteb.analysis.report.cost_figure import cost_quality
from layer_mteb.analysis.report.markdown import leaderboard_markdown, table1_markdown
from layer_mteb.analysis.report.merged import Runs, load_runs
from layer_mteb.analysis.report.table1 import (
    build_table1,
    headline_tasks,
    layer_means,
    per_task_summary,
    table1_notes,
    task_scores,
)
from layer_mteb.analysis.rules import fewer_shared_tasks
from layer_mteb.analysis.runs.folders import load_paper_scores
from layer_mteb.analysis.selection.leaderboard import selector_leaderboard
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import building
from layer_mteb.common.run_folder import RunFolder

logger = logging.getLogger(__name__)

PaperTasks = Literal["run", "all"]
PAPER_TASKS: tuple[str, ...] = ("run", "all")
REPORT_MARKER = "table1.csv"


def write_report(
    runs: Sequence[str | Path | RunFolder] | Runs,
    output: str | Path,
    *,
    paper_curves: bool = False,
    pythia_scores: str | Path | None = None,
    paper_tasks: PaperTasks = "run",
    entropy_selector: str | None = None,
    random_runs: Sequence[str | Path | RunFolder] = (),
) -> list[Path]:
    """Write Table 1, Figure 1, heatmaps and, where the runs hold them, metric panels, correlation bars and the
    selector leaderboard; returns the paths written.

    ``paper_tasks="run"`` averages the paper curves over the paper tasks the runs scored (like for like), ``"all"``
    over all 32 as the paper does. ``random_runs`` (random-weight models) stay out of Figure 1, whose curves all
    average one task set (:func:`~.rules.common_tasks`), named in its caption.
    """
    if paper_tasks not in PAPER_TASKS:
        raise UserError(f"paper_tasks must be one of {PAPER_TASKS}, not {paper_tasks!r}")
    random_runs = [RunFolder(folder) for folder in random_runs]  # read once, for both loads below
    data = runs if isinstance(runs, Runs) else load_runs([*runs, *random_runs])
    random_models = set(load_runs(random_runs).scores["model"]) if random_runs else set()
    output = Path(output)
    _check_output(output, data.folders)
    tasks = task_scores(data.scores)
    headline = headline_tasks(tasks, random_models)
    paper = paper_layer_means(headline.rows, pythia_scores, paper_tasks) if paper_curves else None
    summary = per_task_summary(tasks)
    table = build_table1(data.scores, data.picks, entropy_selector=entropy_selector)
    shrunk = fewer_shared_tasks(tasks[~tasks["model"].isin(random_models)], headline.tasks)
    if shrunk:
        logger.warning(shrunk)
    with building(output) as tmp:
        table.to_csv(tmp / "table1.csv", index=False)
        notes = [*table1_notes(summary), *arithmetic_notes(data), *benchmark_notes(data.folders)]
        (tmp / "table1.md").write_text(table1_markdown(table, notes))
        summary.to_csv(tmp / "per_task.csv", index=False)
        layer_means(tasks).to_csv(tmp / "layer_means.csv", index=False)
        paper_frame, paper_note = paper if paper is not None else (None, "")
        figures.figure1(
            headline.curves, tmp / "figure1", paper_frame, paper_note, headline.caption, len(headline.tasks)
        )
        for model, rows in tasks.groupby("model", sort=True):
            best = summary[summary["model"] == model].set_index("task")["best_layer"]
            figures.heatmap(rows, best, str(model), tmp / f"heatmap_{figures.slug(str(model))}")
        if data.metrics is not None:
            figures.metric_panels(data.metrics, tmp / "metrics")
        if data.correlation is not None:
            figures.correlation_bars(data.correlation, tmp / "correlation")
        for folder in data.folders:  # each run's own side files: its stress figures, then the runs' cost view
            stress_report.run_figures(folder, tmp)
        cost_quality(data.folders, tmp / COST_STEM)
        board = selector_leaderboard(data.picks)
        if board is not None:
            board.to_csv(tmp / "selectors.csv", index=False)
            (tmp / "selectors.md").write_text(leaderboard_markdown(board))
        names = sorted(p.name for p in tmp.iterdir())
    _usual_mode(output)
    return [output / name for name in names]


def _usual_mode(folder: Path) -> None:
    """The mode a plain new folder gets under the umask: the temporary folder it was built in was private."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)


def arithmetic_notes(data: Runs) -> list[str]:
    """Which arithmetic made each model's metric picks and correlations: the paper's formulas, or the authors' code
    (``metrics --arithmetic``), said once for the report when every model used one, else per model."""
    used: dict[str, set[str]] = {}
    for frame in (data.picks, data.correlation, data.metrics):
        if frame is not None and "arithmetic" in frame.columns:
            for model, arithmetic in zip(frame["model"], frame["arithmetic"].astype(str), strict=True):
                if arithmetic != "-":
                    used.setdefault(str(model), set()).add(arithmetic)
    if not used:
        return []
    described = {model: " and ".join(sorted(a)) for model, a in used.items()}
    meaning = "paper: the paper's formulas; authors: the authors' code's arithmetic, docs/selection.md"
    if len(set(described.values())) == 1:
        return [f"Metrics, metric picks and correlations: {next(iter(described.values()))} arithmetic ({meaning})"]
    per_model = "; ".join(f"{model}: {arithmetic}" for model, arithmetic in sorted(described.items()))
    return [f"Metrics, metric picks and correlations by arithmetic ({meaning}): {per_model}"]


def benchmark_notes(folders: Iterable[RunFolder]) -> list[str]:
    """One note per mteb benchmark the runs took tasks from (``run.json``): its tasks are scored on the benchmark's
    splits and subsets, and the means here are plain means over tasks, not the benchmark's own aggregate."""
    found = sorted({str(e["benchmark"]) for f in folders for e in f.log() if e.get("benchmark")})
    return [
        f"Tasks of mteb's {name}: each task is averaged over the splits and language subsets the run scored (the "
        "benchmark's own); the averages here are plain means over the run's tasks, neither mteb's leaderboard "
        "aggregate of the benchmark nor comparable with the paper's 32-task means."
        for name in found
    ]


def _check_output(output: Path, folders: Iterable[RunFolder]) -> None:
    """Refuse to replace anything that is not an earlier report (a run folder, a results root, a file)."""
    resolved = output.resolve()
    for folder in folders:
        if resolved == folder.path.resolve() or resolved in folder.path.resolve().parents:
            raise UserError(f"--output {str(output)!r} would replace run folder {str(folder)!r}: choose a new folder")
    if output.exists() and not (output.is_dir() and (not any(output.iterdir()) or (output / REPORT_MARKER).exists())):
        raise UserError(f"--output {str(output)!r} exists and is not a report folder: choose a new folder")


def paper_layer_means(
    scores: pd.DataFrame, pythia_scores: str | Path | None = None, which: PaperTasks = "run"
) -> tuple[pd.DataFrame, str]:
    """The authors' per-layer averages (a :func:`layer_means` frame) and a note saying which tasks they average."""
    paper = load_paper_scores(pythia_scores)
    paper_tasks = set(paper["task"])
    # the paper's name for a task: mteb's newer ``.v2`` variants score the same task on deduplicated data
    run_tasks = {t.removesuffix(".v2") for t in scores["task"].astype(str)} & paper_tasks
    if which == "run" and run_tasks:
        paper = paper[paper["task"].isin(run_tasks)]
        note = f"dashed: paper curves averaged over the same {len(run_tasks)} tasks as the runs"
    elif which == "run":
        note = f"dashed: paper curves over all {len(paper_tasks)} paper tasks (the runs share none)"
    else:
        note = f"dashed: paper curves over all {len(paper_tasks)} paper tasks"
    curves = layer_means(task_scores(paper.assign(task_type="unknown")))
    return curves, note
