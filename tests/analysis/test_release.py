"""The authors' release read as published (a clone of their repository): the tables it gives equal the extracted ones
row by row, pickles are read without running anything, and the command says how to get a release it cannot find."""

from __future__ import annotations

import os
import pickle
import shutil
import time

import numpy as np
import pandas as pd
import pytest

from layer_mteb.analysis.runs.importing import import_metrics_table, wikitext_splits
from layer_mteb.analysis.runs.release import RENAMED_DATASETS, read_pickle, read_release, task_folders
from layer_mteb.analysis.runs.release_layout import (
    HOW_TO_GET,
    RELEASE_ENV,
    model_folders,
    release_folder,
    results_folder,
)
from layer_mteb.common.errors import UserError

REFERENCE = release_folder()
RELEASE = REFERENCE / "release"
needs_release = pytest.mark.skipif(
    not (RELEASE / "experiments" / "results").is_dir(), reason=f"the authors' release is not at {RELEASE}"
)


@pytest.mark.parametrize(
    ("module", "name", "call"),
    [("os", "system", "touch {marker}"), ("builtins", "eval", "open({marker!r}, 'w').close()")],
)
def test_a_pickle_naming_any_other_global_is_refused_and_nothing_runs(tmp_path, module, name, call):
    marker = tmp_path / "ran"
    argument = call.format(marker=str(marker))
    # GLOBAL module name, then call it with one string argument (REDUCE): what a hostile metrics file would hold
    hostile = f"c{module}\n{name}\n(V{argument}\ntR.".encode()
    assert "ran" not in str(list(tmp_path.iterdir()))
    path = tmp_path / "entropy_prompt.pkl"
    path.write_bytes(hostile)
    with pytest.raises(UserError) as err:
        read_pickle(path)
    assert str(err.value) == f"{path}: refused to unpickle {module}.{name} (only numpy arrays are read)"
    assert not marker.exists()
    # the same global inside a dict, as protocol 4 writes it (STACK_GLOBAL)
    path.write_bytes(pickle.dumps({"raw": _Call(getattr(__import__(module), name), argument)}, protocol=4))
    with pytest.raises(UserError, match="refused to unpickle"):
        read_pickle(path)
    assert not marker.exists()


class _Call:
    """Pickles to ``target(argument)``."""

    def __init__(self, target, argument: str) -> None:
        self.target, self.argument = target, argument

    def __reduce__(self):
        return self.target, (self.argument,)


def test_numpy_arrays_and_scalars_are_read_back(tmp_path):
    values = {"raw": np.array([1.5, 2.25, np.nan]), "maxEntropy": np.float64(0.5), "logN": [0.1, 0.2]}
    path = tmp_path / "lidar.pkl"
    path.write_bytes(pickle.dumps(values, protocol=4))
    read = read_pickle(path)
    np.testing.assert_array_equal(read["raw"], values["raw"])
    assert read["maxEntropy"] == 0.5 and read["logN"] == [0.1, 0.2]
    (tmp_path / "cut.pkl").write_bytes(path.read_bytes()[:20])
    with pytest.raises(UserError, match=r"cut\.pkl: not a readable metrics pickle"):
        read_pickle(tmp_path / "cut.pkl")


def test_a_missing_release_says_how_to_get_it(tmp_path):
    with pytest.raises(UserError) as err:
        results_folder(tmp_path / "nowhere")
    assert str(err.value) == f"no authors' release at {tmp_path / 'nowhere'}: {HOW_TO_GET}"
    assert "XuweiyiChen/information_flow" in HOW_TO_GET and "dde387a7" in HOW_TO_GET
    with pytest.raises(UserError, match="holds no <family>/<size>/<revision>/mteb or metrics folder"):
        results_folder(tmp_path)


@needs_release
def test_the_release_folder_is_named_by_its_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(RELEASE_ENV, str(tmp_path / "new"))
    assert release_folder() == tmp_path / "new"
    assert release_folder(tmp_path / "given") == tmp_path / "given"


@needs_release
def test_the_clone_and_its_results_folder_are_both_accepted():
    results = RELEASE / "experiments" / "results"
    assert results_folder(RELEASE) == results_folder(results) == results
    names = [folder.model for folder in model_folders(results)]
    assert {"Pythia/410m", "Pythia/410m@step1000", "Llama3/8B", "mamba/130m"} <= set(names)
    assert len(names) == 32  # the 27 scored folders, Pythia 1.4b/2.8b/6.9b, Llama3 8B, RoBERTa-large; no vision
    assert not [name for name in names if name.split("/")[0] in {"vit", "clip", "dinov2", "vision_results"}]


@pytest.mark.slow  # mteb's task registry: seconds to import
@needs_release
def test_every_task_folder_maps_to_a_paper_task_and_the_renamed_ones_are_needed():
    from layer_mteb.tasks.catalog import read_task_file

    paper = [spec.name for spec in read_task_file().tasks]
    mapping = task_folders(paper)
    folders = {
        entry.name
        for folder in model_folders(RELEASE / "experiments" / "results")
        if (folder.path / "metrics" / "mteb").is_dir()
        for entry in os.scandir(folder.path / "metrics" / "mteb")
    }
    assert len(folders) == 29 and folders <= mapping.keys()
    assert set(mapping.values()) <= set(paper)
    import mteb

    from_metadata = {t.metadata.dataset["path"].rsplit("/", 1)[-1] for t in mteb.get_tasks(paper)}
    assert not set(RENAMED_DATASETS) & from_metadata  # the table holds only what mteb's metadata cannot give


@pytest.mark.slow
@needs_release
def test_the_release_gives_the_extracted_tables_row_by_row_plus_the_wikitext_metrics():
    started = time.perf_counter()
    tables = read_release(RELEASE)
    seconds = time.perf_counter() - started
    assert seconds < 120, f"reading the release took {seconds:.0f} s"

    extracted = pd.read_csv(REFERENCE / "official_layer_scores.csv")
    key = ["model", "layer", "task"]
    both = extracted.merge(tables.scores, on=key, how="outer", suffixes=("_x", "_built"), indicator=True)
    assert len(extracted) == len(tables.scores) == 14672
    assert (both["_merge"] == "both").all()
    nan = both["main_score_x"].isna()  # the release's STS16 of the *_CLS folders' layer 0: NaN in the JSON
    assert (both.loc[nan, "main_score_built"].isna()).all() and nan.sum() == 2
    assert (both.loc[~nan, "main_score_x"] == both.loc[~nan, "main_score_built"]).all()  # both to 6 decimals
    assert (both["mteb_version_x"] == both["mteb_version_built"]).all()
    assert extracted["model"].nunique() == 27

    extracted = pd.read_csv(REFERENCE / "official_layer_metrics.csv.gz")
    own = tables.metrics[tables.metrics["texts"] != "wikitext"]
    key = ["model", "layer", "texts", "split", "metric", "normalization"]
    both = extracted.merge(own, on=key, how="outer", suffixes=("_x", "_built"), indicator=True)
    assert len(extracted) == len(own) == 275102
    assert (both["_merge"] == "both").all()
    same = (both["value_x"] == both["value_built"]) | (both["value_x"].isna() & both["value_built"].isna())
    assert same.all()  # both to 8 significant digits
    assert (both["file_x"] == both["file_built"]).all()  # entropy_sentence only where no entropy_prompt

    wiki = tables.metrics[tables.metrics["texts"] == "wikitext"]
    assert wiki["model"].nunique() == 28
    assert {"Pythia/6.9b", "Llama3/8B", "mamba/2.8b", "bert/large", "Pythia/410m@step1"} <= set(wiki["model"])
    splits = wikitext_splits(tables.metrics)
    assert (splits["Pythia/410m@step1000"], splits["mamba/130m"], splits["bert/large"]) == ("train", "", "test")
    curve = wiki.query("model == 'Pythia/410m' and metric == 'prompt_entropy' and normalization == 'raw'")
    assert curve["layer"].tolist() == list(range(25))

    extracted = pd.read_csv(REFERENCE / "official_prompt_length_entropy.csv.gz")
    pd.testing.assert_frame_equal(
        tables.prompt_length.sort_values(list(extracted.columns[:5])).reset_index(drop=True),
        extracted.sort_values(list(extracted.columns[:5])).reset_index(drop=True),
        check_dtype=False,
    )


@needs_release
def test_wikitext_metrics_keep_one_split_per_model(tmp_path):
    results = tmp_path / "experiments" / "results"
    for folder in ("Pythia/410m/step1000", "mamba/130m/main"):
        shutil.copytree(RELEASE / "experiments" / "results" / folder / "metrics" / "wikitext",
                        results / folder / "metrics" / "wikitext")  # fmt: skip
    tables = read_release(tmp_path)
    assert tables.scores.empty and tables.prompt_length is None
    assert set(tables.metrics["split"].fillna("")) == {"train", "test", ""}
    rows = import_metrics_table(tables.metrics)
    assert set(rows["texts"]) == {"wikitext"}
    per_layer = rows.groupby(["model", "metric", "layer"]).size()
    assert (per_layer == 1).all()  # step1000 has train and test: train only
    assert set(rows.loc[rows["model"] == "Pythia/410m@step1000", "metric"]) == {
        "prompt_entropy", "dataset_entropy", "curvature", "infonce", "lidar", "dime",
    }  # fmt: skip
    mamba = rows[(rows["model"] == "mamba/130m") & (rows["metric"] == "prompt_entropy")]
    assert len(mamba) == 25  # its entropy_sentence.pkl: the older name of prompt entropy


@pytest.mark.slow  # four figures of up to 49 layers: tens of seconds on a busy machine
@needs_release
def test_the_wikitext_figures_draw_the_release_curves_with_the_same_bytes_twice(tmp_path):
    from layer_mteb.paper.paper_figures import draw_wikitext, extrema, sources_markdown
    from layer_mteb.paper.regenerate import wikitext_with_split

    results = tmp_path / "experiments" / "results"
    for folder in ("bert/base/main", "Pythia/410m/main", "mamba/370m/main", "Pythia/2.8b/main"):
        shutil.copytree(RELEASE / "experiments" / "results" / folder / "metrics" / "wikitext",
                        results / folder / "metrics" / "wikitext")  # fmt: skip
    tables = read_release(tmp_path)
    rows = import_metrics_table(tables.metrics)
    wiki = wikitext_with_split(rows, tables.metrics)
    first, sets = draw_wikitext(wiki, tmp_path / "a")
    second, _ = draw_wikitext(wiki, tmp_path / "b")
    names = ["figure2_wikitext.png", "figure2_wikitext.pdf", "figure12_wikitext.png", "figure12_wikitext.pdf"]
    assert [p.name for p in first] == names  # no checkpoints here: no progression figure
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(first, second, strict=True))
    table = extrema(wiki, rows.iloc[:0], sets).set_index(["figure", "model", "metric"])
    entropy = table.xs("prompt_entropy", level="metric").loc["figure2_wikitext"]
    assert entropy.loc[["bert/base", "Pythia/410m", "mamba/370m"], "min_layer"].tolist() == [11, 12, 48]
    assert (entropy["split"] == "train").all()
    markdown = "\n".join(sources_markdown(sets, table.reset_index(), wiki))
    assert "- Pythia/2.8b (no split folder): curvature at 4 of 33 layers" in markdown
    assert "| figure2_wikitext | Pythia/410m | train | 12 | 0.50 | — | — | — |" in markdown


def test_a_checkout_reads_no_release_or_data_from_above_the_folder_beside_it(tmp_path):
    """A clone finds the release and the data only where the docs say (an option, the variable, ``../shared``
    beside it or the working folder), never in a ``shared/`` two levels up: there the clone would read data nobody
    pointed it at (and a bare test run would not be bare)."""
    import subprocess
    import sys
    from pathlib import Path

    import layer_mteb

    above = tmp_path / "outer"
    (above / "shared" / "reference" / "release").mkdir(parents=True)
    (above / "shared" / "data" / "STSBenchmark").mkdir(parents=True)
    checkout = above / "projects" / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", "demo_data")
    shutil.copytree(Path(layer_mteb.__file__).parent, checkout / "layer_mteb", ignore=ignore)
    probe = (
        "from layer_mteb.analysis.runs.release_layout import release_folder\n"
        "from layer_mteb.tasks.catalog import data_dir_from_env\n"
        "print(release_folder().resolve().is_dir(), data_dir_from_env(None))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYER_MTEB_")} | {"PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, "-c", probe], cwd=checkout, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "None"]
    (above / "projects" / "shared").symlink_to(above / "shared")  # beside the checkout: found
    done = subprocess.run([sys.executable, "-c", probe], cwd=checkout, env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["True", str(above / "projects" / "shared" / "data")]
