"""Every selector by name: the metric selectors (:mod:`~.selectors`), the curves' (:mod:`~.agreement`) and ``auto``;
``--by`` offers its offered names, with did-you-mean and ``--help`` from it (no pandas at import)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from functools import cache
from types import MappingProxyType

from layer_mteb.analysis.selection.agreement import curve_selectors
from layer_mteb.analysis.selection.auto import AUTO_SELECTOR
from layer_mteb.analysis.selection.selectors import BASELINE_DEPTHS, Selector, metric_selectors
from layer_mteb.common.errors import UserError


@cache
def registry() -> Mapping[str, Selector]:
    return MappingProxyType({**metric_selectors(), **curve_selectors(), AUTO_SELECTOR.name: AUTO_SELECTOR})


def by_name(name: str) -> Selector:  # offered or not (one clear error naming the forms otherwise)
    found = registry().get(name)
    if found is None:
        raise UserError(unknown_selector_message(name))
    return found


def offered_names() -> list[str]:  # every name ``--by`` takes
    return [name for name, selector in registry().items() if selector.offered]


def by_help() -> str:
    """What ``--by`` takes, one phrase per family of the registry."""
    forms = dict.fromkeys((s.form or s.name) for s in registry().values() if s.offered)
    metrics = ", ".join(name for name, s in registry().items() if s.form == "a metric" and s.offered)
    forms = {(f"a metric ({metrics})" if form == "a metric" else form): None for form in forms}
    *first, last = forms
    return ", ".join([*first, f"or {last}"])


def unknown_selector_message(name: str) -> str:
    """One line: why ``name`` is refused, the nearest offered names, then the forms ``--by`` takes."""
    known = registry().get(name)
    if known is not None:  # a studied selector, applied from Python only
        return (
            f"--by {name} is a studied selector (docs/paper.md, docs/agreement.md), not offered on the command "
            f"line; layer_mteb.select_layers(run, by={name!r}) applies it"
        )
    close = nearest_names(name, offered_names())
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"unknown metric or selector {name!r}{hint}: use {by_help()}"


def nearest_names(name: str, names: list[str], n: int = 3) -> list[str]:
    """The names nearest ``name`` (any case), as difflib finds them for the task names; a name matched as a whole
    first, then the names with a word near it (``entorpy`` is far from ``prompt_entropy`` as a whole, near its
    ``entropy``)."""
    lowered = name.lower()
    words: dict[str, list[str]] = {}
    for full in names:
        for word in re.split(r"[_=]", full):
            words.setdefault(word, []).append(full)
    near_words = difflib.get_close_matches(lowered, list(words), n=n, cutoff=0.75)
    found = [*difflib.get_close_matches(lowered, names, n=n), *(full for word in near_words for full in words[word])]
    return list(dict.fromkeys(found))[:n]


def check_selector(name: str) -> Selector:
    """The offered selector ``--by`` names, else one UserError line. ``last_layer`` and ``middle_layer`` are second
    spellings of the depths that pick the same layers (``depth=1.0``, ``depth=0.5``): accepted, offered once."""
    name = BASELINE_DEPTHS.get(name, name)
    if name not in offered_names():
        raise UserError(unknown_selector_message(name))
    return registry()[name]
