"""Custom tasks as real mteb tasks: a subclass of the type's own ``AbsTask*`` class with its own ``TaskMetadata``,
whose ``load_data`` reads the declared files (:mod:`.custom_files`) into the shape that class's evaluator expects.

mteb then scores them with its own evaluator and main score, stores their results in its ``ResultCache`` like any
other task's, and the rest of the project (sweep, selection, labelled selection, report) treats them alike. The
dataset revision in the metadata is a fingerprint of the files' contents and the declaration, so a changed file
never reuses a stored score.

Clustering uses mteb's current ``AbsTaskClustering`` (the "v2" one, main score ``v_measure``), not the legacy class:
it takes one document per row, which is what a user's file holds, and scores the mean of ten bootstrap k-means runs
instead of one. Its default of embedding 4 % of the documents is meant for mteb's large published sets; here every
document is embedded and each bootstrap sample is as large as the file (mteb's cap of 16,384 kept).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from layer_mteb.common.errors import UserError
from layer_mteb.common.files import content_hash, text_hash
from layer_mteb.tasks.custom_files import Columns, read_custom_data
from layer_mteb.tasks.task_file import CustomTask

#: mteb's main score and category of each type, as its own tasks of that type have them
MAIN_SCORES = {
    "Classification": ("accuracy", "t2c"),
    "PairClassification": ("max_ap", "t2t"),
    "STS": ("cosine_spearman", "t2t"),
    "Clustering": ("v_measure", "t2c"),
    "Retrieval": ("ndcg_at_10", "t2t"),
    "Reranking": ("map_at_1000", "t2t"),
}


def custom_task(definition: CustomTask):
    """A new mteb task object of ``definition`` (data not loaded yet: ``load_data`` reads the files)."""
    return task_class(definition)()


def declared_in(task) -> Path | None:
    """The task file (absolute) that declared ``task``, None for an mteb task: a run records it so that later
    commands (``select --labels``) can build the task again."""
    definition = getattr(type(task), "definition", None)
    return Path(definition.source).resolve() if isinstance(definition, CustomTask) else None


def task_class(definition: CustomTask) -> type:
    """The ``AbsTask*`` subclass of ``definition``: its metadata, evaluator settings and file-reading ``load_data``."""
    from mteb.abstasks import AbsTaskClassification, AbsTaskClustering, AbsTaskPairClassification, AbsTaskRetrieval
    from mteb.abstasks.sts import AbsTaskSTS
    from mteb.abstasks.task_metadata import TaskMetadata

    bases = {
        "Classification": AbsTaskClassification,
        "PairClassification": AbsTaskPairClassification,
        "STS": AbsTaskSTS,
        "Clustering": AbsTaskClustering,
        "Retrieval": AbsTaskRetrieval,
        "Reranking": AbsTaskRetrieval,
    }
    main_score, category = MAIN_SCORES[definition.type]
    try:
        metadata = TaskMetadata(
            name=definition.name,
            description=definition.description,
            dataset={"path": str(definition.source), "revision": fingerprint(definition)},
            type=definition.type,
            category=category,
            modalities=["text"],
            eval_splits=[definition.split],
            eval_langs=[definition.language],
            main_score=main_score,
        )
        metadata._validate_metadata()  # the language code: mteb checks it only for its registered tasks
    except ValueError as err:  # pydantic's ValidationError is one
        reason = " ".join(str(err).split())
        raise UserError(f"{definition.where}: mteb rejects its metadata: {reason[:300]}") from None
    namespace: dict[str, Any] = {
        "metadata": metadata,
        "definition": definition,
        "load_data": _load_data,
        "__reduce__": _reduce,
        "__module__": __name__,
        **definition.settings,
    }
    if definition.type == "Clustering":
        namespace["max_fraction_of_documents_to_embed"] = None
    return type(_class_name(definition.name), (bases[definition.type],), namespace)


def fingerprint(definition: CustomTask) -> str:
    """What the scores depend on: every file's content and how it is read."""
    files = sorted((key, content_hash(path)) for key, path in definition.files.items())
    columns = sorted((kind, sorted(roles.items())) for kind, roles in definition.columns.items())
    settings = sorted(definition.settings.items())
    return text_hash(definition.type, definition.split, definition.language, files, columns, settings)


def _class_name(name: str) -> str:
    return re.sub(r"\W", "_", name) if name.isidentifier() is False else name


def _load_data(self, num_proc: int | None = None, *, timer: Any = None, **kwargs: Any) -> None:
    """Read the declared files into ``self.dataset`` (mteb's ``load_data`` contract: nothing when loaded)."""
    if self.data_loaded:
        return
    definition: CustomTask = self.definition
    data = read_custom_data(definition)
    if definition.retrieval:
        self.dataset = {"default": {definition.split: _retrieval_split(definition, data)}}
    else:
        self.dataset = _split_dataset(self, definition, data)
    self.data_loaded = True


def _reduce(self) -> tuple:
    """Pickle by declaration and state: the class is made at run time, so it is rebuilt on the other side."""
    return _rebuild, (self.definition,), dict(self.__dict__)


def _rebuild(definition: CustomTask):
    cls = task_class(definition)
    return cls.__new__(cls)


def _split_dataset(task, definition: CustomTask, data: dict[str, Columns]):
    """The ``DatasetDict`` of a split-based type, in mteb's column names; class names become shared integer ids."""
    from datasets import Dataset, DatasetDict

    kind = definition.type
    if kind in ("Classification", "Clustering"):
        names = sorted({str(label) for columns in data.values() for label in columns["label"]})
        ids = {name: i for i, name in enumerate(names)}
        for columns in data.values():
            columns["label"] = [ids[str(label)] for label in columns["label"]]
    if kind == "Clustering":
        documents = len(data[definition.split]["text"])
        task.max_documents_per_cluster = min(task.max_documents_per_cluster, documents)
    if kind == "STS":
        scores = [score for columns in data.values() for score in columns["score"]]
        task.min_score = definition.settings.get("min_score", min(scores))
        task.max_score = definition.settings.get("max_score", max(scores))
    names = {
        "Classification": {"text": "text", "label": "label"},
        "Clustering": {"text": "sentences", "label": "labels"},
        "PairClassification": {"text1": "sentence1", "text2": "sentence2", "label": "labels"},
        "STS": {"text1": "sentence1", "text2": "sentence2", "score": "score"},
    }[kind]
    renamed = {split: {names[role]: values for role, values in columns.items()} for split, columns in data.items()}
    return DatasetDict({split: Dataset.from_dict(columns) for split, columns in renamed.items()})


def _retrieval_split(definition: CustomTask, data: dict[str, Columns]) -> dict[str, Any]:
    """mteb 2.x's retrieval split: corpus and queries datasets, {query: {document: relevance}}, and for reranking
    the candidates of each query (every document its qrels name, relevant or not)."""
    from datasets import Dataset

    corpus = {"id": data["corpus"]["id"], "text": data["corpus"]["text"]}
    if "title" in data["corpus"]:
        corpus["title"] = data["corpus"]["title"]
    qrels = data["qrels"]
    scores = qrels.get("score") or [1] * len(qrels["query_id"])
    relevant: dict[str, dict[str, int]] = {}
    for query, document, score in zip(qrels["query_id"], qrels["corpus_id"], scores, strict=True):
        relevant.setdefault(query, {})[document] = int(score)
    candidates = {query: list(documents) for query, documents in relevant.items()}
    return {
        "corpus": Dataset.from_dict(corpus),
        "queries": Dataset.from_dict({"id": data["queries"]["id"], "text": data["queries"]["text"]}),
        "relevant_docs": relevant,
        "top_ranked": candidates if definition.type == "Reranking" else None,
    }
