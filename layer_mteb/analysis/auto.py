"""``select --by auto``: the selector the study chose, shipped as a small versioned JSON file in the package.

A :class:`Policy` holds one rule per kind of model (trained for embeddings, or a base language model; see
:mod:`~.families`): the study selector that kind uses, or the last layer when the evidence for another was too weak
(an abstention), with why, and what it was trained on. :func:`~.study.train_policy` writes it; this module only
reads it and applies it, so ``select`` never sees the study's scores.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from layer_mteb.analysis.families import family_of
from layer_mteb.analysis.selectors import Selector, by_name
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import atomic_write

AUTO = "auto"
VERSION = 1
#: The policy ``select --by auto`` applies: written by ``python -m layer_mteb.paper --policy`` (``make reproduce``).
POLICY_FILE = Path(__file__).with_name("auto_selector.json")
KINDS = ("embedding", "base")


def kind_of(model: str) -> str:
    """``embedding`` for a model trained to produce embeddings, else ``base``."""
    return "embedding" if family_of(model).embedding else "base"


@dataclass(frozen=True)
class Rule:
    """What one kind of model gets: a study selector's name and why it was chosen (or why the rule abstained)."""

    selector: str
    reason: str


@dataclass(frozen=True)
class Policy:
    """One rule per kind of model, the abstention margin it was fitted with, and its provenance."""

    rules: dict[str, Rule]
    margin: float
    models: tuple[str, ...] = ()
    families: tuple[str, ...] = ()
    version: int = VERSION
    date: str = ""
    package_version: str = ""
    record: dict[str, float] = field(default_factory=dict)

    def rule_for(self, model: str) -> Rule:
        return self.rules[kind_of(model)]

    def selector_for(self, model: str) -> Selector:
        """The study selector this policy applies to ``model``, renamed ``auto`` so tables say who picked."""
        chosen = by_name(self.rule_for(model).selector)
        return dataclasses.replace(chosen, name=AUTO, acts_as=chosen.name)

    def describe(self, model: str) -> str:
        """One line: which rule was used for ``model`` and why, with the policy's provenance."""
        family = family_of(model)
        rule = self.rule_for(model)
        kind = f"embedding model ({family.why})" if family.embedding else "base language model"
        trained = f"trained on {len(self.models)} models of {len(self.families)} families"
        return f"{AUTO} (v{self.version}, {trained}): {model}: {kind}: {rule.reason} -> {rule.selector}"

    def to_json(self) -> dict:
        return {
            "version": self.version,
            "date": self.date,
            "package_version": self.package_version,
            "margin": self.margin,
            "rules": {kind: dataclasses.asdict(rule) for kind, rule in self.rules.items()},
            "trained_on": {"models": list(self.models), "families": list(self.families)},
            "record": self.record,
        }


def from_json(data: dict) -> Policy:
    return Policy(
        rules={kind: Rule(**rule) for kind, rule in data["rules"].items()},
        margin=float(data["margin"]),
        models=tuple(data["trained_on"]["models"]),
        families=tuple(data["trained_on"]["families"]),
        version=int(data["version"]),
        date=str(data.get("date", "")),
        package_version=str(data.get("package_version", "")),
        record=dict(data.get("record", {})),
    )


def load_policy(path: str | Path = POLICY_FILE) -> Policy:
    """The shipped policy (one :class:`UserError` line if the file is missing or not a policy)."""
    try:
        policy = from_json(json.loads(Path(path).read_text()))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UserError(f"cannot read the auto selector {path} ({err}); regenerate it with `make reproduce`") from None
    if set(policy.rules) != set(KINDS):
        raise UserError(f"{path} has rules for {sorted(policy.rules)}, not {list(KINDS)}; regenerate it")
    return policy


def write_policy(policy: Policy, path: str | Path = POLICY_FILE) -> Path:
    """Write ``policy`` as JSON; a file that differs only in its date is left as it is (same inputs, same bytes)."""
    path = Path(path)
    if path.is_file():
        try:
            old = json.loads(path.read_text())
            if {**old, "date": ""} == {**policy.to_json(), "date": ""}:
                return path
        except ValueError:
            pass
    text = json.dumps(policy.to_json(), indent=2) + "\n"
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))
    return path
