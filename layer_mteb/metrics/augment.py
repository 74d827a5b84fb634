"""Noisy views of a text for the invariance metrics (InfoNCE, LiDAR, DiME): nlpaug's
``Sequential(SplitAug, RandomCharAug, KeyboardAug)``, seeded per (seed, text, view) so a text always gets the same
views whatever else is in the batch, and never the clean text itself.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np

from layer_mteb.common.errors import UserError

_RETRIES = 5


def augment(
    texts: Sequence[str], n_views: int = 2, *, p: float = 0.3, seed: int = 0, max_words: int | None = None
) -> list[list[str]]:
    """``n_views`` augmented versions of each text -> ``[[view_1, …, view_J] for each text]``.

    ``p`` is the share of words each of the three augmenters touches (and the share of characters changed in a
    touched word). nlpaug caps every augmenter at 10 words by default, which would make ``p`` meaningless for
    paragraphs; ``max_words=None`` lifts the cap (pass 10 for nlpaug's default). Words under 4 characters are left
    alone by nlpaug, so a very short text can come back unchanged: it is retried with new seeds, and if it still
    equals the clean text one random character is inserted, so no view is ever the clean text.
    """
    if n_views < 1:
        raise ValueError(f"n_views must be at least 1, got {n_views}")
    if not 0 < p <= 1:
        raise ValueError(f"augmentation probability p must be in (0, 1], got {p}")
    augmenter = _augmenter(p, max_words)
    return [[_view(augmenter, text, _seed(seed, text, j)) for j in range(n_views)] for text in texts]


def _augmenter(p: float, max_words: int | None):
    try:
        import nlpaug.augmenter.char as nac
        import nlpaug.augmenter.word as naw
        import nlpaug.flow as naf
    except ImportError:
        raise UserError(
            "InfoNCE, LiDAR and DiME need nlpaug: pip install 'layer_mteb[metrics]' (or --views 0 to skip them)"
        ) from None
    return naf.Sequential(
        [
            naw.SplitAug(aug_p=p, aug_max=max_words),
            nac.RandomCharAug(aug_char_p=p, aug_word_p=p, aug_word_max=max_words),
            nac.KeyboardAug(aug_char_p=p, aug_word_p=p, aug_word_max=max_words),
        ]
    )


def _view(augmenter, text: str, seed: int) -> str:
    for attempt in range(_RETRIES):
        with _seeded(seed + attempt):
            out = augmenter.augment(text)
        view = out[0] if isinstance(out, list) and out else out  # nlpaug ≥ 1.1.11 returns a list
        if isinstance(view, str) and view and view != text:
            return view
    rng = random.Random(seed)
    position = rng.randrange(len(text) + 1)
    return text[:position] + rng.choice("abcdefghijklmnopqrstuvwxyz") + text[position:]


def _seed(seed: int, text: str, view: int) -> int:
    digest = hashlib.sha256(f"{seed}\x00{view}\x00{text}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


@contextmanager
def _seeded(seed: int):
    """nlpaug draws from the global ``random`` and ``numpy.random`` states: seed them, then put them back."""
    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
