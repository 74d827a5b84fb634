"""The authors' release as they published it (a clone of OFSkean/information_flow): from the
``experiments/results/<family>/<size>/<revision>/`` folders' ``mteb/layer_<k>/<Task>.json`` (mteb 1.14),
``metrics/mteb/<task folder>/<split>/<metric>.pkl``, ``metrics/wikitext[/<split>]/<metric>.pkl`` and the adhoc
prompt-length pickle, three long tables shaped as the CSVs once extracted from it, so both sources give the same rows.

Pickles are read by :class:`NumpyOnlyUnpickler`: it rebuilds numpy arrays only; any other global is refused before
anything of the pickle runs.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from layer_mteb.analysis.runs.release_layout import ModelFolder, model_folders, results_folder, subfolders
from layer_mteb.common.errors import UserError

logger = logging.getLogger(__name__)

#: Column order of the three raw tables (as the extracted CSVs had them).
SCORE_TABLE_COLUMNS = ["model", "layer", "task", "main_score", "mteb_version"]
METRIC_TABLE_COLUMNS = ["model", "layer", "texts", "split", "metric", "normalization", "value", "file"]
LENGTH_TABLE_COLUMNS = ["model", "prompt_length", "prompt", "layer", "normalization", "value"]

#: The authors' metric files -> this project's names (``entropy_sentence``: their older name, read only where a folder
#: has no ``entropy_prompt``); other files are not part of the table.
METRIC_FILES = {
    "entropy_prompt": "prompt_entropy",
    "entropy_sentence": "prompt_entropy",
    "entropy_dataset": "dataset_entropy",
    "curvature": "curvature",
    "infonce": "infonce",
    "lidar": "lidar",
    "dime": "dime",
}
WIKITEXT = "wikitext"
#: The one adhoc table read: 1000 random-token prompts per length, per-prompt entropy of every layer of Pythia-410m.
LENGTH_PICKLE = Path("adhoc") / "pythia_random_of_differing_lengths.pkl"
LENGTH_MODEL = "Pythia/410m"
LENGTH_NORMALIZATIONS = ("raw", "maxEntropy")

#: Task folders named after a dataset today's mteb renamed (the others: the end of ``metadata.dataset['path']``).
RENAMED_DATASETS = {
    "amazon_reviews_multi": "AmazonReviewsClassification",
    "mtop_domain": "MTOPDomainClassification",
    "mtop_intent": "MTOPIntentClassification",
    "askubuntudupquestions-reranking": "AskUbuntuDupQuestions",
    "mind_small": "MindSmallReranking",
    "scidocs-reranking": "SciDocsRR",
    "stackoverflowdupquestions-reranking": "StackOverflowDupQuestions",
}

# numpy's own reconstruction of arrays, dtypes and scalars, under numpy 1.x names (what the pickles say) and 2.x ones
_NUMPY_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"): ("numpy._core.multiarray", "scalar"),
    ("numpy._core.multiarray", "_reconstruct"): ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"): ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"): ("numpy", "ndarray"),
    ("numpy", "dtype"): ("numpy", "dtype"),
}


class NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickles plain containers and numpy arrays only: any other global (a function, a class) is refused, so a
    pickle can build data but never call code of its choosing."""

    def __init__(self, file, path: Path) -> None:
        super().__init__(file)
        self.path = path

    def find_class(self, module: str, name: str):
        target = _NUMPY_GLOBALS.get((module, name))
        if target is None:
            raise UserError(f"{self.path}: refused to unpickle {module}.{name} (only numpy arrays are read)")
        return super().find_class(*target)


def read_pickle(path: Path) -> object:
    """The object pickled in ``path``, built by :class:`NumpyOnlyUnpickler` (a damaged file is one error line)."""
    with open(path, "rb") as handle:
        try:
            return NumpyOnlyUnpickler(handle, path).load()
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as err:
            raise UserError(f"{path}: not a readable metrics pickle ({err})") from None


def _paper_subsets() -> dict[str, tuple[str, ...]]:
    from layer_mteb.tasks.catalog import read_task_file

    return {spec.name: tuple(spec.subsets or ()) for spec in read_task_file().tasks}


def _main_score(data: dict, subsets: tuple[str, ...]) -> float | None:
    """The test split's main score of the paper's subset (the only entry of a single-subset task)."""
    entries = data.get("scores", {}).get("test", [])
    if subsets:
        entries = [e for e in entries if e.get("hf_subset") in subsets]
    return float(entries[0]["main_score"]) if len(entries) == 1 else None


def score_table(results: Path, folders: list[ModelFolder] | None = None) -> pd.DataFrame:
    """Per-layer main scores (test split, the paper's subset, 6 decimals) of every ``mteb/layer_<k>/<Task>.json``,
    layer labels as the folders name them (``layer_<k>``, ``layer_<L>_last``)."""
    subsets, rows = _paper_subsets(), []
    for folder in folders if folders is not None else model_folders(results):
        mteb = folder.path / "mteb"
        if not mteb.is_dir():
            continue
        for layer in subfolders(mteb):
            for path in sorted(p for p in Path(layer.path).glob("*.json") if p.name != "model_meta.json"):
                try:
                    data = json.loads(path.read_bytes())
                except ValueError as err:
                    raise UserError(f"{path}: not an mteb result JSON ({err})") from None
                task = data.get("task_name") or path.stem
                score = _main_score(data, subsets.get(task, ()))
                if score is not None:
                    rows.append((folder.model, layer.name, task, round(score, 6), data.get("mteb_version")))
    return pd.DataFrame(rows, columns=SCORE_TABLE_COLUMNS)


def task_folders(names: list[str]) -> dict[str, str]:
    """Task folder (mteb 1.x dataset name) -> mteb task name, from the installed mteb plus :data:`RENAMED_DATASETS`."""
    import mteb

    mapping = {task.metadata.dataset["path"].rsplit("/", 1)[-1]: task.metadata.name for task in mteb.get_tasks(names)}
    return {**mapping, **RENAMED_DATASETS}


def _metric_rows(folder: Path, model: str, texts: str, split: str | None) -> list[tuple]:
    with os.scandir(folder) as entries:
        files = {e.name.removesuffix(".pkl") for e in entries if e.is_file() and e.name.endswith(".pkl")}
    if "entropy_prompt" in files:
        files.discard("entropy_sentence")
    rows = []
    for stem in sorted(files & METRIC_FILES.keys()):
        path = folder / f"{stem}.pkl"
        values = read_pickle(path)
        if not isinstance(values, dict):
            raise UserError(f"{path}: expected a dict of normalization -> per-layer values")
        for normalization, per_layer in values.items():
            for layer, value in enumerate(np.asarray(per_layer, dtype=float).ravel()):
                rows.append((model, layer, texts, split, METRIC_FILES[stem], normalization, _significant(value), stem))
    return rows


def _significant(value: float) -> float:
    return float(f"{value:.8g}")


def metric_table(results: Path, folders: list[ModelFolder] | None = None) -> pd.DataFrame:
    """Per-layer metrics of every model folder on task texts and on WikiText, to 8 significant digits."""
    folders = folders if folders is not None else model_folders(results)
    tasks: dict[str, str] | None = None
    rows: list[tuple] = []
    unknown: set[str] = set()
    for folder in folders:
        metrics = folder.path / "metrics"
        own = metrics / "mteb"
        if own.is_dir():
            if tasks is None:
                tasks = task_folders(list(_paper_subsets()))
            for task_folder in subfolders(own):
                task = tasks.get(task_folder.name)
                if task is None:
                    unknown.add(task_folder.name)
                    continue
                for split in subfolders(Path(task_folder.path)):
                    rows += _metric_rows(Path(split.path), folder.model, f"task:{task}", split.name)
        wikitext = metrics / WIKITEXT
        if wikitext.is_dir():
            rows += _metric_rows(wikitext, folder.model, WIKITEXT, None)
            for split in subfolders(wikitext):
                rows += _metric_rows(Path(split.path), folder.model, WIKITEXT, split.name)
    if unknown:
        logger.warning("release: task folders of no paper task, not imported: %s", ", ".join(sorted(unknown)))
    return pd.DataFrame(rows, columns=METRIC_TABLE_COLUMNS)


def prompt_length_table(results: Path) -> pd.DataFrame | None:
    """The per-prompt entropies of the prompt-length stress test, or ``None`` when the release lacks its pickle."""
    path = results / LENGTH_PICKLE
    if not path.is_file():
        return None
    data = read_pickle(path)
    parts = []
    for length, by_normalization in sorted(data.items()):
        for normalization in LENGTH_NORMALIZATIONS:
            values = np.asarray(by_normalization[normalization], dtype=float)  # prompts x layers
            index = pd.MultiIndex.from_product([range(n) for n in values.shape], names=["prompt", "layer"])
            rows = pd.Series(values.ravel(), index=index, name="value").map(_significant).reset_index()
            about = {"model": LENGTH_MODEL, "prompt_length": int(length), "normalization": normalization}
            parts.append(rows.assign(**about))
    return pd.concat(parts, ignore_index=True)[LENGTH_TABLE_COLUMNS]


@dataclass(frozen=True)
class ReleaseTables:
    """The three tables of the release, as read (nothing cached on disk)."""

    scores: pd.DataFrame
    metrics: pd.DataFrame
    prompt_length: pd.DataFrame | None


def read_release(path: str | Path) -> ReleaseTables:
    """Every table of the release at ``path`` (a clone, or its ``experiments/results``)."""
    results = results_folder(path)
    folders = model_folders(results)
    return ReleaseTables(score_table(results, folders), metric_table(results, folders), prompt_length_table(results))
