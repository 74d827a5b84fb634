"""``layer-mteb reproduce``: the paper's results (Table 1, Figure 1, the WikiText metric figures, the correlations)
regenerated from the authors' release beside this project's runs, into ``results/paper``. Offline and
deterministic: the same inputs give the same bytes (figures without creation dates, seeded tests).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from layer_mteb.analysis.rules import fewer_shared_tasks
from layer_mteb.analysis.runs.folders import load_run
from layer_mteb.analysis.runs.importing import import_metrics_table, release_scores, wikitext_splits
from layer_mteb.analysis.runs.release import ReleaseTables, read_release
from layer_mteb.analysis.selection.correlation import correlate
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import atomic_write
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRICS_FILE, METRICS_TABLE
from layer_mteb.metrics.texts import task_of_label
from layer_mteb.paper import paper_figures, prompt_length
from layer_mteb.paper.paper_figures import CHECKPOINT
from layer_mteb.paper.tables import PAPER_TABLE1, summary_markdown, table1, versus_paper, with_last_layer

logger = logging.getLogger(__name__)

FIGURE1_MODELS = ["Pythia/410m", "mamba/370m", "bert/base", "LLM2Vec-mntp-unsup-simcse/8B"]
#: Permutations per p-value: 200 keeps all correlations of ~20 models × 30 tasks × 6 metrics × 3 methods within
#: a few minutes on 2 cores; the smallest p-value it can show is 1/201 ≈ 0.005.
PERMUTATIONS = 200
#: Why the recomputed rows differ from the printed ones (checked against the release; see the README).
REASONS = {
    "LLM2Vec-mntp-unsup-simcse/8B": "the release's layer 32 (the model's output, stored only as layer_32_last) is the "
    "best layer on 3 tasks; with layer 31 as last, as the paper counted, the row is {alt}",
    "Pythia/410m": "not explained by the release: its last layer averages 3.0 lower; 96.6 % = 28/29 suggests 29 tasks, "
    "but no 29 of the 32 give 49.8 / 53.3",
    "mamba/130m": "the release has only layers 0–9 of 24, so its last layer cannot be compared",
}


def scores_and_metrics(run: Path) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """A run folder's scores and, if any, its metrics paired the paper's way; metrics that do not match the scores
    are an error, not a run silently left out of the correlations and the study."""
    folder = RunFolder(run)
    if not folder.file(METRICS_FILE).is_file():
        return folder.scores(), None
    return load_run(folder, folder.scores(), folder.read(METRICS_TABLE), "auto")


#: Writes one table into the output folder under the given file name (numbers to four decimals unless told).
Write = Callable[..., None]


def release_tables(source: Path) -> ReleaseTables:
    """The release's tables, read from a clone of the authors' repository."""
    return read_release(source)


def reproduce(source: Path, runs: list[Path], output: Path, permutations: int = PERMUTATIONS) -> list[Path]:
    """The paper's tables and figures from the release clone ``source`` into ``output``, a line per step."""
    started = time.perf_counter()
    written: list[Path] = []
    progress = Progress(written)
    tables = release_tables(source)
    release = release_scores(tables.scores)
    every_metric = import_metrics_table(tables.metrics)
    release_wikitext = wikitext_with_split(every_metric[every_metric["texts"] == "wikitext"], tables.metrics)
    if release_wikitext.empty:
        logger.warning("the release's tables have no WikiText metrics: no WikiText figures (pass --release)")
    our_scores, all_scores, all_metrics = every_model(release, every_metric, runs)
    output.mkdir(parents=True, exist_ok=True)
    progress.step(f"read the authors' release and {len(runs)} runs")

    def write(name: str, frame: pd.DataFrame, float_format: str | None = "%.4f") -> None:
        path = output / name
        atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False, float_format=float_format))
        written.append(path)

    versus, every = _table1(release, our_scores, write)
    progress.step()
    figure_tasks = _figures(release, release_wikitext, our_scores, output, written)
    progress.step()
    drawn, sets = paper_figures.draw_wikitext(release_wikitext, output)
    extrema = paper_figures.extrema(release_wikitext, all_metrics, sets)
    written += drawn
    write("metric_extrema.csv", extrema, None)
    progress.step()
    write("correlation.csv", correlations(all_scores, all_metrics, permutations))
    progress.step()
    written += prompt_length.reproduce(tables.prompt_length, runs, output)
    progress.step()
    ours = all_metrics[all_metrics["model"].isin(set(our_scores["model"]))]
    markdown = summary_markdown(versus, every, figure_tasks, permutations, arithmetic_line(ours))
    markdown += "\n" + "\n\n".join(paper_figures.sources_markdown(sets, extrema, release_wikitext)) + "\n"
    atomic_write(output / "summary.md", lambda tmp: Path(tmp).write_text(markdown))
    written.append(output / "summary.md")
    progress.step()
    print(f"paper: {len(written)} files in {output}, {time.perf_counter() - started:.0f} s in all", flush=True)
    return written


def every_model(
    release: pd.DataFrame, release_metrics: pd.DataFrame, runs: list[Path]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The runs' scores, then every model's (release and runs) scores and own-text metrics."""
    ours = [scores_and_metrics(run) for run in runs]
    our_scores = pd.concat([scores for scores, _ in ours], ignore_index=True)
    own = release_metrics[release_metrics["texts"].map(task_of_label).notna()]
    metrics = pd.concat([own, *(metrics for _, metrics in ours if metrics is not None)], ignore_index=True)
    return our_scores, pd.concat([release, our_scores], ignore_index=True), metrics


def wikitext_with_split(rows: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The WikiText metric rows with the split they came from (metric rows have no split column)."""
    return rows.assign(split=rows["model"].map(wikitext_splits(table)))


def _table1(release: pd.DataFrame, our_scores: pd.DataFrame, write: Write) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 1 of every final release model and of our runs, and the release rows beside the paper's printed ones."""
    finals = [m for m in release["model"].drop_duplicates() if "@" not in m]
    rows = table1(release, finals).assign(source="release")
    every = pd.concat([rows, table1(our_scores).assign(source="ours")], ignore_index=True)
    write("table1.csv", every)
    alt = table1(with_last_layer(release, "LLM2Vec-mntp-unsup-simcse/8B", 31)).iloc[0]
    reasons = dict(REASONS)
    reasons["LLM2Vec-mntp-unsup-simcse/8B"] = reasons["LLM2Vec-mntp-unsup-simcse/8B"].format(
        alt=f"{alt['best_not_last']:.1f} % / {alt['avg_last']:.1f} / {alt['avg_best']:.1f}"
    )
    versus = versus_paper(rows[rows["model"].isin(PAPER_TABLE1)], reasons)
    write("table1_vs_paper.csv", versus)
    return versus, every


def _figures(
    release: pd.DataFrame, release_wikitext: pd.DataFrame, our_scores: pd.DataFrame, output: Path, written: list[Path]
) -> dict[str, list[str]]:
    """Figure 1 and the training progression; returns the tasks each panel averages."""
    paths, figure_tasks = paper_figures.figure1(release, our_scores, FIGURE1_MODELS, output / "figure1")
    written += paths
    shrunk = fewer_shared_tasks(our_scores, figure_tasks["Figure 1, our panel"], "Figure 1's run panel")
    if shrunk:
        logger.warning(shrunk)
    checkpoints = release[release["model"].str.startswith(CHECKPOINT) | (release["model"] == "Pythia/410m")]
    written += paper_figures.progression(checkpoints, release_wikitext, output / "progression")
    return figure_tasks


class Progress:
    """One line per step of :func:`reproduce` (a minute or more in all): the files it wrote and its seconds."""

    def __init__(self, written: list[Path]) -> None:
        self.written, self.shown, self.since = written, 0, time.perf_counter()

    def step(self, what: str | None = None) -> None:
        names = [p.name for p in self.written[self.shown :]]
        listed = ", ".join(names if len(names) <= 4 else [*names[:3], f"... ({len(names) - 3} more)"])
        now = time.perf_counter()
        print(f"paper: {what or listed} ({now - self.since:.1f} s)", flush=True)
        self.shown, self.since = len(self.written), now


def arithmetic_line(metrics: pd.DataFrame) -> str:
    """Which arithmetic made each number: the release's metrics as the authors' code computed them when it was
    published; each run's (``metrics``: the runs' rows) as its ``metrics.csv`` says (``metrics --arithmetic``)."""
    ours = metrics.dropna(subset=["arithmetic"]) if "arithmetic" in metrics.columns else metrics.iloc[:0]
    used = ours.groupby("model", sort=True)["arithmetic"].agg(lambda a: " and ".join(sorted(set(map(str, a)))))
    runs = "; ".join(f"{model.split('/')[-1]}: {arithmetic}" for model, arithmetic in used.items())
    return (
        "Metric arithmetic: the release's metrics are as the authors' code computed them when it was published "
        "(per-batch centring of pooled vectors, the two-view NT-Xent InfoNCE of most Pythia files, ...); this "
        f"project's runs' as their metrics.csv says ({runs or 'none'}; paper: the paper's formulas, authors: the "
        "authors' final code, docs/selection.md)."
    )


def correlations(scores: pd.DataFrame, metrics: pd.DataFrame, permutations: int) -> pd.DataFrame:
    """:func:`.correlation.correlate` of each model's own-text metrics, per task and for the mean."""
    own = metrics[metrics["texts"].map(task_of_label).notna()]
    frames = []
    for model, part in own.groupby("model", sort=False):
        model_scores = scores[scores["model"] == model]
        if model_scores.empty:
            continue
        try:
            frames.append(correlate(scores=model_scores, metrics=part, n_permutations=permutations, seed=0))
        except UserError as err:
            logger.warning("%s: no correlations (%s)", model, err)
    return pd.concat(frames, ignore_index=True)
