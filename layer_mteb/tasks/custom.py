"""Custom tasks as real mteb tasks: a subclass of the type's ``AbsTask*`` class with its own ``TaskMetadata``, whose
``load_data`` reads the declared files into the shape its evaluator expects, so mteb scores and stores them like any
other task. The metadata's dataset revision fingerprints the files and declaration: a changed file reuses no score.

Clustering uses mteb's v2 ``AbsTaskClustering`` (one document per row, as a user's file holds), embedding every
document rather than mteb's 4 % meant for its large sets. Files are read in plain Python (mteb and datasets are
imported inside), so the command line checks them before torch loads; each mistake is one line naming file and row.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from layer_mteb.common.errors import UserError, first_line
from layer_mteb.common.files import content_hash, text_hash
from layer_mteb.tasks.local_data import labels_to_ids
from layer_mteb.tasks.task_file import CustomTask


def declared_in(task) -> Path | None:
    """The task file (absolute) that declared ``task``, None for an mteb task: later commands rebuild it from there."""
    definition = getattr(type(task), "definition", None)
    return Path(definition.source).resolve() if isinstance(definition, CustomTask) else None


def task_class(definition: CustomTask) -> type:
    """The ``AbsTask*`` subclass of ``definition``: its metadata, evaluator settings and file-reading ``load_data``."""
    from mteb.abstasks.task_metadata import TaskMetadata

    declared = definition.type_row.custom
    try:
        metadata = TaskMetadata(
            name=definition.name,
            description=definition.description,
            dataset={"path": str(definition.source), "revision": fingerprint(definition)},
            type=definition.type,
            category=declared.category,
            modalities=["text"],
            eval_splits=[definition.split],
            eval_langs=[definition.language],
            main_score=declared.main_score,
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
        **declared.attributes,
        **definition.settings,
    }
    return type(re.sub(r"\W", "_", definition.name), (definition.type_row.mteb_class(),), namespace)


def fingerprint(definition: CustomTask) -> str:
    """What the scores depend on: every file's content and how it is read."""
    files = sorted((key, content_hash(path)) for key, path in definition.files.items())
    columns = sorted((kind, sorted(roles.items())) for kind, roles in definition.columns.items())
    settings = sorted(definition.settings.items())
    return text_hash(definition.type, definition.split, definition.language, files, columns, settings)


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
    """The ``DatasetDict`` of a split-based type, in mteb's column names; class names become shared integer ids, and
    the settings the data decides are set on ``task`` (those the task file gives kept)."""
    from datasets import Dataset, DatasetDict

    row, declared = definition.type_row, definition.type_row.custom
    if "label" in row.columns and not declared.binary_labels:
        labels_to_ids(data)
    if declared.from_data is not None:
        for name, value in declared.from_data(task, definition.split, data).items():
            setattr(task, name, definition.settings.get(name, value))
    names = {role: column for role, (_, column) in row.columns.items()}
    renamed = {split: {names[role]: values for role, values in columns.items()} for split, columns in data.items()}
    return DatasetDict({split: Dataset.from_dict(columns) for split, columns in renamed.items()})


def _retrieval_split(definition: CustomTask, data: dict[str, Columns]) -> dict[str, Any]:
    """mteb 2.x's retrieval split: corpus, queries, {query: {document: relevance}}, and for reranking each query's
    candidates (every document its qrels name)."""
    from datasets import Dataset

    qrels = data["qrels"]
    scores = qrels.get("score") or [1] * len(qrels["query_id"])
    relevant: dict[str, dict[str, int]] = {}
    for query, document, score in zip(qrels["query_id"], qrels["corpus_id"], scores, strict=True):
        relevant.setdefault(query, {})[document] = int(score)
    candidates = {query: list(documents) for query, documents in relevant.items()}
    return {
        "corpus": Dataset.from_dict(data["corpus"]),  # id, text and the title where one is named, as read
        "queries": Dataset.from_dict(data["queries"]),
        "relevant_docs": relevant,
        "top_ranked": candidates if definition.type_row.ranks_candidates else None,
    }


#: file suffixes read, by how
SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson", ".parquet")
Columns = dict[str, list[Any]]


def read_custom_data(task: CustomTask) -> dict[str, Columns]:
    """{split or retrieval part: {role: values}}, every value checked for what the task's type needs."""
    data = {key: _read_checked(task, key, path) for key, path in task.files.items()}
    if task.retrieval:
        _check_qrels(task, data)
    else:  # a classifier needs two classes, a clustering two clusters, a correlation scores that vary
        role, what = task.type_row.custom.varies
        fitted = "train" if task.type_row.fits_on_train else task.split
        distinct = sorted(set(map(str, data[fitted][role])))
        if len(distinct) < 2:
            raise UserError(
                f"{task.files[fitted]}: the {role} column of custom task {task.name!r} holds one {what} only "
                f"({distinct[0]!r}); a {task.type} task needs at least two"
            )
    return data


def check_custom_files(tasks: Iterable[CustomTask]) -> None:
    """Read and check every file of ``tasks`` (the command line's early check)."""
    for task in tasks:
        read_custom_data(task)


def read_rows(path: Path, what: str = "this file") -> list[dict[str, Any]]:
    """The rows of one CSV/TSV (with a header), JSONL or Parquet file; ``what`` names its use when it is missing."""
    if not path.is_file():
        raise UserError(f"{path}: no such file, for {what}; paths are relative to the task file's folder")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise UserError(f"{path}: cannot read {suffix or 'a file without suffix'}; use {', '.join(SUFFIXES)}")
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
        with path.open(encoding="utf-8-sig", newline="") as handle:  # -sig: a spreadsheet's byte-order mark
            if suffix in (".csv", ".tsv"):
                return list(csv.DictReader(handle, delimiter="\t" if suffix == ".tsv" else ","))
            return [_json_object(path, n, line) for n, line in enumerate(handle, 1) if line.strip()]
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as err:
        raise UserError(f"{path}: unreadable ({first_line(err)})") from None


def _json_object(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        raise UserError(f"{path}, line {number}: not valid JSON: {line[:60]!r}") from None
    if not isinstance(row, dict):
        raise UserError(f"{path}, line {number}: each line must be a JSON object with the columns, got {line[:60]!r}")
    return row


def _read_checked(task: CustomTask, key: str, path: Path) -> Columns:
    """One file's rows as {role: values}; which checks apply follows from the role's name."""
    what = f"the {key!r} split" if not task.retrieval else f"the {key}"
    rows = read_rows(path, f"{what} of custom task {task.name!r} in {task.source}")
    if not rows:
        raise UserError(f"{path}: {what} of custom task {task.name!r} is empty; it needs at least one row")
    have = list(rows[0])
    columns: Columns = {}
    for role, column in task.columns[task.file_kind(key)].items():
        optional = task.retrieval and (key, role) == ("qrels", "score")  # a qrels file may list relevant pairs only
        if column is None or (column not in have and optional):
            continue
        if column not in have:
            hint = f"set columns: {{{role}: <column>}}" if not task.retrieval else f"set columns: {{{key}: ...}}"
            raise UserError(
                f"{path}: no column {column!r} ({role}) for custom task {task.name!r}; "
                f"columns are {', '.join(map(repr, have))}; {hint}"
            )
        columns[role] = [_value(task, path, role, column, n, row.get(column)) for n, row in enumerate(rows, 1)]
    return columns


def _value(task: CustomTask, path: Path, role: str, column: str, row: int, value: Any) -> Any:
    """One cell, checked and converted for its role: text, label, score or id."""
    where = f"{path}, row {row}: column {column!r}"
    if role in ("text", "text1", "text2", "title"):
        if not isinstance(value, str):
            kind = type(value).__name__
            raise UserError(f"{where} holds {value!r} ({kind}), not text; every {role} must be a string")
        return value
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        raise UserError(f"{where} is empty; every row needs a {role}")
    if role == "score":
        return _number(task, where, value)
    if role == "label" and task.type_row.custom.binary_labels:
        if str(value).strip() not in ("0", "1"):
            raise UserError(f"{where} holds {value!r}; pair labels must be 0 or 1")
        return int(str(value).strip())
    # what is left is an id or a class name: compared as text
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise UserError(f"{where} holds {value!r} ({type(value).__name__}); use text or whole numbers")
    return str(value)


def _number(task: CustomTask, where: str, value: Any) -> float | int:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise UserError(f"{where} holds {value!r}, not a number; every score must be numeric")
    if task.retrieval:
        if number != int(number):
            raise UserError(f"{where} holds {value!r}; relevance scores must be whole numbers")
        return int(number)
    return number


def _check_qrels(task: CustomTask, data: dict[str, Columns]) -> None:
    """Unique ids; every qrels row names a known query and document; some query has a relevant document."""
    for part in ("corpus", "queries"):
        twice = [i for i, count in Counter(data[part]["id"]).items() if count > 1]
        if twice:
            raise UserError(f"{task.files[part]}: id {twice[0]!r} is given twice; ids must be unique")
    qrels = data["qrels"]
    for role, part in (("query_id", "queries"), ("corpus_id", "corpus")):
        known = set(data[part]["id"])
        unknown = [i for i in dict.fromkeys(qrels[role]) if i not in known]
        if unknown:
            raise UserError(
                f"{task.files['qrels']}: {len(unknown)} {part} id(s) not in {task.files[part].name} "
                f"(e.g. {unknown[0]!r}); every qrels row must name a known query and document"
            )
    if not any(score > 0 for score in qrels.get("score", [1])):
        raise UserError(f"{task.files['qrels']}: no pair has a score above 0; mark the relevant documents")
