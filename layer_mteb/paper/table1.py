"""The paper's Table 1 from per-layer scores: share of tasks whose best layer is not the last, average score of the
last layer and of each task's best layer (×100), with the printed values beside the recomputed ones."""

from __future__ import annotations

import pandas as pd

from layer_mteb.analysis.importing import describe_missing, missing_layers

#: Table 1 as printed (workshop version): best ≠ last (%), avg last, avg best.
PAPER_TABLE1 = {
    "LLM2Vec-mntp-unsup-simcse/8B": ("LLM2Vec 8B", 100.0, 64.7, 66.8),
    "Pythia/410m": ("Pythia 410M", 96.6, 49.8, 53.3),
    "mamba/130m": ("Mamba 130M", 100.0, 46.9, 50.9),
}
COLUMNS = ["model", "n_tasks", "last_layer", "best_not_last", "avg_last", "avg_best", "note"]


def table1_row(scores: pd.DataFrame, model: str, last_layer: int | None = None) -> dict:
    """One model's row. "Last" is the model's final layer (``n_layers``) when scored, else the deepest scored layer
    (said in ``note``); only tasks scored at that layer count, and each task's best is over the layers it has."""
    part = scores[scores["model"] == model]
    table = part.pivot_table(index="layer", columns="task", values="main_score", aggfunc="mean")
    n_layers = int(part["n_layers"].iloc[0])
    notes = []
    if last_layer is None:
        last_layer = n_layers if n_layers in table.index else int(table.index.max())
    if last_layer != n_layers:
        notes.append(f"layer {last_layer} taken as last (the model has {n_layers})")
    table = table.loc[:, table.loc[last_layer].notna()]
    if table.shape[1] < part["task"].nunique():
        notes.append(f"{part['task'].nunique() - table.shape[1]} task(s) lack layer {last_layer}")
    notes += describe_missing(missing_layers(part[part["task"].isin(table.columns)]))
    last, best = table.loc[last_layer], table.max()
    return {
        "model": model,
        "n_tasks": table.shape[1],
        "last_layer": last_layer,
        "best_not_last": 100.0 * float((best > last).mean()),
        "avg_last": 100.0 * float(last.mean()),
        "avg_best": 100.0 * float(best.mean()),
        "note": "; ".join(notes),
    }


def table1(scores: pd.DataFrame, models: list[str] | None = None) -> pd.DataFrame:
    """Rows for ``models`` (default: every model in ``scores``, in order of appearance)."""
    names = models or scores["model"].drop_duplicates().tolist()
    return pd.DataFrame([table1_row(scores, name) for name in names], columns=COLUMNS)


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
                "release": f"{ours.best_not_last:.1f} % / {ours.avg_last:.1f} / {ours.avg_best:.1f}",
                "difference": f"{ours.best_not_last - pct:+.1f} / {ours.avg_last - last:+.1f} / "
                f"{ours.avg_best - best:+.1f}",
                "why": reasons.get(model, ""),
            }
        )
    return pd.DataFrame(rows)
