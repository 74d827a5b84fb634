"""Where the texts for representation metrics come from: WikiText (:mod:`.wikitext`), an mteb task's own evaluation
texts (label-free, so usable for per-task selection), or a file with one prompt per line. In ``metrics.csv``,
``task:<Task>`` labels the task's evaluation-split texts, ``encoded:<Task>`` every text mteb's evaluator encodes
for it (``run --task-metrics``; for classification also its training sample).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layer_mteb.common.errors import UserError
from layer_mteb.metrics.wikitext import read_wikitext
from layer_mteb.tasks.catalog import (
    data_dir_from_env,
    file_task,
    load_named_task,
    load_task_data,
    select_tasks,
)
from layer_mteb.tasks.custom import check_custom_files
from layer_mteb.tasks.task_names import check_task_names

#: label prefixes of a task's texts: its evaluation split(s), and everything its evaluator encodes
TASK_TEXTS, ENCODED_TEXTS = "task:", "encoded:"
_NOT_TEXT = ("label", "lang", "score")


@dataclass(frozen=True)
class TextSource:
    """The texts a metrics run used and how many were usable (``name`` is the ``texts`` column of ``metrics.csv``)."""

    name: str  # "wikitext", "task:<TaskName>", "encoded:<TaskName>", "file:<file name>" or "custom"
    texts: tuple[str, ...]
    task: str | None = None
    n_available: int = 0  # unique usable texts before sampling down to ``n_prompts``
    data: str | None = None  # which copy of WikiText (``metrics.wikitext.ORIGIN_*``); None for other texts


def text_sources(texts: str) -> list[str]:
    """``metrics --texts``: one source or several, comma-separated (an existing path is one, commas and all)."""
    if _is_file(texts):
        return [texts]
    sources = [source.strip() for source in texts.split(",")]
    if not all(sources):
        raise UserError(f"--texts {texts!r} has an empty source between commas")
    return sources


def _is_file(text: str) -> bool:
    """Whether ``text`` names an existing file (a long list of sources makes the file system raise, not say no)."""
    try:
        return Path(text).expanduser().is_file()
    except OSError:
        return False


def task_texts_label(task: str) -> str:
    """The label of ``task``'s own texts (its evaluation splits) in ``metrics.csv``: ``task:<task>``."""
    return f"{TASK_TEXTS}{task}"


def encoded_texts_label(task: str) -> str:
    """The label of every text mteb's evaluator encodes for ``task`` in ``metrics.csv``: ``encoded:<task>``."""
    return f"{ENCODED_TEXTS}{task}"


def task_of_label(source: object) -> str | None:
    """The task whose own texts ``source`` labels (``task:<task>`` -> ``<task>``); ``None`` for any other source."""
    return source.removeprefix(TASK_TEXTS) if isinstance(source, str) and source.startswith(TASK_TEXTS) else None


def task_of_texts_option(source: str) -> str:
    """The task named by a ``task:<TaskName>`` source; a source naming none is a :class:`UserError`."""
    task = source.removeprefix(TASK_TEXTS).strip()
    if not task:
        raise UserError("--texts task: needs a task name, e.g. task:STSBenchmark")
    return task


def check_texts(source: str, data_dir: str | Path | None = None) -> None:
    """What ``--texts`` names exists: a task mteb knows, or a file (no text is read); WikiText always has a copy (the
    packaged sample at least)."""
    if source == "wikitext":
        data_dir_from_env(data_dir)  # a --data-dir that does not exist is named here
        return
    if source.startswith(TASK_TEXTS) and file_task(task_of_texts_option(source)) is not None:  # task:FILE.yaml:TASK
        check_custom_files(s.custom for s in select_tasks(task_of_texts_option(source))[1] if s.custom is not None)
    elif source.startswith(TASK_TEXTS):
        check_task_names([task_of_texts_option(source)])
    elif not _is_file(source):
        raise UserError(f"--texts {source!r} is not 'wikitext', 'task:<TaskName>' or an existing text file")


def load_texts(
    source: str,
    *,
    tokenizer: Any = None,
    n_prompts: int = 1000,
    data_dir: str | Path | None = None,
    seed: int = 0,
    min_tokens: int = 30,
) -> TextSource:
    """Resolve ``--texts`` and sample ``n_prompts`` (seeded, in the source's order), empty texts and duplicates
    dropped; WikiText paragraphs (a local copy or the packaged sample) also drop headings and paragraphs under
    ``min_tokens`` tokens, the hub's WikiText is the authors' selection as it is (:mod:`.wikitext`)."""
    if n_prompts < 2:
        raise UserError(f"--n-prompts must be at least 2 (dataset entropy needs two texts), got {n_prompts}")
    data, selected = None, False
    if source == "wikitext":
        wikitext = read_wikitext(data_dir)
        raw, name, task, data, selected = wikitext.texts, "wikitext", None, wikitext.origin, wikitext.selected
    elif source.startswith(TASK_TEXTS):
        selection = task_of_texts_option(source)  # a task name, or FILE.yaml:TASK for a custom task
        task, raw = task_texts(selection, data_dir)
        name = task_texts_label(task)  # labelled by the task's name alone
    elif _is_file(source):
        path = Path(source).expanduser()
        raw, name, task = path.read_text(encoding="utf-8").splitlines(), f"file:{path.name}", None
    else:
        raise UserError(f"--texts {source!r} is not 'wikitext', 'task:<TaskName>' or an existing text file")
    # the authors' selection (the hub's WikiText) is kept unstripped, as their tokenizers saw it, and unfiltered
    texts = list(dict.fromkeys(t if selected else t.strip() for t in raw if t.strip()))
    if source == "wikitext" and not selected:
        texts = _long_enough([t for t in texts if not t.startswith("=")], tokenizer, min_tokens)
    if len(texts) < 2:
        raise UserError(f"--texts {source}: only {len(texts)} usable text(s) (non-empty, unique); need at least 2")
    return TextSource(name, tuple(seeded_sample(texts, n_prompts, seed)), task, len(texts), data)


def seeded_sample(texts: Sequence[str], n: int, seed: int) -> list[str]:
    """``n`` of ``texts`` drawn with ``seed``, in their order (all of them where they are no more than ``n``)."""
    if len(texts) <= n:
        return list(texts)
    return [texts[i] for i in sorted(random.Random(seed).sample(range(len(texts)), n))]


#: the agreement curves' default sample of a task's own texts: size and seed (selection reading stored curves back
#: must know a sample's size without loading a model)
DEFAULT_N, DEFAULT_SEED = 256, 0


def sample_texts(task: str, n: int = DEFAULT_N, seed: int = DEFAULT_SEED, data_dir: str | Path | None = None) -> list:
    """The first ``n`` of a ``seed``-permutation of the task's unique evaluation texts: smaller samples nest."""
    import numpy as np  # here: the command line reads this module before anything heavy loads

    if n < 2:
        raise UserError(f"agreement needs at least 2 texts, got n={n}")
    texts = load_texts(f"{TASK_TEXTS}{task}", n_prompts=1 << 62, data_dir=data_dir).texts
    order = np.random.default_rng(seed).permutation(len(texts))
    return [texts[i] for i in order[:n]]


def _long_enough(texts: list[str], tokenizer: Any, min_tokens: int) -> list[str]:
    if tokenizer is None or min_tokens <= 1:
        return texts
    ids = tokenizer(texts, truncation=True, max_length=min_tokens)["input_ids"]
    return [text for text, row in zip(texts, ids, strict=True) if len(row) >= min_tokens]


def task_texts(name: str, data_dir: str | Path | None = None) -> tuple[str, list[str]]:
    """The task's name and every text (no labels, ids) of its evaluation split(s) and subsets; ``name`` may be
    ``FILE.yaml:TASK``."""
    task = load_named_task(name, data_dir)
    from layer_mteb.tasks.state import data_parts  # here: it loads datasets, and the command line reads this module

    parts = data_parts(task)  # an aggregate task's texts are its subtasks'
    for part in parts:
        load_task_data(part)
    return task.metadata.name, [text for part in parts for text in evaluation_split_texts(part)]


def evaluation_split_texts(task) -> list[str]:
    """Every text column's texts of a loaded task's evaluation split(s) and subsets, in the data's order."""
    name, dataset = task.metadata.name, task.dataset
    # mteb's own lookup (AbsTask.evaluate): a subset's data, or the whole dataset for a single "default" subset
    parts = [
        dataset if s not in dataset and s == "default" else dataset[s]
        for s in task.hf_subsets
        if s in dataset or s == "default"
    ]
    texts = [text for part in parts for split in task.eval_splits if split in part for text in _walk(part[split])]
    if not texts:
        raise UserError(f"task {name!r} has no texts in split(s) {', '.join(task.eval_splits)}")
    return texts


def _walk(node: Any) -> Iterator[str]:
    """Strings in text columns of every ``datasets.Dataset`` below ``node`` (retrieval splits nest corpus/queries)."""
    from datasets import Dataset

    if isinstance(node, Dataset):
        for column, feature in node.features.items():
            if _is_text_column(column, feature):
                yield from _flatten(node[column])
    elif isinstance(node, Mapping):
        for value in node.values():
            yield from _walk(value)


def _is_text_column(column: str, feature: Any) -> bool:
    name = column.lower()
    if name in ("id", "ids", "_id") or name.endswith(("_id", "-id", "_ids", "-ids")) or name.startswith(_NOT_TEXT):
        return False
    while hasattr(feature, "feature"):  # Sequence / List of strings (legacy clustering)
        feature = feature.feature
    return getattr(feature, "dtype", None) in ("string", "large_string")


def _flatten(values: Sequence[Any]) -> Iterator[str]:
    for value in values:
        if isinstance(value, str):
            yield value
        elif isinstance(value, Sequence):
            yield from _flatten(value)
