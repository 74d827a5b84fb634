"""What layer_mteb changes about mteb task objects (layer_mteb/tasks/state.py, tasks/local_data.py): every layer scored
from the same task state, label columns held as lists, local data handed over as loaded data; each guarded against
mteb changing underneath."""

from __future__ import annotations

import inspect
import pickle
import random

import mteb
import numpy as np
import pandas as pd
import pytest
from conftest import tiny_model_of_depth
from datasets import Dataset, DatasetDict, load_from_disk
from mteb.abstasks import AbsTask, AbsTaskClassification
from mteb.mocks.mock_tasks.classification import MockClassificationTask
from mteb.mocks.mock_tasks.clustering import LegacyMockClusteringFastTask, MockClusteringTask
from mteb.mocks.mock_tasks.pair_classification import MockPairClassificationTask
from mteb.mocks.mock_tasks.reranking import MockRerankingTask
from mteb.mocks.mock_tasks.sts import MockSTSTask
from threadpoolctl import threadpool_limits

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.encoder import LayerEncoder
from layer_mteb.evaluation.sweep import sweep
from layer_mteb.tasks.catalog import TaskSpec, load_task
from layer_mteb.tasks.local_data import load_local_data
from layer_mteb.tasks.state import (
    TASK_RNG_ATTRIBUTES,
    ListLabelDataset,
    TaskRandomState,
    hold_label_lists,
    load_data_once,
)

CONFIG = EncodeConfig(batch_size=8)


class ManyDocsClusteringTask(LegacyMockClusteringFastTask):
    """mteb's v2 clustering mock with 60 distinct documents, of which each evaluation embeds a random 24."""

    max_document_to_embed = 24

    def load_data(self, num_proc=None, **kwargs) -> None:
        texts, labels = _topic_texts(60)
        self.dataset = DatasetDict({"test": Dataset.from_dict({"sentences": texts, "labels": labels})})
        self.data_loaded = True


class ManyRowsClassificationTask(MockClassificationTask):
    """mteb's classification mock with 60 training rows, undersampled to 8 per label in each of 10 experiments."""

    def load_data(self, num_proc=None, **kwargs) -> None:
        texts, labels = _topic_texts(90)
        self.dataset = DatasetDict(
            {
                "train": Dataset.from_dict({"text": texts[:60], "label": labels[:60]}),
                "test": Dataset.from_dict({"text": texts[60:], "label": labels[60:]}),
            }
        )
        self.data_loaded = True


class ManyDocsLegacyClusteringTask(MockClusteringTask):
    """mteb's legacy clustering mock with two cluster sets of 30 documents."""

    def load_data(self, num_proc=None, **kwargs) -> None:
        texts, labels = _topic_texts(60)
        sets = {"sentences": [texts[:30], texts[30:]], "labels": [labels[:30], labels[30:]]}
        self.dataset = DatasetDict({"test": Dataset.from_dict(sets)})
        self.data_loaded = True


def _topic_texts(n: int) -> tuple[list[str], list[int]]:
    """Texts on four topics labelled with three classes: each layer separates them differently well."""
    topics = ["cats purr softly", "stock markets fell", "rockets launch at dawn", "rain on the river"]
    return [f"{topics[i % 4]} {'again ' * (i % 5)}number {i}" for i in range(n)], [i % 3 for i in range(n)]


STATEFUL = {
    "v2 clustering": ManyDocsClusteringTask,
    "classification": ManyRowsClassificationTask,
    "legacy clustering": ManyDocsLegacyClusteringTask,
}


@pytest.fixture(scope="module")
def model(bert_tokenizer):
    return tiny_model_of_depth("gpt2", bert_tokenizer, 3)


@pytest.fixture(autouse=True)
def _one_thread_evaluators():
    with threadpool_limits(limits=1):  # k-means threads only spin on a loaded 2-core machine
        yield


def scores(frame: pd.DataFrame) -> dict[int, float]:
    return dict(zip(frame["layer"], frame["main_score"], strict=True))


@pytest.mark.parametrize("task_type", list(STATEFUL))
def test_a_layers_score_is_the_same_in_a_full_sweep_alone_and_resumed(model, task_type, tmp_path):
    task_class = STATEFUL[task_type]
    run = {"config": CONFIG, "vector_cache": False, "progress": False}
    full = scores(sweep(model, [task_class()], layers="all", **run))
    alone = {k: scores(sweep(model, [task_class()], layers=str(k), **run))[k] for k in range(model.n_layers + 1)}
    sweep(model, [task_class()], layers="3,1", output=tmp_path, **run)  # a run stopped after two layers ...
    resumed = scores(sweep(model, [task_class()], layers="all", output=tmp_path, **run))  # ... then completed
    assert full == alone == resumed
    assert len(set(full.values())) > 1  # the layers do differ: equal scores are not a degenerate task


def test_the_same_task_object_gives_the_same_scores_sweep_after_sweep(model):
    task = ManyDocsClusteringTask()
    run = {"config": CONFIG, "vector_cache": False, "progress": False}
    first = scores(sweep(model, [task], layers="all", **run))
    assert scores(sweep(model, [task], layers="all", **run)) == first
    assert task.rng_state.getstate() == random.Random(task.seed).getstate()  # left as the sweep found it


# --------------------------------------------------------------------------------------------- mteb guards


@pytest.mark.parametrize(
    "task_class",
    [
        ManyDocsClusteringTask,
        MockClassificationTask,
        MockClusteringTask,
        MockSTSTask,
        MockPairClassificationTask,
        MockRerankingTask,
    ],
)
def test_guard_the_task_rngs_are_the_ones_mteb_seeds_and_no_other(task_class):
    """Fails when mteb renames its per-task generators or adds one that layer_mteb would not reset."""
    task = task_class()
    generators = {
        name
        for name, value in vars(task).items()
        if isinstance(value, random.Random | np.random.Generator | np.random.RandomState)
    }
    assert generators == set(TASK_RNG_ATTRIBUTES)
    assert isinstance(task.rng_state, random.Random) and isinstance(task.np_rng, np.random.Generator)
    assert task.rng_state.getstate() == random.Random(task.seed).getstate()  # seeded as AbsTask.__init__ does


def test_guard_v2_clustering_draws_from_the_task_rng_and_restoring_it_repeats_the_draw(model):
    """The reason the sweep restores the state: mteb's v2 clustering samples from ``task.rng_state``."""
    task = ManyDocsClusteringTask()
    task.load_data()
    saved = TaskRandomState.of(task)
    encoder = LayerEncoder.from_model(model, 2, config=CONFIG)

    def main_score() -> float:
        return mteb.evaluate(encoder, task, cache=None, show_progress_bar=False).task_results[0].get_score()

    first, drifted = main_score(), main_score()
    saved.restore(task)
    assert main_score() == first != drifted


def test_guard_missing_rng_attributes_fail_loudly():
    class Bare:
        rng_state = random.Random(0)

    with pytest.raises(RuntimeError, match="np_rng"):
        TaskRandomState.of(Bare())


def test_guard_classification_refits_from_scratch_and_undersamples_from_its_seed():
    """Classification's other state: the shared sklearn model must not warm-start, undersampling seeds itself."""
    task = MockClassificationTask()
    assert task.evaluator_model.get_params().get("warm_start", False) is False
    assert "np.random.RandomState(self.seed)" in inspect.getsource(AbsTaskClassification._undersample_data)


# --------------------------------------------------------------------------------------------- label lists


@pytest.fixture(scope="module")
def mapped_split(tmp_path_factory):
    """A classification train split saved and loaded memory-mapped, as mteb's hub loader gives it."""
    rng = random.Random(0)
    rows = {"text": [f"text {i}" for i in range(3000)], "label": [rng.randrange(7) for _ in range(3000)]}
    folder = tmp_path_factory.mktemp("split")
    Dataset.from_dict(rows).save_to_disk(folder)
    return load_from_disk(folder)


def test_held_labels_give_mtebs_undersampling_exactly(mapped_split):
    task = MockClassificationTask()
    task.dataset = DatasetDict({"train": mapped_split, "test": mapped_split.select(range(10))})
    plain = [task._undersample_data(task.dataset["train"], i)[2] for i in range(3)]
    hold_label_lists(task)
    held = task.dataset["train"]
    assert type(held) is ListLabelDataset and type(task.dataset["test"]) is ListLabelDataset
    assert held.list_columns == ("label",)
    # mteb selects the label and input columns before undersampling: the held class must survive that
    kept = DatasetDict(task.dataset).select_columns(["text", "label"])["train"]
    assert isinstance(kept, ListLabelDataset)
    assert [task._undersample_data(kept, i)[2] for i in range(3)] == plain
    assert held["label"] == list(mapped_split["label"]) and isinstance(held["label"], list)
    assert held[7] == mapped_split[7] and held["text"][:5] == mapped_split["text"][:5]
    assert held.select([5, 1])["label"] == [mapped_split[5]["label"], mapped_split[1]["label"]]
    assert pickle.loads(pickle.dumps(held))["label"] == held["label"]
    hold_label_lists(task)
    assert task.dataset["train"] is held  # held once


def test_a_held_selection_keeps_the_selected_rows_in_their_order(mapped_split):
    """A split that is a selection of another (mteb's subsampling gives those) is held with its own rows."""
    picked = [2999, 5, 17, 5, 0]
    selection = mapped_split.select(picked)
    held = ListLabelDataset.holding(selection, ("label", "not a column"))
    assert held.list_columns == ("label",)
    assert held["label"] == [mapped_split[i]["label"] for i in picked]
    assert held.to_list() == selection.to_list()
    assert held.features == selection.features and held.split == selection.split


def test_formatted_splits_are_left_as_they_are(mapped_split):
    formatted = mapped_split.with_format("numpy")
    assert ListLabelDataset.holding(formatted, ("label",)) is formatted


def test_only_classification_tasks_are_held():
    task = MockSTSTask()
    task.load_data()
    before = task.dataset["test"]
    hold_label_lists(task)
    assert task.dataset["test"] is before


# --------------------------------------------------------------------------------------------- local data


def test_guard_mteb_uses_data_a_task_already_holds_and_leaves_it_loaded(model, demo_data_dir):
    """Local data reaches mteb as loaded data: ``evaluate`` and ``load_data`` must neither reload nor unload it."""
    assert AbsTask.data_loaded is False and "dataset" in inspect.get_annotations(AbsTask)
    assert "AbsTaskClusteringLegacy" in mteb.abstasks.__all__  # how local clustering data picks its shape
    task = load_task(TaskSpec("STS17"), "test", demo_data_dir)
    held = task.dataset
    task.load_data()  # would reach for the (offline) hub if mteb did not check data_loaded first
    assert task.dataset is held
    encoder = LayerEncoder.from_model(model, 1, config=CONFIG)
    result = mteb.evaluate(encoder, task, cache=None, show_progress_bar=False)
    assert 0 < abs(result.task_results[0].get_score()) <= 1
    assert task.data_loaded and task.dataset is held


def test_a_local_task_comes_loaded_as_its_own_mteb_class_and_pickles(demo_data_dir):
    task = load_task(TaskSpec("STS17"), "test", demo_data_dir)
    assert type(task) is type(mteb.get_task("STS17"))
    assert not {"load_data", "unload_data", "evaluate"} & set(vars(task))  # no method replaced on the object
    assert task.data_loaded
    rows = len(task.dataset["en-en"]["test"])  # a multilingual task: its data by subset (STS17 ships en-en)
    assert rows == sum(1 for line in (demo_data_dir / "STS17" / "test.jsonl").open() if line.strip())
    copy = pickle.loads(pickle.dumps(task))
    assert copy.data_loaded and copy.dataset["en-en"]["test"].to_list() == task.dataset["en-en"]["test"].to_list()
    assert load_data_once(copy) is False


def test_load_data_once_says_whether_it_loaded():
    task = MockSTSTask()
    assert load_data_once(task) is True and task.data_loaded
    assert load_data_once(task) is False


def test_a_sweep_leaves_a_local_task_loaded_for_the_next_one(model, demo_data_dir):
    task = load_task(TaskSpec("STS17"), "test", demo_data_dir)
    run = {"config": CONFIG, "vector_cache": False, "progress": False, "layers": "0,3"}
    first = scores(sweep(model, [task], **run))
    assert task.data_loaded  # unloaded, it could only load again from the hub
    assert scores(sweep(model, [task], **run)) == first


def test_a_bad_local_folder_fails_before_the_task_is_used(tmp_path):
    task = mteb.get_task("BIOSSES")
    with pytest.raises(UserError, match=r"no test\.jsonl"):
        load_local_data(task, tmp_path, TaskSpec("BIOSSES"))
    assert not task.data_loaded


def test_a_bad_local_folder_fails_a_sweep_before_any_model_loads(tmp_path):
    (tmp_path / "STS12").mkdir()
    (tmp_path / "STS12" / "test.jsonl").write_text('{"sentence1": "a", "sentence2": "b", "score": 1}\n{"text": ')
    (tmp_path / "no-model").mkdir()  # a folder with no model in it: it would fail to load, were it tried
    with pytest.raises(UserError, match="not valid JSON"):
        sweep(str(tmp_path / "no-model"), "STS12", data_dir=tmp_path, progress=False)
