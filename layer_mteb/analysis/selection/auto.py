"""``select --by auto``: the selector the study chose, shipped as a small versioned JSON file in the package.

A :class:`Policy` holds one rule per kind of model, a fact known without labels: trained for embeddings (see
:data:`FAMILIES`), pooled from the first token (a ``[CLS]`` readout), or a base language model pooled over its
tokens. A rule is the study selector that kind uses, possibly one per task type (a depth per type), or the last
layer when the evidence for another was too weak (an abstention), with why, and what it was trained on.
:func:`~.lofo.train_policy` writes it; this module only reads it and applies it, so ``select`` never sees the
study's scores.

The model facts a rule may use without labels: which family a model belongs to (for leave-one-family-out) and
whether it was trained to produce embeddings (its last layer is then the layer its training optimised). One table,
matched in order against the lower-cased model name (a hub id, a release name such as ``Pythia/410m``, or a local
folder); the first family whose pattern occurs in the name wins, so ``roberta`` comes before ``bert``. A model no
pattern matches is a family of its own. A local folder holding a sentence-transformers pipeline (``modules.json`` or
``config_sentence_transformers.json``) is an embedding model whatever its name.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from layer_mteb.analysis.selection.agreement import AGREEMENT, agreement_line, curve_selectors
from layer_mteb.analysis.selection.curves import MEAN
from layer_mteb.analysis.selection.selectors import (
    CurveSource,
    ModelData,
    Needs,
    Selector,
    metric_selectors,
    pooling_of,
    task_types,
)
from layer_mteb.common.errors import UserError, first_line
from layer_mteb.metrics.agreement import ID_METRIC
from layer_mteb.metrics.agreement.lexical import is_lexical
from layer_mteb.tasks.task_types import TASK_TYPES

if TYPE_CHECKING:
    import pandas as pd

    from layer_mteb.common.run_folder import RunFolder

AUTO = "auto"


@dataclass(frozen=True)
class Family:
    """A model family: the name patterns that place a model in it and whether its models were trained for
    embeddings (``why`` says how: a contrastive sentence-transformers fine-tune, an LLM2Vec adapter, ...)."""

    name: str
    patterns: tuple[str, ...]
    embedding: bool = False
    why: str = "base language model"


FAMILIES = (
    Family(
        "sentence-transformers",
        ("sentence-transformers/", "all-minilm", "all-mpnet", "minilm-l6", "mpnet-base"),
        embedding=True,
        why="sentence-transformers pipeline (contrastive fine-tune)",
    ),
    Family("llm2vec", ("llm2vec",), embedding=True, why="LLM2Vec adapter (trained for embeddings)"),
    Family("pythia", ("pythia",)),
    Family("mamba", ("mamba",)),
    Family("roberta", ("roberta",)),
    Family("bert", ("bert",)),
    Family("smollm2", ("smollm2",)),
    Family("gemma", ("gemma",)),
)
#: Files that mark a folder as a sentence-transformers pipeline.
PIPELINE_FILES = ("modules.json", "config_sentence_transformers.json")


def family_of(model: str) -> Family:
    """The model's family (:data:`FAMILIES`), else a family of its own named after the model."""
    lowered = model.lower()
    found = next((f for f in FAMILIES if any(p in lowered for p in f.patterns)), Family(model, (lowered,)))
    if not found.embedding and _is_pipeline_folder(model):
        return Family(found.name, found.patterns, embedding=True, why=f"sentence-transformers pipeline ({model})")
    return found


def _is_pipeline_folder(model: str) -> bool:
    try:
        folder = Path(model)
        return folder.is_dir() and any((folder / name).is_file() for name in PIPELINE_FILES)
    except OSError:
        return False


#: Task types the study has no scores of, and the studied type whose rule each takes: each row's ``analogue`` in
#: ``TASK_TYPES`` (the type mteb scores with the same evaluator and score; the table says why each).
TYPE_ANALOGUES = {name: row.analogue for name, row in TASK_TYPES.items() if row.analogue is not None}


def with_analogues(by_type: dict[str, str]) -> dict[str, str]:
    """``by_type`` with each unstudied type of :data:`TYPE_ANALOGUES` given its studied type's selector."""
    taken = {target: by_type[source] for target, source in TYPE_ANALOGUES.items() if source in by_type}
    return {**by_type, **{target: name for target, name in taken.items() if target not in by_type}}


#: 2: a rule may pick per task type (``by_type``), and first-token pooling is a kind of its own.
VERSION = 2
#: The policy ``select --by auto`` applies: written by ``layer-mteb reproduce --policy`` (``make reproduce``).
POLICY_FILE = Path(__file__).with_name("auto_selector.json")
KINDS = ("embedding", "cls", "base")
#: The readout of a first-token (``[CLS]``) model: :func:`layer_mteb.model.forward.pool`'s ``first``.
FIRST_TOKEN = "first"


def kind_of(model: str, pooling: str = "mean") -> str:
    """``embedding`` for a model trained to produce embeddings, ``cls`` for one read out at its first token (the
    release names those folders ``*_CLS``), else ``base``."""
    if family_of(model).embedding:
        return "embedding"
    return "cls" if pooling == FIRST_TOKEN or "_cls" in model.lower() else "base"


@dataclass(frozen=True)
class Rule:
    """What one kind of model gets: a study selector's name, the selector used instead on tasks of some types
    (``by_type``: task type -> selector name) and why it was chosen (or why the rule abstained)."""

    selector: str
    reason: str
    by_type: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The rule in one phrase: ``depth=0.8``, or ``by task type (Clustering depth=0.9, …; else depth=0.8)``."""
        return self.label_for(None)

    def label_for(self, types: frozenset[str] | None) -> str:
        """:attr:`label` naming only the task types ``types`` (a run's; None: every type the rule has): a run's line
        speaks of the tasks it holds."""
        by_type = with_analogues(self.by_type)
        kept = {t: name for t, name in sorted(by_type.items()) if (t in self.by_type if types is None else t in types)}
        if not kept:
            return self.selector
        named = ", ".join(f"{t} {name}" for t, name in kept.items())
        if types is not None and types <= set(kept):  # every task of the run has its type's rule
            return f"by task type ({named})"
        return f"by task type ({named}; else {self.selector})"

    def selector_names(self) -> list[str]:
        return list(dict.fromkeys([self.selector, *self.by_type.values()]))


@dataclass(frozen=True)
class Policy:
    """One rule per kind of model, the abstention margin and variant (``fixed``: one selector per kind;
    ``by_type``: a depth per task type) it was fitted with, and its provenance."""

    rules: dict[str, Rule]
    margin: float
    variant: str = "fixed"
    models: tuple[str, ...] = ()
    families: tuple[str, ...] = ()
    version: int = VERSION
    date: str = ""
    package_version: str = ""
    record: dict[str, float] = field(default_factory=dict)

    def rule_for(self, model: str, pooling: str = "mean") -> Rule:
        return self.rules[kind_of(model, pooling)]

    def selector_for(self, model: str, pooling: str = "mean") -> Selector:
        """The study selector this policy applies to ``model``, renamed ``auto`` so tables say who picked."""
        rule = self.rule_for(model, pooling)
        chosen = known(rule.selector)
        by_type = tuple(sorted(with_analogues(rule.by_type).items()))
        return dataclasses.replace(chosen, name=AUTO, by_type=by_type)

    def describe(self, model: str, pooling: str = "mean", types: frozenset[str] | None = None) -> str:
        """One line: which rule was used for ``model`` and why, with the policy's provenance; ``types``: the task
        types of the run it picks for, the only ones the line names (None: every type the policy knows)."""
        family = family_of(model)
        rule = self.rule_for(model, pooling)
        kinds = {"embedding": f"embedding model ({family.why})", "cls": "first-token ([CLS]) pooling"}
        kind = kinds.get(kind_of(model, pooling), "base language model")
        trained = f"trained on {len(self.models)} models of {len(self.families)} families"
        line = f"{AUTO} (v{self.version}, {trained}): {model}: {kind}: {rule.reason} -> {rule.label_for(types)}"
        return line + _analogues_note(rule, types)

    def to_json(self) -> dict:
        return {
            "version": self.version,
            "date": self.date,
            "package_version": self.package_version,
            "margin": self.margin,
            "variant": self.variant,
            "rules": {kind: dataclasses.asdict(rule) for kind, rule in self.rules.items()},
            "trained_on": {"models": list(self.models), "families": list(self.families)},
            "record": self.record,
        }


def _analogues_note(rule: Rule, types: frozenset[str] | None = None) -> str:
    """``; Retrieval as Reranking (…)``: the unstudied types the rule covers by analogy (of ``types``, a run's,
    where given), or nothing: a rule without a per-type pick covers no type by analogy."""
    taken = [
        f"{t} as {src}"
        for t, src in TYPE_ANALOGUES.items()
        if t not in rule.by_type and src in rule.by_type and (types is None or t in types)
    ]
    if not taken:
        return ""
    return f"; {', '.join(taken)} (not studied: the same mteb evaluator and score)"


def from_json(data: dict) -> Policy:
    return Policy(
        rules={kind: Rule(**rule) for kind, rule in data["rules"].items()},
        margin=float(data["margin"]),
        variant=str(data.get("variant", "fixed")),
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
    if set(policy.rules) != set(KINDS) or policy.version != VERSION:
        raise UserError(
            f"{path} is policy v{policy.version} with rules for {sorted(policy.rules)}, not v{VERSION} with "
            f"{list(KINDS)}; regenerate it with `make reproduce`"
        )
    for rule in policy.rules.values():
        for name in rule.selector_names():
            known(name)  # an unknown selector is one UserError line
    return policy


#: the shipped policy, read once per process
shipped_policy = cache(load_policy)


def known(name: str) -> Selector:  # the selector a rule names: a metric's or the stored curves''
    found = metric_selectors().get(name) or curve_selectors().get(name)
    if found is None:
        raise UserError(f"unknown metric or selector {name!r} in the auto policy; regenerate it with `make reproduce`")
    return found


@dataclass(frozen=True)
class AutoSelector(Selector):
    """``--by auto``: for a base language model whose run has agreement curves on every task, the layer of most
    agreement (the study: docs/agreement.md); otherwise the shipped policy's rule for the model's kind, in rows named
    ``auto``. For a run of one base model it wants the curves computed first where a reference encoder loads, so it
    may compute curves (:attr:`computes_curves`): on tasks the study never saw, the depth rule it otherwise applies
    loses far more than agreement (the numbers: docs/studies.md, "On tasks the project never saw")."""

    computes_curves: bool = True

    def needs(self, scores: pd.DataFrame) -> Needs:
        policy, models = shipped_policy(), scores.groupby("model", sort=False)
        rules = [policy.rule_for(str(model), pooling_of(part)) for model, part in models]
        reads = frozenset().union(*(known(name).signals() for rule in rules for name in rule.selector_names()))
        names = scores["model"].astype(str).unique()
        base = len(names) == 1 and kind_of(names[0], pooling_of(scores)) == "base"
        return Needs(reads=reads, uses=frozenset({AGREEMENT, ID_METRIC}), wants=base)

    def compute_first(self, source: CurveSource, folder: RunFolder, tasks: list[str]) -> None:
        """The run of one base model lacking agreement curves: computed first, said first, with a trained reference
        (a lexical one fails on unseen tasks); where none loads, one line and the depth rule; ``no_reference``:
        never computed."""
        if source.no_reference:
            return
        model = str(folder.scores()["model"].iloc[0])
        try:
            if source.reference is not None and is_lexical(source.reference):
                raise UserError(f"{source.reference} is a lexical reference, which {self.name} does not use")
            reference = source.reference_for(model)
            print(
                f"{self.name}: {model} is a base language model and its run has no agreement curves for {len(tasks)} "
                f"task(s): encoding up to {source.n} texts of each with the model's every layer and with {reference} "
                "(roughly 5 to 40 s a task for a 135M-parameter model on 2 CPU cores, more for bigger ones; "
                "--no-reference skips this)",
                flush=True,
            )
            source.compute(folder, tasks, reference)
        except UserError as err:
            instead = "gets the depth rule for base models instead of agreement"
            print(f"{self.name}: {model} {instead}: {first_line(err)}", flush=True)

    def choose(self, model: ModelData, task: str) -> int | None:  # the engine asks the selector for_model gives
        return self.for_model(model).pick(model, task)

    def for_model(self, model: ModelData) -> Selector:
        if kind_of(model.name, model.pooling) == "base" and _has_agreement(model):
            return dataclasses.replace(curve_selectors()[AGREEMENT], name=self.name)
        return shipped_policy().selector_for(model.name, model.pooling)

    def per_task(self) -> bool:
        rules = shipped_policy().rules.values()
        return any(known(name).source == "own" or rule.by_type for rule in rules for name in rule.selector_names())

    def describe(self, folder: RunFolder, picks: pd.DataFrame, options: object) -> list[str]:
        scores, lines = folder.scores(), []
        for model in picks["model"].astype(str).unique():
            pooling = pooling_of(scores[scores["model"] == model])
            picked = picks[(picks["model"] == model) & (picks["selector"] == self.name)]
            if (picked["texts"].astype(str).str.startswith("task:")).any():
                why = "base language model: the layer of most agreement"
                lines.append(agreement_line(folder, model, self.name, why, options))
                continue
            types = frozenset(task_types(scores[scores["model"] == model]).values())
            line = shipped_policy().describe(model, pooling, types)
            if kind_of(model, pooling) == "base":
                line += "; no agreement curves in this run (`select --by agreement` computes them; auto then uses them)"
                line += "; a lexical reference (--agreement-with tfidf-lsa, no other model) was studied for auto and "
                line += "not adopted: it loses to this rule on SmolLM2 (docs/agreement.md)"
            lines.append(line)
        return lines


def _has_agreement(data: ModelData) -> bool:  # every task of ``data`` has an agreement curve
    tasks = [t for t in data.scores.columns if t != MEAN]
    return bool(tasks) and all(data.curve(AGREEMENT, "own", task) is not None for task in tasks)


AUTO_SELECTOR = AutoSelector(AUTO, form="auto (the study's choice per kind of model; docs/selection.md)")
