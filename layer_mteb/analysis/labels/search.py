"""Retrieval and reranking from K labelled queries: each drawn query searches the task's whole corpus (reranking: its
own candidates), ranked by cosine similarity as mteb's encoder search ranks them, and the ranking is scored against
those queries' qrels with mteb's own retrieval metrics (the task's main score: ``ndcg_at_10``, ``map_at_1000``, ...).
A labelled example is one query with its relevant documents; the corpus is not a label and is always searched whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layer_mteb.tasks.mteb_compat import queries_with_positives, retrieval_metrics, retrieval_texts


@dataclass(frozen=True)
class Search:
    """A retrieval split as positions into a labelled-examples text list: ``documents`` (the corpus, with their ids
    in ``document_ids``), each query's ``qrels``, and for reranking each query's ``candidates`` (positions into
    ``documents``)."""

    document_ids: list[str]
    documents: np.ndarray
    qrels: dict[str, dict[str, int]]
    candidates: dict[str, np.ndarray] | None


def search_examples(split: dict) -> tuple[list[str], np.ndarray, np.ndarray, Search]:
    """(texts, query positions, query ids, :class:`Search`) of one split of a loaded retrieval task, the texts as
    mteb encodes them (title and text of a document, a query with its instruction) and only the queries mteb keeps
    (those with a relevant document)."""
    corpus = split["corpus"]
    queries = queries_with_positives(split["relevant_docs"], split["queries"])
    documents, asked = retrieval_texts(corpus, document=True), retrieval_texts(queries, document=False)
    texts = list(dict.fromkeys([*documents, *asked]))
    index = {text: i for i, text in enumerate(texts)}
    document_ids = [str(d) for d in corpus["id"]]
    query_ids = np.asarray([str(q) for q in queries["id"]], dtype=object)
    qrels = {str(q): {str(d): int(r) for d, r in docs.items()} for q, docs in split["relevant_docs"].items()}
    candidates = None
    if split.get("top_ranked"):
        position = {d: i for i, d in enumerate(document_ids)}
        candidates = {
            str(q): np.asarray([position[str(d)] for d in docs if str(d) in position], dtype=np.int64)
            for q, docs in split["top_ranked"].items()
        }
    search = Search(document_ids, np.asarray([index[t] for t in documents], dtype=np.int64), qrels, candidates)
    return texts, np.asarray([index[t] for t in asked], dtype=np.int64), query_ids, search


def search_score(task, search: Search, vectors: np.ndarray, queries: np.ndarray, query_ids: np.ndarray) -> float:
    """The task's main score of one layer (``vectors``: [len(texts), D]) on the queries at positions ``queries``
    (ids ``query_ids``): cosine similarity to every document (reranking: to the query's candidates), each query's
    top ``task._top_k`` documents, scored by mteb's retrieval metrics against those queries' qrels."""
    documents = _unit(vectors[search.documents])
    similarity = _unit(vectors[queries]) @ documents.T
    everything = np.arange(len(documents))
    results = {}
    for qid, row in zip(query_ids, similarity, strict=True):
        pool = everything if search.candidates is None else search.candidates.get(str(qid), everything[:0])
        top = pool[np.argsort(-row[pool], kind="stable")[: task._top_k]]
        results[str(qid)] = {search.document_ids[d]: float(row[d]) for d in top}
    qrels = {str(q): search.qrels[str(q)] for q in query_ids}
    return float(retrieval_metrics(task, results, qrels)[task.metadata.main_score])


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1, norms)
