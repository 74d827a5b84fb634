"""Lexical references for agreement: the geometry of the sampled texts' own words, when no trained sentence encoder
may be used beside the model under test (issue #39, docs/agreement.md).

A lexical reference is fitted on the sample it is compared on and on nothing else: no parameter is learned from any
model, so it works in any language whose words scikit-learn's default tokenizer splits. Three kinds, each built from
scikit-learn's own vectorisers and SVD (no tokenizer or decomposition of ours):

- ``tfidf``: ``TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)``, rows L2-normalised (scikit-learn's default);
- ``tfidf-lsa``: that TF-IDF reduced by ``TruncatedSVD(n_components=min(100, n_terms - 1), random_state=seed)``
  (latent semantic analysis: neighbours by shared topics rather than shared words). The SVD runs on one BLAS
  thread: where the dimension nears the sample's rank (64 texts at 100 dimensions, 256 at 300) the randomized SVD's
  vectors follow the BLAS's rounding, which changes with the number of threads (one thread: the same vectors on
  every machine setting), and on a busy machine two BLAS threads made it ten times slower (4.5 s against 0.2 s);
- ``bm25``: ``CountVectorizer(ngram_range=(1, 2))`` counts weighted by Okapi BM25 (k1 = 1.2, b = 0.75, the idf
  ``log(1 + (N - df + 0.5) / (df + 0.5))``): saturating term frequency and document-length normalisation.

These settings were fixed before the study and not tuned on it; a name may vary them for a sensitivity study:
``tfidf:ngrams=1`` (unigrams), ``tfidf-lsa:dims=50``, ``bm25:k1=2`` or ``bm25:b=0`` (the BM25 weighting). The
name with its settings, and scikit-learn's version, is the reference's ``revision`` in ``agreement.csv``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from layer_mteb.common.errors import UserError

#: the lexical reference kinds, in the order tables show them; ``tfidf-lsa`` is the one the study weighed for ``auto``
LEXICAL_KINDS = ("tfidf", "tfidf-lsa", "bm25")
AUTO_LEXICAL = "tfidf-lsa"
DEFAULT_NGRAMS, DEFAULT_DIMS = 2, 100
BM25_K1, BM25_B = 1.2, 0.75


@dataclass(frozen=True)
class LexicalSpec:
    """One lexical reference: its kind, the longest word n-gram, the LSA dimension (``tfidf-lsa`` only) and the
    BM25 weighting's term-frequency saturation ``k1`` and length normalisation ``b`` (``bm25`` only)."""

    kind: str
    ngrams: int = DEFAULT_NGRAMS
    dims: int = DEFAULT_DIMS
    k1: float = BM25_K1
    b: float = BM25_B

    @property
    def name(self) -> str:
        """How ``agreement.csv`` names it: the kind, then only the settings that differ from the defaults."""
        options = [f"ngrams={self.ngrams}"] if self.ngrams != DEFAULT_NGRAMS else []
        options += [f"dims={self.dims}"] if self.kind == "tfidf-lsa" and self.dims != DEFAULT_DIMS else []
        options += [f"k1={self.k1:g}"] if self.kind == "bm25" and self.k1 != BM25_K1 else []
        options += [f"b={self.b:g}"] if self.kind == "bm25" and self.b != BM25_B else []
        return ":".join([self.kind, *options])

    @property
    def revision(self) -> str:
        """Every setting spelled out, with scikit-learn's version: what made the vectors."""
        words = f"word 1-{self.ngrams}-grams"
        what = {
            "tfidf": f"TfidfVectorizer {words} sublinear_tf",
            "tfidf-lsa": f"TfidfVectorizer {words} sublinear_tf + TruncatedSVD min({self.dims} n_terms-1) seeded",
            "bm25": f"CountVectorizer {words} + BM25 k1={self.k1:g} b={self.b:g}",
        }[self.kind]
        return f"scikit-learn-{metadata.version('scikit-learn')} {what}"


def is_lexical(name: str | None) -> bool:
    """Whether ``name`` names a lexical reference (``tfidf``, ``tfidf-lsa:dims=50``, ...) rather than an encoder."""
    return name is not None and name.split(":", 1)[0] in LEXICAL_KINDS and not Path(name).expanduser().is_dir()


def parse_lexical(name: str) -> LexicalSpec:
    """``kind[:ngrams=N][:dims=D][:k1=X][:b=Y]`` -> :class:`LexicalSpec`; anything else is one :class:`UserError`
    line."""
    kind, *options = name.split(":")
    if kind not in LEXICAL_KINDS:
        raise UserError(f"--agreement-with {name!r}: a lexical reference is one of {', '.join(LEXICAL_KINDS)}")
    values: dict[str, float] = {}
    for option in options:
        key, _, value = option.partition("=")
        if key in ("ngrams", "dims") and value.isdigit() and int(value) >= 1:
            values[key] = int(value)
        elif key in ("k1", "b") and _number(value) is not None and (key == "k1" or _number(value) <= 1):
            values[key] = _number(value)  # type: ignore[assignment]
        else:
            raise UserError(
                f"--agreement-with {name!r}: options are ngrams=N, (tfidf-lsa) dims=D, positive integers, and (bm25) "
                "k1=X >= 0 and b=Y in 0..1"
            )
    only = {"dims": "tfidf-lsa", "k1": "bm25", "b": "bm25"}
    for key in values.keys() & only.keys():
        if kind != only[key]:
            raise UserError(f"--agreement-with {name!r}: {key}= applies to {only[key]} only")
    return LexicalSpec(kind, **values)  # type: ignore[arg-type]


def _number(value: str) -> float | None:
    """``value`` as a finite number >= 0, else None."""
    try:
        number = float(value)
    except ValueError:
        return None
    return number if np.isfinite(number) and number >= 0 else None


def lexical_vectors(texts: Sequence[str], spec: LexicalSpec, seed: int = 0) -> np.ndarray:
    """[n, D] float32 vectors of ``texts`` under ``spec``, fitted on these texts alone (``seed`` seeds the SVD).
    A sample in which no two texts share a word (empty, one word, one-word texts) has no lexical geometry: one
    :class:`UserError` line."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

    ngrams = {"ngram_range": (1, spec.ngrams)}
    vectorizer = CountVectorizer(**ngrams) if spec.kind == "bm25" else TfidfVectorizer(**ngrams, sublinear_tf=True)
    try:
        matrix = vectorizer.fit_transform(list(texts))
    except ValueError:  # scikit-learn: "empty vocabulary"
        matrix = None
    if matrix is None or matrix.shape[1] < 2 or not _shares_words(matrix):
        raise UserError(
            f"the {len(texts)} sampled texts share no word: a lexical reference ({spec.name}) needs texts of several "
            "words with words in common (an empty or one-word sample has no lexical geometry); use a trained "
            "reference (--agreement-with mpnet-base)"
        )
    if spec.kind == "bm25":
        return _bm25(matrix, spec.k1, spec.b).toarray().astype(np.float32)
    if spec.kind == "tfidf-lsa":
        from threadpoolctl import threadpool_limits

        svd = TruncatedSVD(n_components=min(spec.dims, matrix.shape[1] - 1), random_state=seed)
        with threadpool_limits(limits=1, user_api="blas"):  # same vectors whatever the threads (module docstring)
            return svd.fit_transform(matrix).astype(np.float32)
    return matrix.toarray().astype(np.float32)


def _shares_words(matrix) -> bool:
    """Whether some two texts have a term in common (some term's document frequency is 2 or more): else every cosine
    similarity is 0 and neighbours are arbitrary."""
    matrix = matrix.tocsc(copy=True)  # a copy: the caller's matrix keeps its explicit zeros
    matrix.eliminate_zeros()
    return bool(np.diff(matrix.indptr).max(initial=0) >= 2)


def _bm25(counts, k1: float = BM25_K1, b: float = BM25_B):
    """Okapi BM25 weights of a document-term count matrix (rows scaled to unit length; cosine ignores the scale)."""
    from sklearn.preprocessing import normalize

    counts = counts.tocsr().astype(np.float64)
    n_docs = counts.shape[0]
    df = np.bincount(counts.indices, minlength=counts.shape[1])
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    norm = k1 * (1 - b + b * lengths / max(lengths.mean(), 1e-12))
    row_norm = np.repeat(norm, np.diff(counts.indptr))
    counts.data = counts.data * (k1 + 1) / (counts.data + row_norm) * idf[counts.indices]
    return normalize(counts)


@dataclass
class LexicalReference:
    """A lexical reference as agreement uses one: ``name`` and ``revision`` as tables show them, vectors of a sample
    fitted on that sample (nothing to store: it costs milliseconds)."""

    spec: LexicalSpec
    seed: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def revision(self) -> str:
        return self.spec.revision

    def encode(self, texts: Sequence[str], store: Path | None = None) -> np.ndarray:
        """[n, D] vectors fitted on ``texts`` (``store`` is ignored: refitting is cheaper than reading)."""
        return lexical_vectors(texts, self.spec, self.seed)

    def store(self, task: str) -> None:
        return None
