"""The paper's tables. Table 1 from per-layer scores: the library's Table 1 (one tie rule, one last layer: see
:mod:`layer_mteb.analysis.rules`) ×100, with the printed values beside the recomputed ones; and
``results/paper/summary.md``, the tables the README's "Reproducing the paper" section embeds, as markdown."""

from __future__ import annotations

import pandas as pd

from layer_mteb.analysis.report.markdown import integer, markdown_table, text
from layer_mteb.analysis.report.table1 import build_table1, per_task_summary, table1_notes, task_scores
from layer_mteb.analysis.study.lofo import lofo_means


def _num(value: object) -> str:
    return "—" if pd.isna(value) else f"{float(value):.1f}"


def _signed(value: object) -> str:
    return "—" if pd.isna(value) else f"{float(value):+.1f}"


#: Table 1 as printed (workshop version): best ≠ last (%), avg last, avg best.
PAPER_TABLE1 = {
    "LLM2Vec-mntp-unsup-simcse/8B": ("LLM2Vec 8B", 100.0, 64.7, 66.8),
    "Pythia/410m": ("Pythia 410M", 96.6, 49.8, 53.3),
    "mamba/130m": ("Mamba 130M", 100.0, 46.9, 50.9),
}
COLUMNS = ["model", "n_tasks", "last_layer", "best_not_last", "avg_last", "avg_best", "note"]


def table1(scores: pd.DataFrame, models: list[str] | None = None) -> pd.DataFrame:
    """The library's Table 1 (:func:`~layer_mteb.analysis.report.table1.build_table1`, all task types) for ``models``
    (default: every model, in order of appearance), ×100 as the paper prints it; ``note`` names the tasks left out
    for lack of a last-layer score and the layers other tasks miss."""
    names = models or scores["model"].drop_duplicates().tolist()
    part = scores[scores["model"].isin(names)]
    table = build_table1(part).query("task_type == 'all'").set_index("model")
    summary = per_task_summary(task_scores(part))
    rows = []
    for name in names:
        row = table.loc[name]
        notes = table1_notes(summary[summary["model"] == name])
        rows.append(
            {
                "model": name,
                "n_tasks": int(row["n_tasks"]),
                "last_layer": int(row["n_layers"]),
                "best_not_last": row["best_not_last_pct"],
                "avg_last": 100.0 * row["avg_last"],
                "avg_best": 100.0 * row["avg_best"],
                "note": "; ".join(n.removeprefix(f"{name}: ") for n in notes),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def with_last_layer(scores: pd.DataFrame, model: str, last_layer: int) -> pd.DataFrame:
    """``model``'s scores as if ``last_layer`` were its last (deeper layers dropped): how the paper counted a model
    whose output layer it did not score."""
    part = scores[(scores["model"] == model) & (scores["layer"] <= last_layer)]
    return part.assign(n_layers=last_layer)


def versus_paper(release: pd.DataFrame, reasons: dict[str, str]) -> pd.DataFrame:
    """The paper's three rows: printed, recomputed from the release, difference, and why they differ."""
    rows = []
    for model, (label, pct, last, best) in PAPER_TABLE1.items():
        ours = release[release["model"] == model].iloc[0]
        rows.append(
            {
                "paper row": label,
                "release model": model,
                "paper": f"{pct:.1f} % / {last:.1f} / {best:.1f}",
                "release": f"{_num(ours.best_not_last)} % / {_num(ours.avg_last)} / {_num(ours.avg_best)}",
                "difference": f"{_signed(ours.best_not_last - pct)} / {_signed(ours.avg_last - last)} / "
                f"{_signed(ours.avg_best - best)}",
                "why": reasons.get(model, ""),
            }
        )
    return pd.DataFrame(rows)


def summary_markdown(
    versus: pd.DataFrame,
    rows: pd.DataFrame,
    lomo: pd.DataFrame,
    board: pd.DataFrame,
    figure_tasks: dict[str, list[str]],
    permutations: int,
    lofo: pd.DataFrame | None = None,
    excluded: pd.DataFrame | None = None,
) -> str:
    """Table 1 (paper vs release), every model's row, the LOMO and LOFO records and the selector leaderboard."""
    t = [("paper row", "paper row", text), ("paper", "paper", text), ("release", "release", text)]
    t += [("difference", "difference", text), ("why", "why", text)]
    r = [("model", "model", text), ("source", "source", text), ("n_tasks", "tasks", integer)]
    r += [("last_layer", "last", integer), ("best_not_last", "best ≠ last %", _num)]
    r += [("avg_last", "avg last", _num), ("avg_best", "avg best", _num)]
    lo = [("held_out", "held-out model", text), ("chosen_selector", "chosen on the others", text)]
    lo += [("n_tasks", "tasks", integer), ("chosen_score", "score", _num), ("regret", "regret", _num)]
    lo += [("gain", "gain vs last", _signed), ("paper_rule_score", "paper rule score", _num)]
    lo += [("paper_rule_regret", "paper rule regret", _num), ("paper_rule_gain", "paper rule gain", _signed)]
    b = [("selector", "selector", text), ("chosen_score", "score", _num), ("regret", "regret", _num)]
    b += [("gain", "gain vs last", _signed), ("worst_gain", "worst model gain", _signed), ("models", "models", integer)]
    means = lomo[["regret", "paper_rule_regret", "gain", "paper_rule_gain"]].mean()
    worst = lomo["gain"].min()
    parts = [
        "## Table 1: paper vs the authors' release (best ≠ last % / avg last / avg best, ×100)",
        markdown_table(versus, t),
        "## Every model (release rows, then this project's runs)",
        markdown_table(rows.assign(note=rows["note"].str.slice(0, 80)), r),
        "## Leave-one-model-out",
        markdown_table(lomo, lo),
        f"Mean over held-out models: regret {means['regret']:.2f} (paper rule {means['paper_rule_regret']:.2f}, "
        f"ratio {means['regret'] / means['paper_rule_regret']:.2f}), gain {means['gain']:+.2f} "
        f"(paper rule {means['paper_rule_gain']:+.2f}); worst held-out gain vs last {worst:+.2f}.",
        *(lofo_markdown(lofo, excluded) if lofo is not None else []),
        "## Selector leaderboard (all models; regret averaged per model, each model weighs the same)",
        markdown_table(board, b),
        "## Task sets",
        *[f"- {name} ({len(tasks)}): {', '.join(tasks)}" for name, tasks in figure_tasks.items()],
        f"Correlation p-values: {permutations} seeded permutations "
        f"(smallest possible p = {1 / (permutations + 1):.4f}).",
    ]
    return "\n\n".join(parts) + "\n"


def lofo_markdown(lofo: pd.DataFrame, excluded: pd.DataFrame | None = None) -> list[str]:
    """The leave-one-family-out record: per held-out model, per family (its models averaged), on average four ways
    (:func:`~layer_mteb.analysis.study.lofo.lofo_means`) and the folders left out with why."""
    columns = [("held_out_family", "held-out family", text), ("model", "model", text), ("selector", "rule", text)]
    columns += [("n_tasks", "tasks", integer), ("regret", "regret", _num), ("gain", "gain vs last", _signed)]
    columns += [("last_regret", "last-layer regret", _num), ("paper_rule_regret", "paper rule regret", _num)]
    columns += [("paper_rule_tasks", "paper rule tasks", integer)]
    numbers = ["regret", "gain", "last_regret"]
    final = lofo[~lofo["model"].str.contains("@")]
    grouped = final.groupby("held_out_family", sort=False)
    families = grouped[numbers].mean().reset_index()
    families["model"] = grouped["model"].size().map(lambda n: f"{n} model{'s' if n > 1 else ''}").values
    families["selector"] = grouped["selector"].agg(lambda s: " / ".join(dict.fromkeys(s))).values
    families["n_tasks"] = grouped["n_tasks"].sum().values
    m = [("mean_over", "mean over", text), ("n", "n", integer), ("regret", "regret", _num)]
    m += [("gain", "gain vs last", _signed), ("last_regret", "last-layer regret", _num)]
    m += [("worst_gain", "worst model gain", _signed)]
    left_out = [] if excluded is None or excluded.empty else ["Left out of the study:"]
    left_out += [f"- {row.model}: {row.reason}" for row in (excluded if excluded is not None else []).itertuples()]
    return [
        "## Leave-one-family-out (the `select --by auto` policy, fitted on the other families)",
        markdown_table(lofo, columns),
        "Per held-out family (its models averaged, checkpoints left out):",
        markdown_table(families, columns[:-2]),
        "On average (models: checkpoints left out; families: their models averaged; folders: every folder; "
        "folders_weighted: the checkpoints of a model share its weight):",
        markdown_table(lofo_means(lofo), m),
        *(["\n".join(left_out)] if left_out else []),
    ]
