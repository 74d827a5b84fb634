"""``select --by auto``: model families and kinds, the policy fitted on other families, leave-one-family-out that
never reads the held-out family's scores before its pick, and the shipped policy file with its provenance."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from _metric_fixtures import run_tables
from conftest import needs

from layer_mteb.analysis.rules import PAPER_RULE
from layer_mteb.analysis.runs.release_layout import RELEASE_SCORES_FILE, release_folder
from layer_mteb.analysis.selection import auto
from layer_mteb.analysis.selection.auto import family_of
from layer_mteb.analysis.selection.picks import select_layers
from layer_mteb.analysis.selection.registry import by_name
from layer_mteb.analysis.selection.selectors import ModelData, evaluate
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRICS_TABLE
from studies import engine, lofo

REFERENCE = release_folder()  # the authors' tables (LAYER_MTEB_RELEASE, else beside the checkout)

CANDIDATES = [by_name(n) for n in ("last_layer", "depth=0.5", "depth=0.8", PAPER_RULE)]


@pytest.mark.parametrize(
    ("name", "family", "embedding"),
    [
        ("Pythia/410m", "pythia", False),
        ("EleutherAI/pythia-70m", "pythia", False),
        ("roberta_mean_pooling/base", "roberta", False),  # not bert, though the name contains it
        ("bert/base", "bert", False),
        ("mamba/790m", "mamba", False),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2", False),
        ("google/gemma-3-270m", "gemma", False),
        ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers", True),
        ("minilm-l6", "sentence-transformers", True),
        ("LLM2Vec-mntp-unsup-simcse/8B", "llm2vec", True),
        ("McGill-NLP/LLM2Vec-Meta-Llama-3-8B-Instruct-mntp", "llm2vec", True),
        ("acme/new-model", "acme/new-model", False),  # unknown: a family of its own
    ],
)
def test_the_family_table(name: str, family: str, embedding: bool) -> None:
    found = family_of(name)
    assert (found.name, found.embedding) == (family, embedding)
    assert auto.kind_of(name) == ("embedding" if embedding else "base")


def test_first_token_pooling_is_a_kind_of_its_own_unless_the_model_is_an_embedding_model() -> None:
    assert auto.kind_of("bert_CLS/base") == auto.kind_of("roberta_CLS/base") == "cls"
    assert auto.kind_of("acme/encoder", pooling="first") == "cls" and auto.kind_of("acme/encoder") == "base"
    assert auto.kind_of("sentence-transformers/all-MiniLM-L6-v2", pooling="first") == "embedding"


def test_a_local_sentence_transformers_pipeline_is_an_embedding_model(tmp_path: Path) -> None:
    assert not family_of(str(tmp_path)).embedding
    (tmp_path / "modules.json").write_text("[]")
    assert family_of(str(tmp_path)).embedding and "sentence-transformers pipeline" in family_of(str(tmp_path)).why


def synthetic(name: str, peaks: dict[str, int], n_layers: int = 10, types: dict[str, str] | None = None) -> ModelData:
    """A model whose every task peaks at one layer, and whose own-text prompt entropy is lowest exactly there."""
    layers = pd.RangeIndex(n_layers + 1)
    scores = pd.DataFrame({task: [50.0 - 5 * abs(k - peak) for k in layers] for task, peak in peaks.items()})
    metrics = {
        ("prompt_entropy", f"task:{task}"): pd.Series([1.0 + abs(k - peak) for k in layers], index=layers)
        for task, peak in peaks.items()
    }
    return ModelData(name, n_layers, scores.set_axis(layers), metrics, task_types=types or {})


def fitted(models: list[ModelData], candidates=CANDIDATES, **settings) -> auto.Policy:
    summed = engine.cells(engine.study_rows(models, candidates))
    return lofo.fit_policy(summed, [c.name for c in candidates], **settings)


def test_a_metric_that_marks_the_best_layer_on_other_families_picks_it_on_a_new_one() -> None:
    training = [
        synthetic("Pythia/a", {"T1": 2, "T2": 7, "T3": 4}),
        synthetic("bert/b", {"T1": 5, "T2": 1, "T3": 9}),
        synthetic("gemma/c", {"T1": 3, "T2": 6, "T3": 8}),
    ]
    new = synthetic("smollm2/d", {"T1": 3, "T2": 6, "T3": 1})
    policy = fitted(training)
    assert policy.rules["base"].selector == PAPER_RULE and policy.variant == "fixed"
    assert policy.rules["embedding"].selector == "last_layer"  # no embedding model to learn from: abstain
    picks = evaluate([new], [policy.selector_for(new.name)])
    assert picks.set_index("task")["chosen_layer"].to_dict() == {"T1": 3, "T2": 6, "T3": 1}
    assert set(picks["selector"]) == {"auto"}
    record = lofo.leave_one_family_out([*training, new], CANDIDATES)
    assert (record["selector"] == PAPER_RULE).all() and record["regret"].max() == pytest.approx(0)


def test_one_family_is_no_evidence_and_a_small_gain_is_no_reason_to_leave_the_last_layer() -> None:
    names = [c.name for c in CANDIDATES]
    training = [synthetic("Pythia/a", {"T1": 2, "T2": 7}), synthetic("Pythia/b", {"T1": 5, "T2": 1})]
    rule = lofo.fit_rule(engine.cells(engine.study_rows(training, CANDIDATES)), names, margin=0.0)
    assert rule.selector == "last_layer" and "one family only (pythia)" in rule.reason
    two = engine.cells(engine.study_rows([*training, synthetic("bert/c", {"T1": 9, "T2": 9})], CANDIDATES))
    assert lofo.fit_rule(two, names, margin=0.0).selector == PAPER_RULE
    gain = engine.board(two).set_index("selector").loc[PAPER_RULE, "gain"]
    abstained = lofo.fit_rule(two, names, margin=gain + 0.1)
    assert abstained.selector == "last_layer" and "< margin" in abstained.reason


def test_a_depth_per_task_type_is_learned_across_families_and_applied_by_type() -> None:
    """Clustering tasks peak at depth 0.9 and STS tasks at 0.2 in two families: the by-type rule learns both, and
    ``auto`` picks layer 9 for a new model's clustering task, layer 2 for its STS task."""
    types = {"C1": "Clustering", "C2": "Clustering", "S1": "STS", "S2": "STS"}
    peaks = {"C1": 9, "C2": 9, "S1": 2, "S2": 2}
    training = [synthetic(f"{family}/x", peaks, types=types) for family in ("Pythia", "bert")]
    depths = [by_name(f"depth={d / 10:.1f}") for d in range(1, 11)]
    policy = fitted(training, depths, margin=0.0, variant="by_type")
    rule = policy.rules["base"]
    assert {rule.by_type.get(t, rule.selector) for t in ("Clustering", "STS")} == {"depth=0.9", "depth=0.2"}
    assert "by task type" in rule.label and policy.rules["embedding"].selector == "last_layer"
    new = synthetic("gemma/y", {"C1": 4, "S1": 4}, types={"C1": "Clustering", "S1": "STS"})
    picks = evaluate([new], [policy.selector_for(new.name)]).set_index("task")["chosen_layer"]
    assert picks.to_dict() == {"C1": 9, "S1": 2}


def test_the_study_population_says_which_models_it_leaves_out_and_checkpoints_share_a_weight() -> None:
    scores, _ = run_tables({"A": [0.1, 0.3, 0.7, 0.5], "B": [0.2, 0.6, 0.4, 0.3], "C": [0.1, 0.2, 0.3, 0.4]}, {})
    partial = scores[scores["layer"] < 3].assign(model="acme/partial")
    kept, excluded = engine.score_models(pd.concat([scores, partial]))
    assert [m.name for m in kept] == ["test/m"] and kept[0].task_types == {"A": "STS", "B": "STS", "C": "STS"}
    assert excluded.set_index("model").loc["acme/partial", "reason"].startswith("no task has its last layer")
    assert engine.weights(["Pythia/410m", "Pythia/410m@step1", "Pythia/70m"]) == {
        "Pythia/410m": 0.5,
        "Pythia/410m@step1": 0.5,
        "Pythia/70m": 1.0,
    }


SCORES = {"A": [0.1, 0.3, 0.7, 0.5, 0.4], "B": [0.2, 0.6, 0.4, 0.3, 0.5]}
METRICS = {("prompt_entropy", "task:A"): [0.9, 0.8, 0.2, 0.6, 0.7], ("prompt_entropy", "wikitext"): [1, 1, 1, 1, 1]}


def test_an_embedding_model_abstains_to_its_last_layer() -> None:
    scores, metrics = run_tables(SCORES, METRICS, model="sentence-transformers/all-MiniLM-L6-v2")
    frame = select_layers(scores=scores, metrics=metrics, by="auto", per_task=True).set_index(["task", "selector"])
    assert frame.loc[("A", "auto"), "chosen_layer"] == 4 and frame.loc[("A", "oracle"), "chosen_layer"] == 2
    assert frame.loc[("B", "auto"), "gain"] == 0


def test_a_base_model_gets_the_shipped_base_rule() -> None:
    scores, metrics = run_tables(SCORES, METRICS, model="EleutherAI/pythia-70m")
    rule = auto.load_policy().rules["base"].selector
    picked = select_layers(scores=scores, metrics=metrics, by="auto", per_task=True)
    direct = select_layers(scores=scores, metrics=metrics, by=rule, per_task=True)
    assert (
        picked.query("selector == 'auto'")["chosen_layer"].tolist()
        == direct.query("selector == @rule")["chosen_layer"].tolist()
    )


#: one task of each type the paper's tasks have, as their ``scores.csv`` rows name the type
TYPED_TASKS = {
    "EmotionClassification": "Classification",
    "TwentyNewsgroupsClustering": "Clustering",
    "TwitterSemEval2015": "PairClassification",
    "AskUbuntuDupQuestions": "Reranking",
    "STS12": "STS",
}


def test_a_base_model_gets_the_shipped_rule_of_each_task_type() -> None:
    """The shipped base rule picks a depth per task type: on a 10-layer model each task gets the layer of its own
    type's depth (or the rule's default), which is what that depth alone picks, and the types do not all agree."""
    rule = auto.load_policy().rules["base"]
    assert rule.by_type, "the shipped base rule has no depth per task type: this test has nothing to exercise"
    curves = {task: [0.1 * ((k * (i + 3)) % 7) for k in range(11)] for i, task in enumerate(TYPED_TASKS)}
    scores, metrics = run_tables(curves, {("prompt_entropy", "wikitext"): [1.0] * 11}, model="EleutherAI/pythia-70m")
    scores["task_type"] = scores["task"].map(TYPED_TASKS)
    picked = select_layers(scores=scores, metrics=metrics, by="auto", per_task=True).query("selector == 'auto'")
    picked = picked.set_index("task")["chosen_layer"].to_dict()
    wanted = {task: rule.by_type.get(kind, rule.selector) for task, kind in TYPED_TASKS.items()}
    assert picked == {task: round(by_name(name).depth * 10) for task, name in wanted.items()}
    for task, name in wanted.items():
        direct = select_layers(scores=scores, metrics=metrics, by=name, per_task=True)
        assert direct.query("task == @task and selector == @name")["chosen_layer"].tolist() == [picked[task]]
    default = round(by_name(rule.selector).depth * 10)
    typed = [task for task, kind in TYPED_TASKS.items() if kind in rule.by_type]
    assert typed and all(picked[task] != default for task in typed) and len(set(picked.values())) >= 3


def test_retrieval_takes_the_reranking_rule_and_summarization_the_sts_rule() -> None:
    """A benchmark's Retrieval and Summarization tasks (types the study did not score) get the rule of the type mteb
    scores with the same evaluator, and the rule's description says it is an analogy; a policy trained on them
    keeps its own."""
    rules = {kind: auto.Rule("depth=0.8", "r") for kind in auto.KINDS}
    rules["base"] = auto.Rule("depth=0.8", "r", {"Reranking": "depth=0.2", "STS": "depth=0.5"})
    policy = auto.Policy(rules, 0.5, "by_type")
    chosen = dict(policy.selector_for("EleutherAI/pythia-70m").by_type)
    assert chosen["Retrieval"] == "depth=0.2" and chosen["Summarization"] == "depth=0.5"
    assert "Retrieval as Reranking, Summarization as STS (not studied" in policy.describe("EleutherAI/pythia-70m")
    own = {"Reranking": "depth=0.2", "Retrieval": "depth=0.9"}
    assert auto.with_analogues(own)["Retrieval"] == "depth=0.9"
    curves = {"ArguAna": [0.1 * k for k in range(11)], "SummEvalSummarization.v2": [0.1 * k for k in range(11)]}
    scores, metrics = run_tables(curves, {("prompt_entropy", "wikitext"): [1.0] * 11}, model="EleutherAI/pythia-70m")
    scores["task_type"] = scores["task"].map({"ArguAna": "Retrieval", "SummEvalSummarization.v2": "Summarization"})
    picked = select_layers(scores=scores, metrics=metrics, by="auto", per_task=True).query("selector == 'auto'")
    rule = auto.load_policy().rules["base"]
    wanted = {
        "ArguAna": auto.with_analogues(rule.by_type).get("Retrieval", rule.selector),
        "SummEvalSummarization.v2": auto.with_analogues(rule.by_type).get("Summarization", rule.selector),
    }
    assert picked.set_index("task")["chosen_layer"].to_dict() == {
        task: round(by_name(name).depth * 10) for task, name in wanted.items()
    }
    assert wanted["ArguAna"] == rule.by_type["Reranking"]  # the shipped base rule has a Reranking depth


def test_select_by_auto_prints_the_rule_it_used_and_the_policy_provenance(tmp_path: Path, capsys) -> None:
    from layer_mteb.cli import main

    scores, metrics = run_tables(SCORES, METRICS, model="sentence-transformers/all-MiniLM-L6-v2")
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, metrics)
    assert main(["select", "--run", str(tmp_path), "--by", "auto", "--per-task"]) == 0
    out = capsys.readouterr().out
    line = rf"auto \(v{auto.VERSION}, trained on \d+ models of \d+ families\): sentence-transformers/all-MiniLM-L6-v2: "
    line += r"embedding model \(sentence-transformers pipeline[^)]*\)\): .+ -> last_layer"
    assert re.search(line, out), out
    assert (tmp_path / "selection.auto.csv").is_file()


@pytest.mark.parametrize(
    ("model", "rule"),
    [
        ("sentence-transformers/all-MiniLM-L6-v2", "-> last_layer"),
        ("EleutherAI/pythia-70m", "-> by task type (Classification depth=0.6; else depth=0.8)"),
    ],
)
def test_select_by_auto_s_first_line_speaks_only_of_the_run_s_task_types(model, rule, tmp_path, capsys) -> None:
    """A run of an STS and a Classification task (the demo's two types): the line names no type the run lacks
    (Retrieval, Summarization, Clustering, ...), and an embedding model's rule, with no per-type pick, no analogy."""
    from layer_mteb.cli import main

    scores, metrics = run_tables(SCORES, METRICS, model=model)
    scores["task_type"] = scores["task"].map({"A": "STS", "B": "Classification"})
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, metrics)
    assert main(["select", "--run", str(tmp_path), "--by", "auto", "--no-reference"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"auto (v{auto.VERSION}, trained on ") and f": {model}: " in first
    assert f"{rule};" in f"{first};", first  # the rule, then the end of the line or its next clause
    other_types = ["Retrieval", "Summarization", "Clustering", "Reranking", "PairClassification", "analogy"]
    assert not [word for word in other_types if word in first], first


def test_the_policy_line_names_an_analogue_only_for_a_type_the_run_has() -> None:
    """Retrieval takes the Reranking rule by analogy: said where the run has a Retrieval task, never otherwise."""
    policy = auto.load_policy()
    with_retrieval = policy.describe("EleutherAI/pythia-70m", types=frozenset({"Retrieval", "STS"}))
    assert with_retrieval.endswith(
        "-> by task type (Retrieval depth=0.2; else depth=0.8); Retrieval as Reranking (not studied: the same mteb "
        "evaluator and score)"
    )
    assert "Retrieval" not in policy.describe("EleutherAI/pythia-70m", types=frozenset({"STS"}))


def test_the_shipped_policy_says_what_it_was_trained_on() -> None:
    policy = auto.load_policy()
    assert set(policy.rules) == set(auto.KINDS) and policy.version == auto.VERSION
    assert len(policy.models) >= 12 and len(policy.families) >= 8 and policy.package_version and policy.date
    assert {"lofo_mean_regret", "lofo_worst_gain", "last_layer_mean_regret"} <= set(policy.record)
    assert policy.variant in lofo.VARIANTS
    for rule in policy.rules.values():
        for name in rule.selector_names():
            by_name(name)  # every rule is made of study selectors


@needs(REFERENCE / RELEASE_SCORES_FILE, "the authors' release")
@pytest.mark.parametrize("family", ["pythia", "bert", "mamba"])
def test_leave_one_family_out_never_reads_the_held_out_familys_scores(family: str) -> None:
    import dataclasses

    from layer_mteb.analysis.runs.importing import import_metrics_table, release_scores

    names = ["Pythia/14m", "Pythia/70m", "bert/base", "bert_CLS/base", "roberta_mean_pooling/base", "mamba/370m"]
    scores = release_scores(REFERENCE / RELEASE_SCORES_FILE, names)
    metrics = import_metrics_table(REFERENCE / "official_layer_metrics.csv.gz", models={name: name for name in names})
    models, excluded = engine.score_models(scores, metrics)
    assert [m.name for m in models if m.pooling == "first"] == ["bert_CLS/base"] and excluded.empty
    candidates = [*CANDIDATES, by_name("depth=0.2"), by_name("depth=0.9")]
    before = lofo.leave_one_family_out(models, candidates).set_index("model")
    changed = [
        dataclasses.replace(m, scores=m.scores.iloc[::-1].set_axis(m.scores.index))
        if family_of(m.name).name == family
        else m
        for m in models
    ]
    after = lofo.leave_one_family_out(changed, candidates).set_index("model")
    held = before.index[before["held_out_family"] == family]
    assert len(held) >= 1
    for column in ("selector", "margin", "variant"):
        assert (after.loc[held, column] == before.loc[held, column]).all()
    assert not after.loc[held, "regret"].equals(before.loc[held, "regret"])  # scored after the pick
