"""``results/paper/summary.md``: the tables the README's "Reproducing the paper" section embeds, as markdown."""

from __future__ import annotations

import pandas as pd

from layer_mteb.analysis.report.markdown import integer, markdown_table, text
from layer_mteb.analysis.study.lofo import lofo_means


def _num(value: object) -> str:
    return "—" if pd.isna(value) else f"{float(value):.1f}"


def _signed(value: object) -> str:
    return "—" if pd.isna(value) else f"{float(value):+.1f}"


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
