"""Every task type the paper's 32 tasks and MTEB(eng, v2) use, through the sweep and ``LayerEncoder``, on mteb's own
mock tasks: each layer's score equals ``mteb.evaluate`` of a plain encoder that computes the same vectors directly,
one text at a time.
"""

from __future__ import annotations

import warnings

import mteb
import numpy as np
import pytest
import torch
from conftest import direct_vectors, tiny_model_of_depth
from mteb.abstasks import (
    AbsTaskClassification,
    AbsTaskClustering,
    AbsTaskClusteringLegacy,
    AbsTaskPairClassification,
    AbsTaskRetrieval,
    AbsTaskSTS,
    AbsTaskSummarization,
)
from mteb.mocks.mock_tasks.classification import MockClassificationTask, MockMultilingualClassificationTask
from mteb.mocks.mock_tasks.clustering import LegacyMockClusteringFastTask, MockClusteringTask
from mteb.mocks.mock_tasks.pair_classification import MockPairClassificationTask
from mteb.mocks.mock_tasks.reranking import MockRerankingTask
from mteb.mocks.mock_tasks.retrieval import MockRetrievalTask
from mteb.mocks.mock_tasks.sts import MockMultilingualSTSTask, MockSTSTask
from mteb.mocks.mock_tasks.summarization import MockSummarizationTask
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from threadpoolctl import threadpool_limits

from layer_mteb.common.config import EncodeConfig
from layer_mteb.evaluation.sweep import sweep
from layer_mteb.metrics.texts import evaluation_split_texts


class HierarchicalMockClustering(LegacyMockClusteringFastTask):
    """v2 clustering with two levels of labels, as ArXivHierarchicalClustering* of MTEB(eng, v2) score: mteb's
    clustering evaluator scores each level and averages them."""

    max_document_to_embed = 18
    max_documents_per_cluster = 18

    def load_data(self, num_proc: int | None = None, **kwargs) -> None:
        from datasets import Dataset, DatasetDict

        sentences = [f"{topic} sentence number {i}" for topic in ("physics", "biology", "music") for i in range(6)]
        labels = [[topic, f"{topic}.{i % 2}"] for topic in ("physics", "biology", "music") for i in range(6)]
        self.dataset = DatasetDict({"test": Dataset.from_dict({"sentences": sentences, "labels": labels})})
        self.data_loaded = True


#: one mock task per task type of the 32 paper tasks and of MTEB(eng, v2) (mteb runs reranking through its retrieval
#: evaluator; MTEB(eng, v2)'s hard-negative retrieval tasks are retrieval tasks with a smaller corpus)
TASK_TYPES = {
    "classification": MockClassificationTask,
    "multilingual classification": MockMultilingualClassificationTask,
    "pair classification": MockPairClassificationTask,
    "STS": MockSTSTask,
    "legacy clustering": MockClusteringTask,
    "v2 clustering": LegacyMockClusteringFastTask,
    "reranking": MockRerankingTask,
    "retrieval": MockRetrievalTask,
    "summarization": MockSummarizationTask,
    "multilingual STS": MockMultilingualSTSTask,
    "hierarchical clustering": HierarchicalMockClustering,
}
CONFIG = EncodeConfig(batch_size=4)


@pytest.fixture(scope="module", params=["gpt2", pytest.param("bert", marks=pytest.mark.slow)])
def model(request, bert_tokenizer):
    return tiny_model_of_depth(request.param, bert_tokenizer, 3)  # 4 layers: first, middle, last differ


@pytest.fixture(autouse=True)
def _one_thread_evaluators():
    """k-means on 20 points spends seconds spinning BLAS/OpenMP threads on a loaded 2-core machine; one is enough."""
    with threadpool_limits(limits=1):
        yield


class DirectEncoder(AbsEncoder):
    """The definition of a layer's vector, independent of the cache: each text alone, no padding, no batching."""

    def __init__(self, loaded, layer: int):
        self.loaded, self.layer = loaded, layer
        self.mteb_model_meta = ModelMeta.create_empty(
            {"name": f"direct/layer-{layer}", "similarity_fn_name": ScoringFunction.COSINE, "framework": ["PyTorch"]}
        )

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        texts = [text for batch in inputs for text in batch["text"]]
        rows = [_direct(self.loaded, text)[self.layer] for text in texts]
        return torch.stack(rows).numpy().astype(np.float32)


_DIRECT: dict[tuple[int, str], torch.Tensor] = {}


def _direct(loaded, text: str) -> torch.Tensor:
    """All layers of one text, computed once per (model, text): the tests ask for each layer separately."""
    key = (id(loaded), text)
    if key not in _DIRECT:
        _DIRECT[key] = direct_vectors(loaded, text, CONFIG.readout, CONFIG.pooling)
    return _DIRECT[key]


def evaluate_alone(task_class, loaded, layer: int) -> dict[tuple[str, str], float]:
    """{(split, subset): main score} of a fresh task object under ``mteb.evaluate`` with the direct encoder."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = mteb.evaluate(DirectEncoder(loaded, layer), task_class(), cache=None, show_progress_bar=False)
    task_result = result.task_results[0]
    return {
        (split, scores["hf_subset"]): scores["main_score"]
        for split, subsets in task_result.scores.items()
        for scores in subsets
    }


@pytest.mark.parametrize("task_type", list(TASK_TYPES))
def test_every_layers_score_is_mtebs_score_of_the_same_vectors(model, task_type):
    task_class = TASK_TYPES[task_type]
    frame = sweep(model, [task_class()], layers="all", config=CONFIG, vector_cache=False, progress=False)
    assert sorted(frame["layer"].unique()) == list(range(model.n_layers + 1)) == [0, 1, 2, 3]
    for layer in range(model.n_layers + 1):
        expected = evaluate_alone(task_class, model, layer)
        rows = frame[frame["layer"] == layer]
        got = {(r.split, r.subset): r.main_score for r in rows.itertuples()}
        assert got.keys() == expected.keys()
        for key, score in expected.items():
            # padded batches vs one text at a time: vectors agree to ~1e-7, so scores to float summation order
            assert got[key] == pytest.approx(score, abs=1e-6), (task_type, layer, key)


def test_the_mock_tasks_are_the_task_types_the_paper_uses():
    """Guard: the mock classes still are the mteb task types (and evaluators) the 32 tasks run through."""
    bases = {
        "classification": AbsTaskClassification,
        "multilingual classification": AbsTaskClassification,
        "pair classification": AbsTaskPairClassification,
        "STS": AbsTaskSTS,
        "legacy clustering": AbsTaskClusteringLegacy,
        "v2 clustering": AbsTaskClustering,
        "reranking": AbsTaskRetrieval,
        "retrieval": AbsTaskRetrieval,
        "summarization": AbsTaskSummarization,
        "multilingual STS": AbsTaskSTS,
        "hierarchical clustering": AbsTaskClustering,
    }
    for task_type, task_class in TASK_TYPES.items():
        assert issubclass(task_class, bases[task_type]), task_type
    assert MockRerankingTask.metadata.type == "Reranking"
    assert MockClassificationTask().metadata.is_multilingual is False
    assert MockMultilingualClassificationTask().metadata.is_multilingual is True
    assert len(MockMultilingualSTSTask().metadata.eval_langs) > 1
    assert MockSummarizationTask.metadata.type == "Summarization"


def test_metrics_text_walk_on_retrieval_data_gives_queries_then_corpus_column_by_column():
    task = MockRetrievalTask()  # splits "val" and "test" under the single "default" subset
    task.load_data()
    queries = ["This is a test sentence", "This is another test sentence"]
    corpus = ["This is a positive sentence", "This is another positive sentence", "Title of d1", "Title of d2"]
    assert evaluation_split_texts(task) == (queries + corpus) * 2

    reranking = MockRerankingTask()  # top_ranked (query -> document ids) holds no texts
    reranking.load_data()
    assert evaluation_split_texts(reranking) == queries + corpus
