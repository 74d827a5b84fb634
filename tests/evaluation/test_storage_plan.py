"""A run says up front, per task, the texts it will encode and where their all-layer vectors will live: counted in
loaded data, else read from mteb's descriptive statistics of the splits and subsets the run scores."""

from __future__ import annotations

import logging
import random

import mteb
from datasets import Dataset, DatasetDict, load_from_disk
from mteb.mocks.mock_tasks.classification import MockClassificationTask
from mteb.mocks.mock_tasks.sts import MockSTSTask

from layer_mteb.evaluation.mteb_call import texts_mteb_encodes
from layer_mteb.evaluation.storage_plan import expected_texts, state_plan
from layer_mteb.tasks.catalog import load_task, select_tasks
from layer_mteb.tasks.state import ListLabelDataset


def test_texts_come_from_the_data_or_from_mtebs_statistics_of_the_subsets_run():
    loaded = MockSTSTask()
    loaded.load_data()
    assert expected_texts(loaded) == (len(texts_mteb_encodes(loaded)), "data")
    arguana = mteb.get_task("ArguAna")  # 8674 documents and 1406 queries in mteb's statistics
    assert expected_texts(arguana) == (8674 + 1406, "mteb statistics")
    _, specs = select_tasks("MTEB(eng, v2)")
    sts22 = load_task(next(spec for spec in specs if spec.name == "STS22.v2"))
    assert expected_texts(sts22) == (197 + 195, "mteb statistics")  # the en subset's unique texts, not all 18


def test_the_plan_names_each_tasks_size_and_place(caplog):
    arguana, sts = mteb.get_task("ArguAna"), MockSTSTask()
    sts.load_data()
    with caplog.at_level(logging.INFO, logger="layer_mteb"):
        costs = state_plan([arguana, sts], 33, 4096, 10**9, "cuda", "/cache/vectors")
    assert costs[0].bytes == 10080 * 33 * 4096 * 4
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == (
        "plan: ArguAna: 10080 texts (mteb statistics) x 33 layers x 4096 dims = 5.5GB of float32 vectors, "
        "in per-layer files under /cache/vectors"
    )
    assert lines[1].startswith("plan: MockSTSTask: ") and lines[1].endswith("in cuda memory")
    assert lines[2].startswith("plan: 2 tasks, ")


def test_an_aggregate_tasks_texts_are_its_subtasks():
    """CQADupstackRetrieval holds no data or statistics of its own: its plan is the sum of its 12 subtasks'."""
    aggregate = mteb.get_task("CQADupstackRetrieval")
    parts = [expected_texts(subtask) for subtask in aggregate.tasks]
    assert len(parts) == 12 and all(source == "mteb statistics" for _, source in parts)
    assert expected_texts(aggregate) == (sum(texts for texts, _ in parts), "mteb statistics")


def test_counting_a_classification_tasks_texts_reads_its_labels_as_held_lists(tmp_path):
    """The plan runs mteb's undersampling over the training split before the first layer is scored, in the one
    process: on datasets' lazy label column (a memory-mapped split, as mteb's loaders give it) that read a row per
    label and cost 5.5 s of CPU on Banking77, every run, however many workers scored the layers (#54)."""
    rng = random.Random(0)
    rows = {"text": [f"text {i}" for i in range(600)], "label": [rng.randrange(5) for _ in range(600)]}
    Dataset.from_dict(rows).save_to_disk(tmp_path / "split")
    mapped = load_from_disk(tmp_path / "split")
    task = MockClassificationTask()
    task.dataset = DatasetDict({"train": mapped, "test": mapped.select(range(40))})
    task.data_loaded = True
    lazy = len(texts_mteb_encodes(task))  # the same count, read from the lazy column
    assert type(task.dataset["train"]) is not ListLabelDataset
    assert expected_texts(task) == (lazy, "data")
    assert type(task.dataset["train"]) is ListLabelDataset and type(task.dataset["test"]) is ListLabelDataset
