"""Layer selection from K labelled examples: score every layer on K seeded draws of the test split (from the run's
vector store, refilled in one pass when cold), pick the best, and judge the pick by mteb's full-split score.
``regret = best − chosen``, ``gain = chosen − last`` as :mod:`~layer_mteb.analysis.rules` defines them (a run short
of the model's last layer has no gain).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from layer_mteb.analysis.labels.labelled import (
    LABELLED_TYPES,
    LabelledExamples,
    labelled_examples,
    layer_score,
    report_scorer_warnings,
)
from layer_mteb.analysis.rules import default_layer, extremum_layer, last_score, most_frequent_layer
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.evaluation.encoder import resolve_settings
from layer_mteb.evaluation.evaluator_warnings import LayerWarnings
from layer_mteb.evaluation.workers import check_eval_workers, score_layers
from layer_mteb.model.loading import load_scored_model
from layer_mteb.tasks.catalog import check_available, data_dir_from_env, load_task, load_task_data, select_tasks
from layer_mteb.vectors.store import LayerCache, store_folder

DEFAULT_DRAWS = 10
logger = logging.getLogger(__name__)
FULL = "full"  # K meaning every labelled example of the split (one draw)


@dataclass
class TaskLayers:
    """One (task, subset) of a run: mteb's full-split score per layer, the labelled examples and their vectors."""

    model: str
    task: str
    subset: str
    scores: pd.Series  # layer -> main_score, ascending layers
    examples: LabelledExamples
    vectors: np.ndarray
    n_layers: int
    texts_encoded: int = 0

    @property
    def name(self) -> str:
        return self.task if self.subset in ("default", "") else f"{self.task}/{self.subset}"


def iter_task_layers(
    folder: str | Path | RunFolder,
    *,
    tasks: Sequence[str] | None = None,
    model: str | None = None,
    data_dir: str | Path | None = None,
) -> Iterator[TaskLayers]:
    """The (task, subset) units of the run in ``folder`` with their vectors, one at a time; ``model`` says how to
    load the run's model where its recorded name does not (a local folder, say)."""
    folder = RunFolder.of(folder)
    scores = folder.one_setting()
    if tasks is not None:
        unknown = sorted(set(tasks) - set(scores["task"]))
        if unknown:
            raise UserError(f"{folder.scores_file} has no rows for task(s) {', '.join(unknown)}")
        scores = scores[scores["task"].isin(tasks)]
    scored = folder.setting(scores)
    recorded = folder.recorded_tasks()  # custom tasks: the task file that declared each
    scores = labelled_tasks(scores)  # before the model loads: a type K examples cannot score is skipped at once
    name, revision, config = scored.model, scored.revision, scored.config
    data = data_dir_from_env(data_dir or recorded.data_dir)
    specs = {task: select_tasks(recorded.tasks_value(task), data)[1][0] for task in set(scores["task"].astype(str))}
    check_available(list(specs.values()), data)  # a task with no data and no hub: said before the model loads
    loaded = load_scored_model(name, revision, config, model)
    settings = resolve_settings(loaded, config)
    for (task_name, subset, split), rows in scores.groupby(["task", "subset", "split"], sort=True):
        task = load_task(specs[str(task_name)], str(split), data)
        load_task_data(task)
        examples = labelled_examples(task, str(subset), str(split))
        curve = rows.drop_duplicates("layer", keep="last").set_index("layer")["main_score"].sort_index()
        depth = int(curve.index.max())
        store = store_folder(loaded, settings, str(task_name))
        cache = LayerCache(loaded, settings.encode, store, depth=depth)
        encoded = sum(t not in cache.index for t in dict.fromkeys(examples.texts))
        vectors = cache.vectors(examples.texts).cpu().numpy()[curve.index.to_numpy()]
        if encoded:
            cache.save()
        n_layers = int(rows["n_layers"].iloc[0])
        yield TaskLayers(name, str(task_name), str(subset), curve, examples, vectors, n_layers, encoded)


def labelled_tasks(scores: pd.DataFrame) -> pd.DataFrame:
    """The rows of the tasks whose type a labelled pick scores; each other task is skipped with one line, and none
    left is a :class:`UserError` (without ``task_type``, all are kept: the loaded task says)."""
    if "task_type" not in scores.columns:
        return scores
    kinds = scores.groupby("task")["task_type"].first().astype(str)
    skipped = kinds[~kinds.isin(LABELLED_TYPES)]
    for task, kind in skipped.items():
        logger.warning("%s skipped: labelled selection scores %s, not %s", task, ", ".join(LABELLED_TYPES), kind)
    kept = scores[~scores["task"].isin(skipped.index)]
    if kept.empty:
        raise UserError(f"no task of the run is of a type labelled selection scores ({', '.join(LABELLED_TYPES)})")
    return kept


def check_budget(k: int | str) -> None:
    """K is a number of examples (at least 2: one example ranks nothing) or ``"full"``."""
    if k != FULL and (not isinstance(k, int) or isinstance(k, bool) or k < 2):
        raise UserError(f"--labels must be a number of examples of at least 2, or {FULL!r}; got {k!r}")


def draw_rows(n: int, k: int | str, draw: int, seed: int) -> np.ndarray:
    """The example rows of one draw: ``k`` of ``n`` seeded by (seed, draw), every row for ``"full"``."""
    if k == FULL:
        return np.arange(n)
    return np.sort(np.random.default_rng([seed, draw]).choice(n, size=k, replace=False))


def pick_layers(
    unit: TaskLayers,
    k: int | str,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    workers: int = 1,
    seen: dict[int, LayerWarnings] | None = None,
) -> list[int]:
    """The layer picked in each draw: the best score on its examples, ties deeper; a draw that cannot rank the layers
    keeps the last (:func:`~layer_mteb.analysis.rules.default_layer`). ``workers`` > 1 scores in forked processes
    (same picks); ``seen`` receives each layer's scoring warnings."""
    layers = unit.scores.index.to_numpy()
    check_budget(k)
    if k != FULL and k > len(unit.examples):
        raise UserError(f"--labels {k} is more than the {len(unit.examples)} labelled examples of {unit.name}")
    drawn = [draw_rows(len(unit.examples), k, draw, seed) for draw in range(1 if k == FULL else draws)]

    def score(layer: int) -> list[dict]:  # one job per layer: a job's fixed cost outweighs a small draw's scoring
        vectors, task_seed = unit.vectors[layer], unit.examples.task.seed
        return [{"score": layer_score(unit.examples, vectors, rows, seed=task_seed)} for rows in drawn]

    scored_layers = list(score_layers(score, range(len(layers)), workers))
    if seen is not None:
        seen.update({int(layers[s.layer]): s.warnings for s in scored_layers if s.warnings})
    scored = [[row["score"] for row in s.rows] for s in scored_layers]
    picks = []
    for scores in np.array(scored, dtype=np.float64).T:  # [draws, layers]
        finite = pd.Series(scores, index=layers)[np.isfinite(scores)]
        picks.append(extremum_layer(finite, "max") if len(finite) else default_layer(layers, unit.n_layers))
    return picks


def judge(unit: TaskLayers, picks: Sequence[int]) -> dict:
    """The picks scored by mteb's full-split scores: the most frequent pick (ties: deeper) with its score, regret and
    gain, and regret and gain over the draws (mean, standard deviation); no last layer scored, no gain."""
    curve = unit.scores
    best_layer = extremum_layer(curve, "max")
    best, last = float(curve[best_layer]), last_score(curve, unit.n_layers)
    chosen = most_frequent_layer(picks)
    regrets = best - curve.loc[list(picks)].to_numpy()
    gains = curve.loc[list(picks)].to_numpy() - last
    counts = pd.Series(list(picks)).value_counts()
    return {
        "chosen_layer": chosen,
        "chosen_score": float(curve[chosen]),
        "best_layer": best_layer,
        "best_score": best,
        "last_score": last,
        "regret": best - float(curve[chosen]),
        "gain": float(curve[chosen]) - last,
        "mean_regret": float(regrets.mean()),
        "regret_std": float(regrets.std()),
        "mean_gain": float(gains.mean()),
        "picks": " ".join(f"{layer}:{counts[layer]}" for layer in sorted(counts.index)),
    }


def labels_file(k: int | str) -> str:
    """Where ``layer-mteb select --labels K`` writes its picks, one file per K."""
    return f"selection.labels-{k}.csv"


def select_with_labels(
    folder: str | Path | RunFolder,
    k: int | str,
    *,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    tasks: Sequence[str] | None = None,
    model: str | None = None,
    data_dir: str | Path | None = None,
    workers: int | None = None,
) -> pd.DataFrame:
    """One row per (task, subset) of the run: the layer K labelled examples pick, judged on the full split.
    ``seconds`` times the scoring of every layer and draw; ``texts_encoded`` counts texts the vector store lacked;
    ``warnings`` says what the scorers raised (also logged per task)."""
    check_budget(k)
    if draws < 1:
        raise UserError(f"--draws must be at least 1; got {draws}")
    workers = check_eval_workers(workers)
    rows = []
    for unit in iter_task_layers(folder, tasks=tasks, model=model, data_dir=data_dir):
        started = time.perf_counter()
        seen: dict[int, LayerWarnings] = {}
        picks = pick_layers(unit, k, draws, seed, workers, seen)
        row = {"model": unit.model, "task": unit.name, "k": k, "draws": len(picks), "n_examples": len(unit.examples)}
        row |= judge(unit, picks)
        row |= {"seconds": time.perf_counter() - started, "texts_encoded": unit.texts_encoded}
        row["warnings"] = report_scorer_warnings(unit.name, unit.examples.task.metadata.type, seen)
        rows.append(row)
    return pd.DataFrame(rows)
