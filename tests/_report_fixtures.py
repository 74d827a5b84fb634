"""Hand-made run folders for the report tests, small enough to check Table 1 by hand.

``toy/alpha`` (3 blocks, layers 0-3), scores per layer:

    T1 STS             .50 .60 .70 .65   best 2 (.70) > last .65            -> best != last
    T2 STS             .40 .80 .60 .80   layers 1 and 3 tie at .80          -> best = last (3)
    T3 Classification  subsets a/b: (.30,.50) (.50,.70) (.60,.60) (.20,.40)
                       -> means .40 .60 .60 .30; 1 and 2 tie, deeper wins  -> best 2 (.60), last .30
    T4 Classification  .55  —  .50 .45   no layer 1                         -> best 0 (.55), last .45
    T5 Clustering      .20 .30 .25  —    no last layer                      -> left out of Table 1

    Table 1 over T1-T4: best != last 3/4 = 75 %; avg last (.65+.80+.30+.45)/4 = .55;
    avg best (.70+.80+.60+.55)/4 = .6625; layers on all four tasks: 0, 2, 3 with means .4625, .60, .55
    -> best single layer 2 (.60) (layer 1 averages .667 over three tasks and must not win).

``toy/one-layer`` (1 block, layers 0-1): T1 .30 .30 (tie -> last), T2 .50 .40.
    best != last 50 %; avg last .35; avg best .40; best single layer 0 (.40).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

ALPHA = {
    ("T1", "STS", "default"): [0.50, 0.60, 0.70, 0.65],
    ("T2", "STS", "default"): [0.40, 0.80, 0.60, 0.80],
    ("T3", "Classification", "a"): [0.30, 0.50, 0.60, 0.20],
    ("T3", "Classification", "b"): [0.50, 0.70, 0.60, 0.40],
    ("T4", "Classification", "default"): [0.55, None, 0.50, 0.45],
    ("T5", "Clustering", "default"): [0.20, 0.30, 0.25, None],
}
ONE_LAYER = {
    ("T1", "STS", "default"): [0.30, 0.30],
    ("T2", "STS", "default"): [0.50, 0.40],
}


def scores_frame(model: str, table: dict, *, readout: str = "final_norm") -> pd.DataFrame:
    """A scores.csv frame in the schema of :mod:`layer_mteb.common.scores` (``None`` = layer not scored)."""
    rows = []
    for (task, task_type, subset), values in table.items():
        n_layers = len(values) - 1
        for layer, value in enumerate(values):
            if value is None:
                continue
            rows.append(
                {
                    "model": model,
                    "revision": "r1",
                    "layer": layer,
                    "n_layers": n_layers,
                    "relative_depth": layer / n_layers,
                    "task": task,
                    "task_type": task_type,
                    "split": "test",
                    "subset": subset,
                    "main_score": value,
                    "readout": readout,
                    "pooling": "mean",
                    "max_length": 512,
                    "dtype": "float32",
                    "data": "local-partial" if task == "T4" else "local",
                }
            )
    return pd.DataFrame(rows)


def alpha_scores() -> pd.DataFrame:
    return scores_frame("toy/alpha", ALPHA)


def one_layer_scores() -> pd.DataFrame:
    return scores_frame("toy/one-layer", ONE_LAYER)


def alpha_selection() -> pd.DataFrame:
    """prompt_entropy: mean-scope layer 2 (avg .60); per task 2, 1, 3, 0 (+ T5) -> (.70+.80+.30+.55)/4 = .5875."""
    rows = [
        ("prompt_entropy", "mean", 2, 0.60, 0.55, 0.60),
        ("dataset_entropy", "mean", 0, 0.4625, 0.55, 0.60),
        ("random", "mean", 3, 0.55, 0.55, 0.60),
        ("prompt_entropy", "T1", 2, 0.70, 0.65, 0.70),
        ("prompt_entropy", "T2", 1, 0.80, 0.80, 0.80),
        ("prompt_entropy", "T3", 3, 0.30, 0.30, 0.60),
        ("prompt_entropy", "T4", 0, 0.55, 0.45, 0.55),
        ("prompt_entropy", "T5", 1, 0.30, None, 0.30),
    ]
    columns = ["selector", "scope", "chosen_layer", "chosen_score", "last_score", "best_score"]
    frame = pd.DataFrame(rows, columns=columns)
    frame.insert(0, "model", "toy/alpha")
    frame["regret"] = frame["best_score"] - frame["chosen_score"]
    frame["gain"] = frame["chosen_score"] - frame["last_score"]
    return frame


def alpha_metrics() -> pd.DataFrame:
    rows = []
    for texts in ("wikitext", "T1"):
        for metric, values in {"prompt_entropy": [0.9, 0.6, 0.5, 0.7], "curvature": [1.2, 1.0, 0.9, 0.8]}.items():
            for layer, value in enumerate(values):
                rows.append(("toy/alpha", layer, 3, layer / 3, texts, metric, value))
    return pd.DataFrame(rows, columns=["model", "layer", "n_layers", "relative_depth", "texts", "metric", "value"])


def alpha_correlation() -> pd.DataFrame:
    rows = [
        ("toy/alpha", metric, method, scope, value, 0.05)
        for metric in ("prompt_entropy", "curvature")
        for method, value in (("dcor", 0.8), ("spearman", -0.6), ("kendall", -0.4))
        for scope in ("mean", "T1")
    ]
    return pd.DataFrame(rows, columns=["model", "metric", "method", "scope", "value", "p_value"])


#: the paper reference's scores per task and layer (Pythia-14m, 2 blocks)
REFERENCE_SCORES = {"T1": [0.2, 0.4, 0.3], "T2": [0.4, 0.6, 0.5], "X": [0.9, 0.9, 0.9]}


def reference_frame() -> pd.DataFrame:
    """The authors' file layout: ``layer_<k>`` labels, the last layer repeated as ``layer_<L>_last``."""
    rows = []
    for task, values in REFERENCE_SCORES.items():
        rows += [("Pythia/14m", f"layer_{k}", task, v) for k, v in enumerate(values)]
        rows.append(("Pythia/14m", "layer_2_last", task, values[-1]))
    return pd.DataFrame(rows, columns=["model", "layer", "task", "main_score"])


def write_run(folder: Path, scores: pd.DataFrame, **sides: pd.DataFrame) -> Path:
    """A run folder: scores.csv plus side files named by keyword (selection=..., metrics=..., correlation=...)."""
    folder.mkdir(parents=True, exist_ok=True)
    scores.to_csv(folder / "scores.csv", index=False)
    for name, frame in sides.items():
        frame.to_csv(folder / f"{name}.csv", index=False)
    return folder


def write_results(root: Path) -> tuple[Path, Path]:
    """``root/alpha`` (all side files) and ``root/one-layer`` (scores only)."""
    alpha = write_run(
        root / "alpha",
        alpha_scores(),
        selection=alpha_selection(),
        metrics=alpha_metrics(),
        correlation=alpha_correlation(),
    )
    return alpha, write_run(root / "one-layer", one_layer_scores())


def write_paper_scores(path: Path) -> Path:
    reference_frame().to_csv(path, index=False)
    return path
