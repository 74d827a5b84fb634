"""The one table of task types (:data:`TASK_TYPES`): one row per mteb text task type the project runs, holding what
every stage needs of it, so that a type is added or changed in one place. mteb's unit of extension is the task type;
a row says which ``AbsTask*`` classes its tasks are, which texts its evaluator encodes (read ahead from the loaded
data), whether that evaluator also fits on the train split, the columns a local copy and a custom task file hold, the
main score a custom task of the type is given, whether a labelled pick scores it, and which studied type's rule
``auto`` lends it.

A task object finds its row by class (:func:`task_type_of`), not by ``metadata.type``: a multilabel classification
task may call itself ``Classification``, and regression tasks subclass classification. Aggregate tasks have no row:
they hold no data, their subtasks do. Everything here is plain Python (mteb and datasets are imported inside the text
walks), so the command line reads the table before anything heavy loads; ``tests/tasks/test_task_type_table.py``
iterates it against mteb's registry, so a type mteb adds fails there as one row.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from layer_mteb.tasks.mteb_compat import (
    multilabel_eval_rows,
    multilabel_samples,
    queries_with_positives,
    retrieval_texts,
    undersample,
)

#: (task metadata, prompt type) -> the prompt put before a text of that type ('' for none)
Prompter = Callable[[Any, Any], str]
#: (task with its data loaded, prompter) -> the texts its evaluator encodes, or None when not known ahead
TextWalk = Callable[[Any, Prompter], "Iterable[object] | None"]
#: the file kind of a split-based custom task (one file per split); retrieval's kinds are its three parts
ROWS = "rows"
#: the part of a retrieval task each of its three files holds, with what its columns are for (role -> default
#: column); ``title`` is read only when named, and without a qrels ``score`` every pair is relevant
RETRIEVAL_ROLES: Mapping[str, Mapping[str, str | None]] = MappingProxyType(
    {
        "corpus": {"id": "id", "text": "text", "title": None},
        "queries": {"id": "id", "text": "text"},
        "qrels": {"query_id": "query-id", "corpus_id": "corpus-id", "score": "score"},
    }
)
RETRIEVAL_PARTS = tuple(RETRIEVAL_ROLES)


def _splits(task) -> Iterator[tuple[str, object]]:
    """(split, data) for every subset and evaluation split mteb's ``evaluate`` visits."""
    subsets = task.hf_subsets if task.hf_subsets is not None else list(task.dataset)
    for split in task.eval_splits:
        for subset in subsets:
            data = task.dataset if subset not in task.dataset and subset == "default" else task.dataset[subset]
            yield split, data


def _prefixed(prompt: str, texts: Iterable[object]) -> Iterator[object]:
    """``texts`` with ``prompt`` before each text (an image or other input passes as it is)."""
    return (prompt + t if isinstance(t, str) else t for t in texts)


def _columns(task, columns, prompt: Prompter, *, v1_rows: bool = False) -> Iterator[object]:
    """The texts of a task's two text ``columns``, the first encoded as its ``input1_prompt_type``, the second as
    its ``input2_prompt_type`` (STS and pair classification alike)."""
    from datasets import Dataset

    kinds = (task.input1_prompt_type, task.input2_prompt_type)
    prefixes = [prompt(task.metadata, kind) for kind in kinds]  # each column is encoded as its own prompt type
    for split, data in _splits(task):
        rows = data[split]
        if v1_rows and len(rows) == 1:  # mteb's v1 layout: all pairs in one row (see AbsTaskPairClassification)
            rows = Dataset.from_dict(rows[0])
        for column, prefix in zip(columns, prefixes, strict=True):
            yield from _prefixed(prefix, rows[column])


def _sts_texts(task, prompt: Prompter) -> Iterable[object] | None:
    columns = task.column_names
    return _columns(task, columns, prompt) if all(isinstance(c, str) for c in columns) else None


def _pair_texts(task, prompt: Prompter) -> Iterable[object] | None:
    columns = (task.input1_column_name, task.input2_column_name)
    return _columns(task, columns, prompt, v1_rows=True) if all(isinstance(c, str) for c in columns) else None


def _classification_texts(task, prompt: Prompter) -> Iterable[object] | None:
    """The undersampled training texts and the evaluation texts (regression's evaluator reads the same); a
    cross-validated task's folds are drawn inside mteb, so not known ahead."""
    if not isinstance(task.input_column_name, str) or task.is_cross_validation:
        return None
    return _prefixed(prompt(task.metadata, None), _undersampled_texts(task))


def _undersampled_texts(task) -> Iterator[str]:
    for split, data in _splits(task):
        train = data[task.train_split]
        sample, selected = None, set()  # the same undersampling mteb runs
        for experiment in range(task.n_experiments):
            sample, picked = undersample(task, train, experiment, sample)
            selected.update(picked)
        yield from train.select(sorted(selected))[task.input_column_name]
        yield from data[split][task.input_column_name]


def _multilabel_texts(task, prompt: Prompter) -> Iterable[object] | None:
    """The training samples and evaluation rows mteb's multilabel evaluator encodes, in its order; the task's
    ``np_rng`` they are drawn from is put back."""
    if not isinstance(task.input_column_name, str):
        return None
    saved = copy.deepcopy(task.np_rng)
    texts: list[str] = []
    try:
        for split, data in _splits(task):
            train = data[task.train_split]
            labels = train[task.label_column_name]
            picked: set[int] = set()
            for _ in range(task.n_experiments):
                picked.update(multilabel_samples(task, labels))
            texts += train.select(sorted(picked))[task.input_column_name]
            texts += multilabel_eval_rows(task, data[split], split)[task.input_column_name]
    finally:
        task.np_rng = saved
    return _prefixed(prompt(task.metadata, None), texts)


def _retrieval_texts(task, prompt: Prompter) -> Iterator[object]:
    from mteb.types import PromptType

    document, query = prompt(task.metadata, PromptType.document), prompt(task.metadata, PromptType.query)
    for split, data in _splits(task):
        rows = data[split]
        yield from _prefixed(document, retrieval_texts(rows["corpus"], document=True))
        queries = queries_with_positives(rows["relevant_docs"], rows["queries"])
        yield from _prefixed(query, retrieval_texts(queries, document=False))


def _score_range(task, split: str, data: Mapping[str, Mapping[str, list]]) -> dict[str, Any]:
    """STS: mteb normalises gold scores by the task's range, so a custom task's is that of its files."""
    scores = [score for columns in data.values() for score in columns["score"]]
    return {"min_score": min(scores), "max_score": max(scores)}


def _documents_per_cluster(task, split: str, data: Mapping[str, Mapping[str, list]]) -> dict[str, Any]:
    """Clustering: each of mteb's bootstrap samples draws ``max_documents_per_cluster`` documents (with replacement),
    sized for its large sets; a custom task's draws no more than its split holds."""
    return {"max_documents_per_cluster": min(task.max_documents_per_cluster, len(data[split]["text"]))}


#: (custom task, its evaluation split, {split: {role: values}} as read) -> evaluator settings the data decides
DataSettings = Callable[[Any, str, Mapping[str, Mapping[str, list]]], dict[str, Any]]


@dataclass(frozen=True)
class CustomDeclaration:
    """What a custom task of the type is made with (``custom:`` in a task file): mteb's main score and category as
    its own tasks of that type have them, the evaluator settings a task may change (mteb's class attributes of
    the same name, with their kind), and ``varies``: the role that must hold two values or more in the split a task
    is fitted or scored on, and what one value is called (a split-based type's files are checked for it).

    ``attributes``: class attributes every custom task of the type gets; ``from_data``: settings read from its
    files once loaded (a task's own ``settings`` win); ``binary_labels``: its labels are 0 or 1 as written, not
    class names made shared integer ids."""

    main_score: str
    category: str
    settings: Mapping[str, type] = field(default_factory=dict)
    varies: tuple[str, str] = ("label", "class")
    attributes: Mapping[str, Any] = field(default_factory=dict)
    from_data: DataSettings | None = None
    binary_labels: bool = False


@dataclass(frozen=True)
class TaskType:
    """One mteb task type. ``classes``: the ``mteb.abstasks`` classes its tasks are instances of; ``texts``: the texts
    its evaluator encodes, read from the loaded data (None: not known ahead, they fill the cache as mteb asks);
    ``fits_on_train``: its evaluator also encodes the train split; ``columns``: role -> (the column a file holds,
    mteb's column) of a split's file, for local copies and custom tasks (empty: neither reads split files);
    ``sets_in_one_row``: the class of ``classes`` whose split holds one row per set (legacy clustering);
    ``custom``: how a custom task of the type is declared (None: it cannot be); ``searched``: a custom task of it has
    retrieval's three files; ``ranks_candidates``: its queries rank given candidates (reranking's ``top_ranked``);
    ``labelled``: a labelled pick scores it (its scorer is in ``analysis/labels/labelled.py``); ``analogue``: the
    studied type whose ``auto`` rule it takes when the policy has none of its own."""

    name: str
    classes: tuple[str, ...]
    texts: TextWalk | None = None
    fits_on_train: bool = False
    columns: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    sets_in_one_row: str | None = None
    custom: CustomDeclaration | None = None
    searched: bool = False
    ranks_candidates: bool = False
    labelled: bool = False
    analogue: str | None = None

    @property
    def file_roles(self) -> Mapping[str, Mapping[str, str | None]]:
        """A custom task's files: file kind -> {role: default column} (``rows`` for a split's file)."""
        if self.searched:
            return RETRIEVAL_ROLES
        return {ROWS: {role: file for role, (file, _) in self.columns.items()}}

    def mteb_class(self) -> type:
        """The first of ``classes``, imported (what a custom task of the type subclasses)."""
        import mteb.abstasks

        return getattr(mteb.abstasks, self.classes[0])


_PAIR = {"text1": ("sentence1", "sentence1"), "text2": ("sentence2", "sentence2")}


def _retrieval(name: str, **row: Any) -> TaskType:
    """A type whose tasks are ``AbsTaskRetrieval``s: mteb's retrieval evaluator, and the texts of its walk."""
    return TaskType(name, ("AbsTaskRetrieval",), _retrieval_texts, **row)


#: mteb's ``TaskMetadata.type`` -> its row. Add a row here to support a new type.
TASK_TYPES: dict[str, TaskType] = {
    kind.name: kind
    for kind in (
        TaskType(
            "STS",
            ("AbsTaskSTS",),
            _sts_texts,
            columns={**_PAIR, "score": ("score", "score")},
            custom=CustomDeclaration(
                "cosine_spearman",
                "t2t",
                {"min_score": float, "max_score": float},
                ("score", "score value"),
                from_data=_score_range,
            ),
            labelled=True,
        ),
        TaskType(
            "PairClassification",
            ("AbsTaskPairClassification",),
            _pair_texts,
            columns={**_PAIR, "label": ("label", "labels")},
            custom=CustomDeclaration("max_ap", "t2t", binary_labels=True),
            labelled=True,
        ),
        TaskType(
            "Classification",
            ("AbsTaskClassification",),
            _classification_texts,
            fits_on_train=True,
            columns={"text": ("text", "text"), "label": ("label", "label")},
            custom=CustomDeclaration("accuracy", "t2c", {"samples_per_label": int, "n_experiments": int}),
            labelled=True,
        ),
        # a subclass of classification whose labels are lists: no single-label score, so no labelled pick
        TaskType(
            "MultilabelClassification", ("AbsTaskMultilabelClassification",), _multilabel_texts, fits_on_train=True
        ),
        # a subclass of classification: the same undersampled training texts, continuous labels
        TaskType("Regression", ("AbsTaskRegression",), _classification_texts, fits_on_train=True),
        TaskType("ZeroShotClassification", ("AbsTaskZeroShotClassification",)),
        # v2 clustering samples its documents from the task's generator as it evaluates: not known ahead
        TaskType(
            "Clustering",
            ("AbsTaskClustering", "AbsTaskClusteringLegacy"),
            columns={"text": ("text", "sentences"), "label": ("label", "labels")},
            sets_in_one_row="AbsTaskClusteringLegacy",
            # every document embedded, not mteb's 4 % meant for its large sets
            custom=CustomDeclaration(
                "v_measure",
                "t2c",
                varies=("label", "cluster"),
                attributes={"max_fraction_of_documents_to_embed": None},
                from_data=_documents_per_cluster,
            ),
            labelled=True,
        ),
        # the unstudied types below take a studied type's rule: the type mteb scores with the same evaluator and
        # score. Reranking and Retrieval both go through mteb's retrieval evaluator (queries ranked against
        # documents by cosine similarity; Reranking over given candidates); Summarization is, like STS, the
        # Spearman correlation of cosine similarities with human judgements. An analogy of the measurement, not
        # evidence about layers: ``describe`` says so, and a policy trained on scores of these types uses its own
        # rule for them.
        _retrieval(
            "Retrieval",
            custom=CustomDeclaration("ndcg_at_10", "t2t"),
            searched=True,
            labelled=True,
            analogue="Reranking",
        ),
        _retrieval(
            "Reranking",
            custom=CustomDeclaration("map_at_1000", "t2t"),
            searched=True,
            ranks_candidates=True,
            labelled=True,
        ),
        _retrieval("InstructionRetrieval"),
        _retrieval("InstructionReranking"),
        _retrieval("Any2AnyRetrieval"),
        TaskType("Summarization", ("AbsTaskSummarization",), analogue="STS"),
        TaskType("BitextMining", ("AbsTaskBitextMining",)),
    )
}


def task_type_of(task) -> TaskType | None:
    """The row of a task object: that of its most specific mteb class, among rows of one class the one its metadata
    names (else the first); None for an aggregate or a task of no known class."""
    for cls in type(task).__mro__:
        if not cls.__module__.startswith("mteb."):
            continue
        rows = [kind for kind in TASK_TYPES.values() if cls.__name__ in kind.classes]
        if rows:
            named = getattr(getattr(task, "metadata", None), "type", None)
            return next((kind for kind in rows if kind.name == named), rows[0])
    return None


def is_instance_of(task, class_name: str) -> bool:
    """Whether ``task`` is an instance of the mteb class named ``class_name`` (no import of mteb)."""
    return any(cls.__name__ == class_name and cls.__module__.startswith("mteb.") for cls in type(task).__mro__)
