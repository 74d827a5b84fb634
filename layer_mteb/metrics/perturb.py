"""Token-id perturbations of the paper's stress tests (Skean et al. 2025, Figure 3), on ids rather than text so a
prompt keeps exactly the length chosen: randomness (each token replaced with probability p by a uniform random id),
repetition (each token replaced with probability p by one token of the prompt chosen at random) and random-token
prompts of a fixed length.

The special tokens a tokenizer puts at the ends of every prompt ([CLS] … [SEP], <bos>) stay where they are; only
the tokens between them are perturbed. Random ids are drawn uniformly from [20, vocabulary size), as the authors did.
Every prompt draws its random numbers once, from a generator seeded by (seed, test, prompt): the levels of one test
then perturb nested sets of positions (a token replaced at p is also replaced at every larger p), so the curves
differ by the level alone, not by fresh noise at each level, and a prompt's perturbation does not depend on which
other prompts or levels ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np

from layer_mteb.common.errors import UserError

Test = Literal["randomness", "repetition", "length"]
TESTS: tuple[str, ...] = get_args(Test)
#: the authors' lowest random id: ids below it are control and byte tokens in most vocabularies
FIRST_RANDOM_ID = 20
_TEST_CODES = {name: code for code, name in enumerate(TESTS)}


def special_ends(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The ids the tokenizer adds before and after every text (e.g. [CLS] and [SEP]; <bos> and nothing)."""
    marker = "a"
    bare = tokenizer(marker, add_special_tokens=False)["input_ids"]
    full = tokenizer(marker)["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return list(full[:start]), list(full[start + len(bare) :])
    return [], []


def content_bounds(ids: np.ndarray, prefix: Sequence[int], suffix: Sequence[int]) -> tuple[int, int]:
    """[start, stop) of the tokens between the tokenizer's own special tokens at the ends of ``ids``."""
    start = len(prefix) if list(ids[: len(prefix)]) == list(prefix) else 0
    stop = len(ids) - len(suffix) if suffix and list(ids[len(ids) - len(suffix) :]) == list(suffix) else len(ids)
    return start, max(start, stop)


def vocabulary_size(tokenizer: Any, embedding_rows: int) -> int:
    """Ids a random token may take: the tokenizer's vocabulary, within the model's embedding table."""
    size = min(len(tokenizer), embedding_rows)
    if size <= FIRST_RANDOM_ID + 1:
        raise UserError(f"a vocabulary of {size} ids leaves none to draw above id {FIRST_RANDOM_ID}")
    return size


def perturb(
    ids: np.ndarray,
    test: Test,
    p: float,
    *,
    prompt: int,
    seed: int,
    vocab: int,
    ends: tuple[Sequence[int], Sequence[int]],
) -> np.ndarray:
    """``ids`` with each content token replaced with probability ``p``: by a random id (``randomness``) or by one
    token of the prompt chosen at random (``repetition``). ``p = 0`` returns the ids unchanged."""
    if test not in ("randomness", "repetition"):
        raise ValueError(f"perturb takes randomness or repetition, not {test!r}")
    start, stop = content_bounds(ids, *ends)
    content = ids[start:stop]
    if p == 0 or len(content) == 0:
        return ids.copy()
    rng = np.random.default_rng([seed, _TEST_CODES[test], prompt])
    draws = rng.random(len(content))
    if test == "randomness":
        replacement = rng.integers(FIRST_RANDOM_ID, vocab, size=len(content))
    else:
        replacement = np.full(len(content), content[rng.integers(len(content))])
    out = ids.copy()
    out[start:stop] = np.where(draws < p, replacement, content)
    return out


def random_prompts(
    n: int, length: int, *, seed: int, vocab: int, ends: tuple[Sequence[int], Sequence[int]]
) -> list[np.ndarray]:
    """``n`` prompts of exactly ``length`` ids: the tokenizer's special ends around uniform random ids."""
    prefix, suffix = ends
    inner = length - len(prefix) - len(suffix)
    if inner < 2:
        raise UserError(f"--lengths {length} leaves fewer than 2 tokens besides the special tokens {prefix + suffix}")
    rng = np.random.default_rng([seed, _TEST_CODES["length"], length])
    body = rng.integers(FIRST_RANDOM_ID, vocab, size=(n, inner))
    head, tail = np.asarray(prefix, dtype=np.int64), np.asarray(suffix, dtype=np.int64)
    return [np.concatenate([head, row.astype(np.int64), tail]) for row in body]
