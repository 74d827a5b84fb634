"""The label-budget curve: mean regret of a labelled layer pick against the number of labels K, per model and task,
beside the same runs' label-free picks (``layer-mteb label-budget``; rerun with more runs to add their models).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from layer_mteb.analysis.labels.budget import DEFAULT_DRAWS, FULL, TaskLayers, iter_task_layers, judge, pick_layers
from layer_mteb.analysis.rules import PAPER_RULE
from layer_mteb.analysis.selection.agreement import AGREEMENT
from layer_mteb.analysis.selection.leaderboard import is_selector, leaderboard
from layer_mteb.analysis.selection.picks import select_layers
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import atomic_write, text_hash
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.evaluation.workers import check_eval_workers
from layer_mteb.metrics import METRIC_COLUMNS, METRICS_TABLE
from layer_mteb.metrics.agreement import AGREEMENT_FILE

logger = logging.getLogger(__name__)

KS: tuple[int | str, ...] = (8, 16, 32, 64, 128, 256, FULL)
CURVE_FILE, BASELINE_FILE, FIGURE_FILE = "label_budget.csv", "label_budget_baselines.csv", "label_budget.png"
#: each task's rows as it finishes, so an interrupted measurement resumes (removed once the curve is written)
PARTS = "label_budget.parts"


def curve_rows(
    folder: str | Path | RunFolder,
    ks: Sequence[int | str] = KS,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    data_dir: str | Path | None = None,
    tasks: Sequence[str] | None = None,
    parts: Path | None = None,
    model: str | None = None,
    workers: int = 1,
) -> pd.DataFrame:
    """One row per (task, K) of the run; a task with fewer examples than K uses all (``labels_used``), so every K
    averages the same tasks. With ``parts``, each task's rows are saved as it finishes and read back by a later call
    with the same run, K values, draws and seed: an interrupted curve resumes."""
    folder = RunFolder(folder)
    scores = folder.one_setting()
    wanted = sorted(set(scores["task"]) if tasks is None else set(tasks))
    saved = _parts_folder(parts, scores, ks, draws, seed) if parts is not None else None
    done = {task: pd.read_csv(saved / f"{task}.csv", dtype={"k": str}) for task in wanted if _has_part(saved, task)}
    if done:
        logger.info("%s: %d of %d tasks read back from %s", folder, len(done), len(wanted), saved)
    todo = [task for task in wanted if task not in done]
    measured: dict[str, list[dict]] = {task: [] for task in todo}
    # a task's rows are saved once all its (subset, split) units are measured
    units_left = scores.groupby("task")[["subset", "split"]].apply(lambda g: len(g.drop_duplicates())).to_dict()
    units = iter_task_layers(folder, tasks=todo, model=model, data_dir=data_dir) if todo else ()
    for unit in units:
        measured[unit.task] += _unit_rows(unit, ks, draws, seed, workers)
        logger.info("%s %s: %d examples, %d encoded", unit.model, unit.name, len(unit.examples), unit.texts_encoded)
        units_left[unit.task] -= 1
        if saved is not None and units_left[unit.task] == 0:
            part = pd.DataFrame(measured[unit.task])
            saved.mkdir(parents=True, exist_ok=True)
            atomic_write(saved / f"{unit.task}.csv", lambda tmp, part=part: part.to_csv(tmp, index=False))
    frames = [done.get(task, pd.DataFrame(measured.get(task, []))) for task in wanted]
    return pd.concat([frame.astype({"k": str}) for frame in frames if not frame.empty], ignore_index=True)


def _unit_rows(unit: TaskLayers, ks: Sequence[int | str], draws: int, seed: int, workers: int) -> list[dict]:
    n = len(unit.examples)
    rows = []
    for k in ks:
        started = time.perf_counter()
        used: int | str = FULL if k == FULL or int(k) >= n else int(k)
        picks = pick_layers(unit, used, draws, seed, workers)
        judged = judge(unit, picks)
        row = {"model": unit.model, "task": unit.name, "k": str(k), "draws": len(picks)}
        row |= {key: judged[key] for key in ("mean_regret", "mean_gain", "regret_std")}
        row |= {"labels_used": n if used == FULL else used, "n_examples": n, "seconds": time.perf_counter() - started}
        rows.append(row)
    return rows


def _parts_folder(parts: Path, scores: pd.DataFrame, ks: Sequence[int | str], draws: int, seed: int) -> Path:
    """One folder per (model, revision, K values, draws, seed): rows measured otherwise are never read back."""
    key = text_hash(str(scores["model"].iloc[0]), str(scores["revision"].iloc[0]), [str(k) for k in ks], draws, seed)
    return parts / f"{str(scores['model'].iloc[0]).replace('/', '__')}-{key}"


def _has_part(folder: Path | None, task: str) -> bool:
    return folder is not None and (folder / f"{task}.csv").is_file()


def baseline_rows(folder: str | Path | RunFolder) -> pd.DataFrame:
    """Mean regret and gain over the run's tasks of the last layer, the paper's rule, agreement (where stored) and
    the best label-free selector (the oracle excluded); without ``metrics.csv`` only the last layer and agreement."""
    folder = RunFolder(folder)
    scores = folder.one_setting()
    model = str(scores["model"].iloc[0])
    try:
        picks = select_layers(scores=scores, metrics=folder.read(METRICS_TABLE), per_task=True)
    except UserError as err:
        logger.warning("%s: no label-free selectors (%s); only the last layer is drawn", folder, err)
        picks = select_layers(scores=scores, metrics=pd.DataFrame(columns=METRIC_COLUMNS), per_task=True)
    if folder.file(AGREEMENT_FILE).is_file():  # agreement with the reference encoder, where its curves are stored
        agreed = select_layers(folder, by=AGREEMENT, write=False)
        picks = pd.concat([picks, agreed[agreed["selector"] == AGREEMENT]], ignore_index=True)
    board = leaderboard(picks[picks["selector"] != "oracle"])
    rows = []
    for name, pick in (
        ("last layer", board["selector"] == "last_layer"),
        ("paper rule", is_selector(board, PAPER_RULE)),
        ("agreement", board["selector"] == AGREEMENT),
        ("best label-free", board.index == board.index.min()),
    ):
        if pick.any():
            best = board[pick].iloc[0]
            row = {"model": model, "baseline": name, "selector": best["selector"], "texts": best["texts"]}
            row |= {"n_tasks": int(best["n_tasks"]), "mean_regret": best["regret"], "mean_gain": best["gain"]}
            rows.append(row)
    return pd.DataFrame(rows)


def labels_needed(curve: pd.DataFrame, baselines: pd.DataFrame, within: float = 0.01) -> pd.DataFrame:
    """Per model: the smallest K whose mean regret over tasks is below each baseline's, and within ``within``
    (1 point) of the best layer; empty where no K tried gets there."""
    means = curve.groupby(["model", "k"], sort=False)["mean_regret"].mean()
    rows = []
    for model, per_k in means.groupby(level="model", sort=False):
        per_k = per_k.droplevel("model")
        targets = {"within 1 point of the best": within}
        targets |= {
            f"beats the {b}": r
            for b, r in baselines.loc[baselines["model"] == model, ["baseline", "mean_regret"]].itertuples(index=False)
        }
        for target, regret in targets.items():
            inclusive = target.startswith("within")  # within 1 point: reached at the bound; a baseline: beaten
            labels = next((k for k, v in per_k.items() if v < regret or (inclusive and v <= regret)), "not reached")
            rows.append({"model": model, "target": target, "target_regret": regret, "labels": labels})
    return pd.DataFrame(rows)


def plot_curve(curve: pd.DataFrame, baselines: pd.DataFrame, path: Path) -> None:
    """Mean regret (points) against K, one panel per model, the baselines as horizontal lines."""
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(curve["model"]))
    figure, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 5), squeeze=False, sharey=True)
    for ax, model in zip(axes[0], models, strict=True):
        means = curve[curve["model"] == model].groupby("k", sort=False)["mean_regret"].mean() * 100
        positions = np.arange(len(means))
        ax.plot(positions, means.to_numpy(), marker="o", color="black", label="labelled pick (K labels)")
        lines = baselines[baselines["model"] == model].iterrows()
        for (_, row), style in zip(lines, ("--", "-.", (0, (5, 1)), ":"), strict=False):
            label = f"{row['baseline']} ({row['selector']}{'' if row['texts'] == '-' else ', ' + str(row['texts'])})"
            ax.axhline(row["mean_regret"] * 100, linestyle=style, color="tab:red", alpha=0.8, label=label)
        ax.axhline(1.0, color="grey", linewidth=0.8, label="1 point")
        ax.set_xticks(positions, [str(k) for k in means.index])
        ax.set_title(model.split("/")[-1])
        ax.set_xlabel("labelled examples K")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18))  # below: lines reach the top
    axes[0][0].set_ylabel("mean regret over tasks (points)")
    figure.tight_layout()
    atomic_write(path, lambda tmp: figure.savefig(tmp, dpi=120, format="png"))
    plt.close(figure)


def write_curve(
    folders: Sequence[str | Path | RunFolder],
    output: str | Path,
    *,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    ks: Sequence[int | str] = KS,
    data_dir: str | Path | None = None,
    baselines_only: bool = False,
    workers: int | None = None,
) -> pd.DataFrame:
    """Measure the runs' models and merge them into ``output``'s files (other models' rows stay); ``baselines_only``
    rereads only the label-free baselines (labelled picks do not depend on the metrics)."""
    output, folders = Path(output), [RunFolder(folder) for folder in folders]  # each read once, by every stage
    if baselines_only and not (output / CURVE_FILE).is_file():
        raise UserError(f"--baselines-only needs a measured curve: {output / CURVE_FILE} does not exist")
    baselines = pd.concat([baseline_rows(folder) for folder in folders], ignore_index=True)
    if baselines_only:
        curve = pd.read_csv(output / CURVE_FILE, dtype={"k": str})
        missing = set(baselines["model"]) - set(curve["model"])
        if missing:
            raise UserError(f"--baselines-only: {output / CURVE_FILE} has no curve of {', '.join(sorted(missing))}")
    else:
        parts = output / PARTS
        workers = check_eval_workers(workers)
        measured = [curve_rows(folder, ks, draws, seed, data_dir, parts=parts, workers=workers) for folder in folders]
        curve = _merged(output / CURVE_FILE, pd.concat(measured))
    baselines = _merged(output / BASELINE_FILE, baselines)
    output.mkdir(parents=True, exist_ok=True)
    atomic_write(output / CURVE_FILE, lambda tmp: curve.to_csv(tmp, index=False, float_format="%.6f"))
    atomic_write(output / BASELINE_FILE, lambda tmp: baselines.to_csv(tmp, index=False, float_format="%.6f"))
    plot_curve(curve, baselines, output / FIGURE_FILE)
    if not baselines_only:  # every measured row is in the curve now: these runs' resume points have done their job
        for folder in folders:
            shutil.rmtree(_parts_folder(output / PARTS, folder.one_setting(), ks, draws, seed), ignore_errors=True)
        if (output / PARTS).is_dir() and not any((output / PARTS).iterdir()):
            (output / PARTS).rmdir()  # another measurement may still be using its own folder in there
    return labels_needed(curve, baselines)


def _merged(path: Path, new: pd.DataFrame) -> pd.DataFrame:
    if not path.is_file():
        return new
    kept = pd.read_csv(path)
    return pd.concat([kept[~kept["model"].isin(set(new["model"]))], new], ignore_index=True)
