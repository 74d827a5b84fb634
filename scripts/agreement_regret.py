"""How well the agreement and intrinsic-dimension picks do against the committed per-layer scores: per model and
task, the layer each variant picks from ``results/<model>/agreement.csv`` and its regret (best layer's score −
picked layer's score, main score × 100, subsets averaged within a task), beside the last layer's.

    python scripts/agreement_regret.py [results/minilm-l6 ...] [--out results/paper/agreement_regret.csv]
        [--figure results/paper/agreement]

The figure (``agreement.png`` / ``.pdf``) shows each model's mean regret of the last layer, ``select --by auto`` as
shipped (the policy without agreement curves), the agreement variants, the ID rules and the layer picked from
K = 64 / 128 labelled examples (``results/paper/label_budget.csv``).

Regret, the best layer, ties (the deeper layer) and the last layer are the project's own rules
(:mod:`layer_mteb.analysis.rules`, :func:`layer_mteb.analysis.selection.curves.score_curves`). Variants:
``<mknn|cka>:<outlier>@<reference>`` (argmax of agreement), ``id_after_peak``, ``id_min``, ``id_valley_after_peak``
(:mod:`layer_mteb.metrics.agreement.intrinsic_dimension`) and ``last_layer``. A task with fewer unique texts than
``n`` is read at all of its texts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from layer_mteb.analysis.report.figures import save, style
from layer_mteb.analysis.rules import extremum_layer, last_score
from layer_mteb.analysis.selection.curves import score_curves
from layer_mteb.analysis.selection.picks import select_layers
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRIC_COLUMNS
from layer_mteb.metrics.agreement import AGREEMENT_TABLE, ID_METRIC
from layer_mteb.metrics.agreement.intrinsic_dimension import ID_SELECTORS, id_pick
from layer_mteb.metrics.agreement.reference import default_reference
from layer_mteb.model.names import PACKAGED_MODELS

RUNS = ("results/minilm-l6", "results/mpnet-base", "results/smollm2-135m", "results/gemma3-270m")
SIZES = (32, 64, 128, 256, 512, 1024)
ORDER = ("minilm-l6", "mpnet-base", "smollm2-135m", "gemma3-270m")
PACKAGED_HUB_IDS = {name: packaged.hub_id for name, packaged in PACKAGED_MODELS.items()}


def short(reference: str) -> str:
    return {"sentence-transformers/all-mpnet-base-v2": "mpnet", "sentence-transformers/all-MiniLM-L6-v2": "minilm"}.get(
        reference, reference
    )


def _at_n(rows: pd.DataFrame, n: int) -> pd.DataFrame:
    """Rows of sample size ``n``, or of all of a task's texts where it has fewer than ``n`` (a size not in SIZES)."""
    exact = rows[rows["n"] == n]
    whole = rows[~rows["n"].isin(SIZES) & (rows["n"] < n)]
    return pd.concat([exact, whole[~whole["task"].isin(exact["task"])]])


def picks(agreement: pd.DataFrame, n: int = 256, k: int = 10, seed: int = 0) -> pd.DataFrame:
    """(task, variant, chosen layer, reference short name, sample key) for every curve at (n, k, seed)."""
    rows = _at_n(agreement[agreement["seed"] == seed], n)
    out = []
    for (task, reference, metric, outlier, kk), part in rows.groupby(["task", "reference", "metric", "outlier", "k"]):
        curve = part.set_index("layer")["value"].sort_index()
        if kk != k and (kk != 0 or k != 10):  # curves without a k are read once, with k = 10
            continue
        if metric == ID_METRIC:
            for rule in ID_SELECTORS:
                out.append({"task": task, "variant": rule, "layer": id_pick(curve.to_numpy(), rule)})
        else:
            variant, layer = f"{metric}:{outlier}@{short(reference)}", extremum_layer(curve, "max")
            out.append({"task": task, "variant": variant, "layer": layer, "margin": margin(curve, layer)})
    return pd.DataFrame(out, columns=["task", "variant", "layer", "margin"]).assign(n=n, k=k, seed=seed)


def margin(curve: pd.Series, layer: int) -> float:
    """How clearly the curve peaks: its value at ``layer`` less its best value more than a quarter of the depth
    away (small: a second mode about as high, far from the pick)."""
    far = curve[(curve.index - layer).to_series(index=curve.index).abs() > len(curve) / 4]
    return float(curve[layer] - far.max()) if not far.empty else float("nan")


def regrets(run: str | Path, chosen: pd.DataFrame) -> pd.DataFrame:
    """Each pick's score, regret and gain over the last layer (×100), with the best and last layers."""
    scores = RunFolder(run).scores()
    n_layers = int(scores["n_layers"].iloc[0])
    types = scores.drop_duplicates("task").set_index("task")["task_type"]
    curves = score_curves(scores)
    out = []
    for row in chosen.itertuples(index=False):
        curve = curves[row.task]
        best = extremum_layer(curve, "max")
        score, last = float(curve[row.layer]), last_score(curve, n_layers)
        out.append(
            {
                **row._asdict(),
                "model": Path(run).name,
                "task_type": types[row.task],
                "best_layer": best,
                "last_layer": n_layers,
                "regret": 100 * (float(curve[best]) - score),
                "gain": 100 * (score - last),
                "last_regret": 100 * (float(curve[best]) - last),
            }
        )
    return pd.DataFrame(out)


def study(runs: list[str]) -> pd.DataFrame:
    """Every variant's regret at the default sample (n = 256, k = 10, seed 0) and along each sensitivity axis."""
    frames = []
    for run in runs:
        agreement = RunFolder(run).read(AGREEMENT_TABLE)
        settings = [(256, 10, 0)] + [(n, 10, 0) for n in SIZES if n != 256] + [(256, k, 0) for k in (5, 20, 50)]
        settings += [(256, 10, seed) for seed in sorted(set(agreement["seed"])) if seed != 0]
        for n, k, seed in settings:
            measured = agreement[(agreement["n"] == n) & (agreement["seed"] == seed)]
            chosen = picks(agreement, n, k, seed) if not measured.empty else pd.DataFrame()
            if not chosen.empty:
                frames.append(regrets(run, chosen))
    return pd.concat(frames, ignore_index=True)


TYPES = ("Classification", "Clustering", "PairClassification", "STS")


def markdown(frame: pd.DataFrame, digits: int = 2) -> str:
    """A plain Markdown table of ``frame`` (index as the first column)."""
    head = [str(frame.index.name or ""), *map(str, frame.columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for index, row in frame.astype(object).iterrows():
        cells = ["-" if pd.isna(v) else f"{v:.{digits}f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join([str(index), *cells]) + " |")
    return "\n".join(lines)


def default_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["n"] == 256) & (frame["k"] == 10) & (frame["seed"] == 0)]


def overview_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean regret of each variant per model and over the four, the reference named as the model's default
    (all-mpnet-base-v2; all-MiniLM-L6-v2 for mpnet itself) or the other one."""
    rows = default_rows(frame).copy()
    own = {model: short(PACKAGED_HUB_IDS[default_reference(model)]) for model in rows["model"].unique()}
    rows["variant"] = [
        v.replace(f"@{own[m]}", "@default")
        if "@" in v and v.endswith(own[m])
        else v.split("@")[0] + "@other"
        if "@" in v
        else v
        for v, m in zip(rows["variant"], rows["model"], strict=True)
    ]
    table = rows.pivot_table(index="variant", columns="model", values="regret", aggfunc="mean")
    last = rows.drop_duplicates(["model", "task"]).groupby("model")["last_regret"].mean()
    table.loc["last_layer"] = last
    table = table[[m for m in ORDER if m in table.columns]]
    table["mean of 4"] = table.mean(axis=1, skipna=False)
    table.index.name = "variant (mean regret, 19 tasks)"
    return table


def overview(frame: pd.DataFrame) -> str:
    """:func:`overview_table` as Markdown, best mean first."""
    return markdown(overview_table(frame).sort_values("mean of 4", na_position="last"))


def per_model_tables(frame: pd.DataFrame) -> str:
    """Per model: mean regret of every variant over all tasks and per task type, the last layer's beside."""
    parts = []
    for model, rows in default_rows(frame).groupby("model", sort=False):
        table = rows.pivot_table(index="variant", columns="task_type", values="regret", aggfunc="mean")
        table.insert(0, "all", rows.groupby("variant")["regret"].mean())
        last = rows.drop_duplicates("task")
        table.loc["last_layer"] = [last["last_regret"].mean()] + [
            last.loc[last["task_type"] == t, "last_regret"].mean() for t in table.columns[1:]
        ]
        table["beats_last"] = rows.groupby("variant")["gain"].apply(lambda g: f"{(g > 0).sum()}/{(g < 0).sum()}")
        table.loc["last_layer", "beats_last"] = "-"
        table.index.name = f"{model} ({rows['task'].nunique()} tasks)"
        parts.append(markdown(table.sort_values("all")))
    return "\n\n".join(parts)


def sensitivity(frame: pd.DataFrame, variants: list[str]) -> str:
    """Mean regret over tasks per model along n (k = 10), k (mutual k-NN, n = 256) and seed (n = 256)."""
    rows = frame[frame["variant"].isin(variants)]
    along_n = _complete(rows[(rows["k"] == 10) & (rows["seed"] == 0)], "n")
    along_k = _complete(rows[(rows["n"] == 256) & (rows["seed"] == 0) & rows["variant"].str.startswith("mknn")], "k")
    seeds = _complete(rows[(rows["n"] == 256) & (rows["k"] == 10)], "seed")
    out = []
    for title, part, axis in (
        ("Mean regret vs n (k = 10, seed 0)", along_n, "n"),
        ("Mean regret vs k (mutual k-NN, n = 256, seed 0)", along_k, "k"),
        ("Mean regret per seed (n = 256, k = 10)", seeds, "seed"),
    ):
        if part.empty:
            continue
        table = part.pivot_table(index=["model", "variant"], columns=axis, values="regret", aggfunc="mean")
        if axis == "seed":
            table["sd"] = table.std(axis=1)
            same = part.pivot_table(index=["model", "variant", "task"], columns="seed", values="layer")
            table["same pick, all seeds"] = (same.nunique(axis=1) == 1).groupby(level=[0, 1]).mean()
        table.insert(0, "tasks", part.groupby(["model", "variant"])["task"].nunique())
        out.append(f"{title}:\n\n" + markdown(_flat(table)))
    return "\n\n".join(out)


def _complete(rows: pd.DataFrame, axis: str) -> pd.DataFrame:
    """Per model, only the tasks measured at every value of ``axis`` that model has (so means compare alike);
    a model with a single value on the axis is left out."""
    kept = []
    for _, part in rows.groupby("model", sort=False):
        values = part[axis].nunique()
        if values < 2:
            continue
        full = part.groupby("task")[axis].nunique()
        kept.append(part[part["task"].isin(full[full == values].index)])
    return pd.concat(kept) if kept else rows.iloc[:0]


def _flat(table: pd.DataFrame) -> pd.DataFrame:
    table = table.copy()
    table.index = [" ".join(map(str, i)) for i in table.index]
    table.columns = [str(c) for c in table.columns]
    return table


def failures(frame: pd.DataFrame, agreement: dict[str, pd.DataFrame], variant: str, floor: float = 2.0) -> str:
    """Tasks where ``variant`` loses more than ``floor`` points: its pick, the best layer and the curve."""
    rows = default_rows(frame)
    rows = rows[(rows["variant"] == variant) & (rows["regret"] > floor)]
    metric, rest = variant.split(":")
    outlier, ref = rest.split("@")
    lines = [f"| model | task | picked | best | last | regret | margin | {variant} by layer |", "|" + "---|" * 8]
    for row in rows.sort_values(["model", "regret"], ascending=[True, False]).itertuples():
        curve = agreement[row.model]
        curve = curve[
            (curve["task"] == row.task)
            & (curve["metric"] == metric)
            & (curve["outlier"] == outlier)
            & (curve["reference"].map(short) == ref)
            & (curve["seed"] == 0)
            & (curve["k"].isin([10, 0]))
        ]
        curve = _at_n(curve, 256).sort_values("layer")["value"]
        values = " ".join(f"{v:.2f}" for v in curve)
        lines.append(
            f"| {row.model} | {row.task} | {row.layer} | {row.best_layer} | {row.last_layer} | {row.regret:.1f} | "
            f"{row.margin:.3f} | {values} |"
        )
    every = default_rows(frame)
    every = every[every["variant"] == variant]
    failed = every["regret"] > floor
    lines.append(
        f"\nmedian margin of {variant}'s curve: {every.loc[failed, 'margin'].median():.3f} where it loses more than "
        f"{floor:g} points ({failed.sum()} tasks), {every.loc[~failed, 'margin'].median():.3f} elsewhere"
    )
    return "\n".join(lines)


FIGURE_VARIANTS = {
    "last_layer": "last layer",
    "auto": "auto as shipped",
    "mknn:none@default": "mutual k-NN",
    "mknn:clamp@default": "mutual k-NN, clamped",
    "cka:none@default": "CKA",
    "cka:clamp@default": "CKA, clamped",
    "id_min": "ID min",
    "id_after_peak": "ID after peak",
    "id_valley_after_peak": "ID valley after peak",
    "labels:64": "64 labels",
    "labels:128": "128 labels",
}


def shipped_auto(run: str) -> float:
    """Mean regret (x100) of ``select --by auto``'s shipped policy: the run's scores alone, no agreement curves."""
    picked = select_layers(
        scores=RunFolder(run).scores(), metrics=pd.DataFrame(columns=METRIC_COLUMNS), by="auto", per_task=True
    )
    return 100 * float(picked.loc[picked["selector"] == "auto", "regret"].mean())


def labelled(path: str | Path, ks: tuple[int, ...] = (64, 128)) -> pd.DataFrame:
    """Mean regret (x100) over tasks of the layer picked from K labelled examples, per model (run name)."""
    budget = pd.read_csv(path)
    names = {hub: name for name, hub in PACKAGED_HUB_IDS.items()}
    budget = budget[budget["k"].isin([str(k) for k in ks])]
    means = budget.groupby(["model", "k"], sort=False)["mean_regret"].mean().reset_index()
    return pd.DataFrame(
        {"model": means["model"].map(names), "variant": "labels:" + means["k"], "regret": 100 * means["mean_regret"]}
    )


def figure_rows(frame: pd.DataFrame, runs: list[str], budget: str | Path) -> pd.DataFrame:
    """(model, variant, regret): the overview's rows of :data:`FIGURE_VARIANTS`, shipped auto and the label budget."""
    table = overview_table(frame)
    rows = table.drop(columns="mean of 4").reset_index(names="variant").melt("variant", var_name="model")
    rows = rows.rename(columns={"value": "regret"})
    auto = pd.DataFrame({"model": [Path(r).name for r in runs], "variant": "auto"})
    auto["regret"] = [shipped_auto(r) for r in runs]
    rows = pd.concat([rows, auto, labelled(budget)], ignore_index=True)
    rows = rows[rows["variant"].isin(FIGURE_VARIANTS) & rows["model"].isin(auto["model"])].dropna()
    rows["variant"] = pd.Categorical(rows["variant"].map(FIGURE_VARIANTS), list(FIGURE_VARIANTS.values()))
    rows["model"] = pd.Categorical(rows["model"], [m for m in ORDER if m in set(rows["model"])])
    return rows.sort_values(["variant", "model"])


def figure(rows: pd.DataFrame, stem: Path) -> list[Path]:
    """Mean regret per model (bars) for every variant (rows), the label budget last."""
    with style():
        fig = Figure(figsize=(7.5, 6.5))
        ax = fig.subplots()
        sns.barplot(data=rows, x="regret", y="variant", hue="model", ax=ax, orient="h", palette="colorblind")
        ax.set_xlabel("mean regret over 19 tasks (best layer's score - picked layer's, x100)")
        ax.set_ylabel("")
        ax.set_title(
            "Picking a layer: agreement with all-mpnet-base-v2 (MiniLM for mpnet) against other rules", fontsize=11
        )
        ax.legend(title="model", loc="upper right")
        return save(fig, stem)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", default=list(RUNS))
    parser.add_argument("--out", default="results/paper/agreement_regret.csv")
    parser.add_argument("--figure", default="results/paper/agreement", help="stem of the .png and .pdf")
    parser.add_argument("--label-budget", default="results/paper/label_budget.csv")
    parser.add_argument(
        "--variants", nargs="+", default=["mknn:none@mpnet", "mknn:clamp@mpnet", "cka:none@mpnet", "cka:clamp@mpnet"]
    )
    args = parser.parse_args()
    frame = study(args.runs)
    frame.to_csv(args.out, index=False, float_format="%.4f")
    figure(figure_rows(frame, args.runs, args.label_budget), Path(args.figure))
    print("# Agreement and intrinsic-dimension picks: regret on the committed runs\n")
    print(
        "Written by `scripts/agreement_regret.py` (see docs/agreement.md). Regret = best layer's score - picked "
        "layer's (main score x 100), mean over tasks; `beats_last` = tasks where the pick scores above / below the "
        "last layer; the failure tables list every task a variant loses more than 2 points on, with its curve by "
        "layer (0 = embeddings) and its margin (the pick's value less the best value a quarter of the depth away).\n"
    )
    print(overview(frame))
    print()
    print(per_model_tables(frame))
    print()
    print(sensitivity(frame, args.variants))
    agreement = {Path(run).name: RunFolder(run).read(AGREEMENT_TABLE) for run in args.runs}
    for variant in args.variants:
        print()
        print(failures(frame, agreement, variant))


if __name__ == "__main__":
    main()
