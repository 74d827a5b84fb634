"""The paper's selector study, written beside ``layer-mteb reproduce``'s files: every selector per model, leave one
model out (:mod:`.engine`), leave one family out (:mod:`.lofo`, with the rule per kind fixed too, to show what the
depth per task type adds), their sections of ``summary.md``, and with ``--policy`` the policy ``select --by auto``
ships, fitted on every model.

Usage (``make reproduce`` runs it after ``layer-mteb reproduce``, on the same release and runs):
    python -m studies.selector_study --release ../shared/reference/release --run results/minilm-l6 ... \\
        --output results/paper --policy layer_mteb/analysis/selection/auto_selector.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from layer_mteb.analysis.report.markdown import integer, markdown_table, text
from layer_mteb.analysis.runs.importing import import_metrics_table, release_scores
from layer_mteb.analysis.runs.release_layout import results_folder
from layer_mteb.common.files import atomic_write
from layer_mteb.paper.regenerate import every_model, release_tables
from layer_mteb.paper.tables import TASK_SETS, number, signed
from studies import engine, lofo

#: The files this study writes into the paper's folder.
TABLES = ("selectors", "selector_leaderboard", "lomo", "lofo", "lofo_means", "lofo_excluded", "lofo_candidates")
#: The first heading of this study's sections of ``summary.md``.
FIRST_HEADING = "## Leave-one-model-out"


def selector_study(scores: pd.DataFrame, metrics: pd.DataFrame, policy: Path | None = None) -> dict[str, object]:
    """Every table of :data:`TABLES` by name, ``markdown`` (the sections of ``summary.md``) and, with ``policy``,
    the policy trained on every model (``policy``)."""
    models = engine.study_models(scores[~scores["model"].str.contains("@")], metrics)
    board = engine.across_models(models)
    lomo = engine.leave_one_model_out(models)
    population, excluded = engine.score_models(scores, metrics)
    record = lofo.leave_one_family_out(population)
    fixed = lofo.leave_one_family_out(population, variant="fixed")  # what the per-type depths add
    means = [lofo.lofo_means(record).assign(policy="chosen"), lofo.lofo_means(fixed).assign(policy="fixed")]
    found: dict[str, object] = {
        "selectors": engine.model_leaderboard(models),
        "selector_leaderboard": board,
        "lomo": lomo,
        "lofo": record,
        "lofo_means": pd.concat(means, ignore_index=True),
        "lofo_excluded": excluded,
        "lofo_candidates": lofo.candidate_table(population),
        "markdown": "\n\n".join([*lomo_markdown(lomo), *lofo_markdown(record, excluded), *board_markdown(board)]),
    }
    if policy is not None:
        found["policy"] = lofo.train_policy(population, record)
    return found


def lomo_markdown(lomo: pd.DataFrame) -> list[str]:
    """The leave-one-model-out record and its means beside the paper's rule."""
    lo = [("held_out", "held-out model", text), ("chosen_selector", "chosen on the others", text)]
    lo += [("n_tasks", "tasks", integer), ("chosen_score", "score", number), ("regret", "regret", number)]
    lo += [("gain", "gain vs last", signed), ("paper_rule_score", "paper rule score", number)]
    lo += [("paper_rule_regret", "paper rule regret", number), ("paper_rule_gain", "paper rule gain", signed)]
    means = lomo[["regret", "paper_rule_regret", "gain", "paper_rule_gain"]].mean()
    return [
        FIRST_HEADING,
        markdown_table(lomo, lo),
        f"Mean over held-out models: regret {means['regret']:.2f} (paper rule {means['paper_rule_regret']:.2f}, "
        f"ratio {means['regret'] / means['paper_rule_regret']:.2f}), gain {means['gain']:+.2f} "
        f"(paper rule {means['paper_rule_gain']:+.2f}); worst held-out gain vs last {lomo['gain'].min():+.2f}.",
    ]


def lofo_markdown(record: pd.DataFrame, excluded: pd.DataFrame | None = None) -> list[str]:
    """The leave-one-family-out record: per held-out model, per family (its models averaged), on average four ways
    (:func:`.lofo.lofo_means`) and the folders left out with why."""
    columns = [("held_out_family", "held-out family", text), ("model", "model", text), ("selector", "rule", text)]
    columns += [("n_tasks", "tasks", integer), ("regret", "regret", number), ("gain", "gain vs last", signed)]
    columns += [("last_regret", "last-layer regret", number), ("paper_rule_regret", "paper rule regret", number)]
    columns += [("paper_rule_tasks", "paper rule tasks", integer)]
    numbers = ["regret", "gain", "last_regret"]
    final = record[~record["model"].str.contains("@")]
    grouped = final.groupby("held_out_family", sort=False)
    families = grouped[numbers].mean().reset_index()
    families["model"] = grouped["model"].size().map(lambda n: f"{n} model{'s' if n > 1 else ''}").values
    families["selector"] = grouped["selector"].agg(lambda s: " / ".join(dict.fromkeys(s))).values
    families["n_tasks"] = grouped["n_tasks"].sum().values
    m = [("mean_over", "mean over", text), ("n", "n", integer), ("regret", "regret", number)]
    m += [("gain", "gain vs last", signed), ("last_regret", "last-layer regret", number)]
    m += [("worst_gain", "worst model gain", signed)]
    left_out = [] if excluded is None or excluded.empty else ["Left out of the study:"]
    left_out += [f"- {row.model}: {row.reason}" for row in (excluded if excluded is not None else []).itertuples()]
    return [
        "## Leave-one-family-out (the `select --by auto` policy, fitted on the other families)",
        markdown_table(record, columns),
        "Per held-out family (its models averaged, checkpoints left out):",
        markdown_table(families, columns[:-2]),
        "On average (models: checkpoints left out; families: their models averaged; folders: every folder; "
        "folders_weighted: the checkpoints of a model share its weight):",
        markdown_table(lofo.lofo_means(record), m),
        *(["\n".join(left_out)] if left_out else []),
    ]


def board_markdown(board: pd.DataFrame) -> list[str]:
    b = [("selector", "selector", text), ("chosen_score", "score", number), ("regret", "regret", number)]
    b += [("gain", "gain vs last", signed), ("worst_gain", "worst model gain", signed), ("models", "models", integer)]
    return [
        "## Selector leaderboard (all models; regret averaged per model, each model weighs the same)",
        markdown_table(board, b),
    ]


def with_study(summary: str, sections: str) -> str:
    """``summary.md`` with this study's sections just before its task sets (replacing those of an earlier run)."""
    before, found, after = summary.partition(f"\n\n{TASK_SETS}")
    if not found:
        raise ValueError(f"no {TASK_SETS!r} heading in summary.md: run `layer-mteb reproduce` first")
    before = before.partition(f"\n\n{FIRST_HEADING}")[0]
    return f"{before}\n\n{sections}{found}{after}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", required=True, help="a clone of the authors' repository, as for reproduce")
    parser.add_argument("--run", action="append", default=[], help="one of this project's run folders (repeatable)")
    parser.add_argument("--output", default="results/paper", help="the folder `layer-mteb reproduce` wrote")
    parser.add_argument("--policy", default=None, help="also write the policy fitted on every model here")
    args = parser.parse_args(argv)
    output, policy = Path(args.output), Path(args.policy) if args.policy else None
    tables = release_tables(results_folder(args.release))
    runs = [Path(run) for run in args.run]
    _, scores, metrics = every_model(release_scores(tables.scores), import_metrics_table(tables.metrics), runs)
    found = selector_study(scores, metrics, policy)
    for name in TABLES:
        frame = found[name]
        atomic_write(output / f"{name}.csv", lambda tmp, f=frame: f.to_csv(tmp, index=False, float_format="%.4f"))
    summary = output / "summary.md"
    text_with = with_study(summary.read_text(), str(found["markdown"]))
    atomic_write(summary, lambda tmp: Path(tmp).write_text(text_with))
    if policy is not None:
        lofo.write_policy(found["policy"], policy)
    print(f"selector study: {len(TABLES)} tables and summary.md in {output}" + (f", {policy}" if policy else ""))


if __name__ == "__main__":
    main()
