"""Per-layer results made elsewhere as this project's tables: folders of mteb 1.x/2.x result JSONs (the authors'
``layer_<k>/<Task>.json`` or a run's ``mteb/``) and the authors' released score and metrics tables. Only the paper's
subset of a multi-subset task is kept; missing layers are reported (:func:`missing_layers`), never filled in."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from layer_mteb.analysis.rules import last_layer_of
from layer_mteb.analysis.runs.mteb_results import AUTHORS_LAYER, layer_results
from layer_mteb.common.config import SETTINGS, SETTINGS_COLUMNS
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import SCORES_FILE, RunFolder
from layer_mteb.common.scores import AGGREGATE_COLUMN, SCORE_COLUMNS, tidy_scores
from layer_mteb.evaluation.evaluator_warnings import layer_ranges
from layer_mteb.metrics import METRIC_COLUMNS, METRICS_FILE, METRICS_TABLE, RELEASE_NORMALIZATIONS, ReleaseNormalization
from layer_mteb.metrics.texts import task_of_label
from layer_mteb.tasks.catalog import read_task_file, subtask_names, task_type

#: The authors' protocol (SOURCE.md of the release): the model cut at k blocks with its final norm, mean pooling with
#: special tokens, max length 2048, half precision, no normalisation after pooling; attention per family below; every
#: other setting at its default (what the package did before the setting existed).
AUTHORS_SETTINGS = {
    **{s.name: s.default for s in SETTINGS if s.name != "attention"},
    "readout": "final_norm",
    "pooling": "mean",
    "max_length": 2048,
    "dtype": "float16",
    "normalize": False,
}
#: Each release family's own attention: decoders and Mamba (left-to-right recurrence) causal; encoders and LLM2Vec
#: (a decoder made bidirectional) bidirectional.
RELEASE_ATTENTION = {
    **dict.fromkeys(["Pythia", "Llama3", "mamba"], "causal"),
    **dict.fromkeys(["bert", "bert_CLS", "roberta_CLS", "roberta_mean_pooling"], "bidirectional"),
    **dict.fromkeys(["LLM2Vec-mntp", "LLM2Vec-mntp-unsup-simcse", "LLM2Vec-mntp-supervised"], "bidirectional"),
}
#: Hidden-state count of the released models (their configs), for folders that do not reach the last layer.
RELEASE_DEPTHS = {
    "Pythia/14m": 6,
    "Pythia/70m": 6,
    "Pythia/160m": 12,
    "Pythia/410m": 24,
    "Pythia/1b": 16,
    "mamba/130m": 24,
    "mamba/370m": 48,
    "mamba/790m": 48,
    "mamba/1.4b": 48,
    "mamba/2.8b": 64,
    "bert/base": 12,
    "bert_CLS/base": 12,
    "bert/large": 24,
    "roberta_CLS/base": 12,
    "roberta_mean_pooling/base": 12,
    "roberta_mean_pooling/large": 24,
    "LLM2Vec-mntp/8B": 32,
    "LLM2Vec-mntp-unsup-simcse/8B": 32,
    "LLM2Vec-mntp-supervised/8B": 32,
}

#: What the paper's figures plot (``layerwise_entropies.ipynb``): entropies and LiDAR divided by min(ln N, ln D)
#: (``maxEntropy``), the rest raw; a constant divisor, so the layer a metric selects is the same either way.
PAPER_NORMALIZATION = {"curvature": "raw", "dime": "raw", "infonce": "raw"}


def release_depth(model: str) -> int | None:
    """The released model's number of layers (checkpoints ``model@step`` share their model's)."""
    return RELEASE_DEPTHS.get(model.split("@")[0])


def release_attention(model: str) -> str | None:
    """The attention a released model (``family/size[@step]``) ran; None for a model the release does not hold."""
    return RELEASE_ATTENTION.get(model.split("/")[0])


def _attention_of(models: pd.Series) -> pd.Series:
    """Each released model's attention (:data:`RELEASE_ATTENTION`); a family not in the table is one line."""
    attention = models.astype(str).map(release_attention)
    unknown = sorted(set(models[attention.isna()].astype(str)))
    if unknown:
        raise UserError(
            f"the release's model(s) {', '.join(unknown)} are of no family whose attention is known "
            f"({', '.join(RELEASE_ATTENTION)})"
        )
    return attention


def import_folder(
    folder: str | Path,
    *,
    model: str | None = None,
    n_layers: int | None = None,
    attention: str | None = None,
    split: str = "test",
) -> pd.DataFrame:
    """Every ``<Task>.json`` under ``folder`` -> score rows. The layer comes from ``model_meta.json`` (this project's
    runs) or a ``layer_<k>`` folder (``layer_<L>_last`` only where ``layer_<L>`` is absent); the attention from the
    files, else ``attention``, else the release's, else a line asking for it."""
    root = Path(folder)
    if not root.is_dir():
        raise UserError(f"{folder} is not a folder of mteb result JSONs")
    subsets = {spec.name: spec.subsets for spec in read_task_file().tasks}
    rows, seen = [], set()
    for found in layer_results(root):
        name, task = model or found.meta.get("name") or root.name, found.result.task_name
        if (name, found.layer, task) in seen:
            continue  # a `layer_<L>_last` copy of a layer already read
        seen.add((name, found.layer, task))
        kwargs = found.experiment if "layer" in found.experiment else {}  # a layer folder of the authors': theirs
        described = {
            "model": name,
            "revision": found.meta.get("revision") or found.result.mteb_version,
            "layer": found.layer,
            "task_type": task_type(task),
            **{key: kwargs.get(key, AUTHORS_SETTINGS[key]) for key in AUTHORS_SETTINGS},
            "attention": kwargs.get("attention") or attention or release_attention(name),
            "data": "imported",
        }
        rows += [{**described, **row} for row in found.score_rows([split], subsets.get(task))]
    if not rows:
        raise UserError(f"no per-layer mteb result JSONs with a {split!r} split under {folder}")
    unsaid = sorted({row["model"] for row in rows if row["attention"] is None})
    if unsaid:
        raise UserError(
            f"the result files under {folder} do not say which attention {', '.join(unsaid)} ran: pass --attention "
            "causal (a decoder or state-space model) or bidirectional (an encoder)"
        )
    frame = pd.DataFrame(rows)
    frame[AGGREGATE_COLUMN] = _aggregate_of(frame["task"])
    return _with_depth(frame, n_layers)


def _aggregate_of(tasks: pd.Series) -> pd.Series:
    """Each row's aggregate task where the folder holds it too (so means count the aggregate once), else empty."""
    names = set(tasks)
    parent = {part: name for name in names for part in subtask_names(name) if part in names}
    return tasks.map(lambda task: parent.get(task, ""))


def _with_depth(frame: pd.DataFrame, n_layers: int | None) -> pd.DataFrame:
    depths = {model: n_layers or release_depth(model) or last_layer_of(part) for model, part in frame.groupby("model")}
    frame["n_layers"] = frame["model"].map(depths).astype(int)
    frame["relative_depth"] = frame["layer"] / frame["n_layers"]
    return tidy_scores(frame[SCORE_COLUMNS].to_dict("records"))


def release_layers(raw: pd.DataFrame) -> pd.DataFrame:
    """The release's ``layer_<k>`` labels -> ``k``; other labels dropped, ``layer_<L>_last`` kept only as a stand-in."""
    parsed = raw["layer"].astype(str).str.extract(AUTHORS_LAYER)
    raw = raw.assign(layer=pd.to_numeric(parsed[0]), is_copy=parsed[1].notna()).dropna(subset=["layer"])
    raw = raw.sort_values("is_copy", kind="stable").drop_duplicates(["model", "layer", "task"])
    return raw.assign(layer=raw["layer"].astype(int))


def release_scores(path: str | Path | pd.DataFrame, models: list[str] | None = None) -> pd.DataFrame:
    """The authors' per-layer scores (:func:`.release.score_table` or ``official_layer_scores.csv``) as score rows."""
    raw = path if isinstance(path, pd.DataFrame) else pd.read_csv(path)
    if models is not None:
        unknown = sorted(set(models) - set(raw["model"]))
        if unknown:
            raise UserError(f"{path} has no model(s) {', '.join(unknown)}")
        raw = raw[raw["model"].isin(models)]
    raw = release_layers(raw)
    frame = raw.assign(
        revision=raw["model"].str.partition("@")[2].replace("", "main"),
        task_type=None,
        split="test",
        subset=None,
        data="release",
        aggregate="",  # the paper's tasks hold no aggregate task
        **AUTHORS_SETTINGS,
        attention=_attention_of(raw["model"]),
    )
    # the authors' *_CLS folders read the first token ([CLS]) instead of the mean over tokens
    frame.loc[frame["model"].str.contains("_CLS"), "pooling"] = "first"
    return _with_depth(frame, None)


def missing_layers(scores: pd.DataFrame) -> pd.DataFrame:
    """(model, task, missing) for every task that lacks some layer 0..deepest layer scored for that model."""
    rows = []
    for model, part in scores.groupby("model", sort=False):
        layers = set(range(int(part["layer"].max()) + 1))
        for task, rows_of_task in part.groupby("task"):
            lacking = sorted(layers - set(rows_of_task["layer"]))
            if lacking:
                rows.append({"model": model, "task": task, "missing": lacking})
    return pd.DataFrame(rows, columns=["model", "task", "missing"])


def describe_missing(missing: pd.DataFrame) -> list[str]:
    """One line per model naming the missing layers of each task (what a report must say, never hide)."""
    lines = []
    for model, part in missing.groupby("model", sort=False):
        listed = "; ".join(f"{row.task}: {layer_ranges(row.missing, '–')}" for row in part.itertuples())
        lines.append(f"{model}: layers missing from the results ({listed})")
    return lines


def import_metrics_table(
    path: str | Path | pd.DataFrame,
    *,
    normalization: ReleaseNormalization = "paper",
    models: dict[str, str] | None = None,
    settings: dict | None = None,
) -> pd.DataFrame:
    """The authors' metrics table (:func:`.release.metric_table` or ``official_layer_metrics.csv.gz``) -> metric rows.

    Measured on the raw residual stream, so ``readout = raw``; other settings are the scores' (``settings``) so
    selection pairs them. ``models`` renames (default: all, kept). A task's texts use its test split where it has one.
    """
    if normalization not in RELEASE_NORMALIZATIONS:
        raise UserError(f"--normalization must be one of {', '.join(RELEASE_NORMALIZATIONS)}; got {normalization!r}")
    table = path if isinstance(path, pd.DataFrame) else pd.read_csv(path)
    if models is not None:
        table = table[table["model"].isin(models)]
    paper = table["metric"].map(lambda m: PAPER_NORMALIZATION.get(m, "maxEntropy"))
    table = table[table["normalization"] == (paper if normalization == "paper" else normalization)]
    on_task, test = table["texts"].map(task_of_label).notna(), table["split"] == "test"
    has_test = (on_task & test).groupby([table["model"], table["texts"]], dropna=False).transform("any")
    table = _one_wikitext_split(table[~on_task | test | ~has_test])
    settings = {**AUTHORS_SETTINGS, **(settings or {}), "readout": "raw"}
    if "attention" not in settings:
        settings["attention"] = _attention_of(table["model"])
    depth = table["model"].map(release_depth).fillna(table.groupby("model")["layer"].transform("max"))
    frame = pd.DataFrame(
        {
            "model": table["model"].map(models) if models is not None else table["model"],
            "revision": table["model"].str.partition("@")[2].replace("", "main"),
            "layer": table["layer"].astype(int),
            "n_layers": depth.astype(int),
            "relative_depth": table["layer"] / depth,
            "texts": table["texts"],
            "task": table["texts"].map(task_of_label).fillna(""),
            "metric": table["metric"],
            "value": table["value"],
            "n": pd.NA,
            **settings,
            "data": "imported",
            # made by the authors' code as released: its arithmetic, not the paper's formulas (docs/selection.md)
            "arithmetic": "authors",
        }
    )
    return frame[METRIC_COLUMNS].sort_values(["model", "texts", "metric", "layer"], kind="stable")


#: WikiText splits in order of preference: most release folders have ``train``; six have no split folder (empty);
#: the Pythia-410m checkpoints add a ``test`` folder with one or two metrics.
WIKITEXT_SPLITS = ("train", "", "test")


def wikitext_splits(table: pd.DataFrame) -> dict[str, str]:
    """model -> the WikiText split whose metrics stand for it in a release metrics table (``""``: none recorded)."""
    splits = table.loc[table["texts"] == "wikitext", ["model", "split"]].fillna({"split": ""})
    rank = splits["split"].map({split: i for i, split in enumerate(WIKITEXT_SPLITS)}).fillna(len(WIKITEXT_SPLITS))
    ranked = splits.assign(rank=rank).sort_values("rank", kind="stable").drop_duplicates("model")
    return dict(zip(ranked["model"], ranked["split"], strict=True))


def _one_wikitext_split(table: pd.DataFrame) -> pd.DataFrame:
    """WikiText rows of each model's :func:`wikitext_splits` split only (other texts unchanged)."""
    wiki = table["texts"] == "wikitext"
    if not wiki.any():
        return table
    chosen = table["model"].map(wikitext_splits(table))
    return table[~wiki | (table["split"].fillna("") == chosen)]


def write_import(
    folder: str | Path,
    output: str | Path,
    *,
    model: str | None = None,
    n_layers: int | None = None,
    attention: str | None = None,
    metrics: str | Path | None = None,
    metrics_model: str | None = None,
    normalization: ReleaseNormalization = "paper",
) -> list[str]:
    """Import ``folder`` (and a metrics table) into ``output``, all or nothing; returns the lines to show."""
    scores = import_folder(folder, model=model, n_layers=n_layers, attention=attention)
    names = scores["model"].unique().tolist()
    table = None
    if metrics is not None:
        source = metrics_model or names[0]
        settings = {k: scores[k].iloc[0] for k in SETTINGS_COLUMNS if k != "readout"}
        table = import_metrics_table(metrics, normalization=normalization, models={source: names[0]}, settings=settings)
        if table.empty:
            raise UserError(f"{metrics} has no rows for model {source!r}; name it with --metrics-model")
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    run = RunFolder(out)
    run.write_scores(scores)
    if table is not None:
        run.update(METRICS_TABLE, table)
    lines = [
        f"{name}: {part['task'].nunique()} tasks, layers {part['layer'].min()}–{part['layer'].max()} "
        f"({len(part)} scores) -> {out / SCORES_FILE}"
        for name, part in scores.groupby("model", sort=False)
    ]
    if table is not None:
        lines.append(f"metrics ({normalization}): {len(table)} rows -> {out / METRICS_FILE}")
    return lines + describe_missing(missing_layers(scores))
