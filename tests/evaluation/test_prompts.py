"""The model's own prompts: a sentence-transformers folder's ``prompts`` are applied per task and prompt type by
mteb's rules, so the last layer through the sweep equals ``mteb.evaluate`` of ``SentenceTransformer(folder)``; a
user's file replaces them, ``none`` drops them, and prompted and unprompted runs never share vectors or results."""

from __future__ import annotations

import json
import warnings

import mteb
import pytest
from conftest import save_tiny_model
from mteb.mocks.mock_tasks.retrieval import MockRetrievalTask
from mteb.mocks.mock_tasks.sts import MockSTSTask
from mteb.types import PromptType

from layer_mteb.cli import main
from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.prompts import Prompts, choose_prompts
from layer_mteb.evaluation.encoder import resolve_settings
from layer_mteb.evaluation.sweep import sweep
from layer_mteb.model.loading import load_model
from layer_mteb.vectors.store import store_folder

PROMPTS = {"query": "query: ", "document": "passage: ", "STS": "how similar: "}
CONFIG = EncodeConfig(batch_size=4)
TASKS = (MockRetrievalTask, MockSTSTask)


@pytest.fixture(scope="module")
def st_folder(tmp_path_factory, bert_tokenizer):
    """A tiny BERT saved as a sentence-transformers folder (mean pooling) that declares prompts."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    root = tmp_path_factory.mktemp("prompted")
    weights = save_tiny_model("bert", bert_tokenizer, root / "weights")
    transformer = Transformer(str(weights))
    pooling = Pooling(transformer.get_embedding_dimension(), "mean")
    model = SentenceTransformer(modules=[transformer, pooling], prompts=PROMPTS, device="cpu")
    model.save(str(root / "st"))
    return root / "st"


def _scores(frame) -> dict[str, float]:
    return {row.task: row.main_score for row in frame.itertuples()}


def test_the_last_layer_with_the_models_prompts_is_mtebs_evaluation_of_the_model(st_folder):
    from sentence_transformers import SentenceTransformer

    ours = sweep(str(st_folder), [t() for t in TASKS], layers="-1", config=CONFIG, vector_cache=False, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SentenceTransformer(str(st_folder), device="cpu")
        result = mteb.evaluate(model, [t() for t in TASKS], cache=None, show_progress_bar=False)
    theirs = {r.task_name: r.get_score() for r in result.task_results}
    assert theirs.keys() == {"MockRetrievalTask", "MockSTSTask"}
    mean = {task: sum(s.values()) / len(s) for task, s in _by_task(ours).items()}  # the mocks have two splits
    for task, score in theirs.items():
        assert mean[task] == pytest.approx(score, abs=1e-6), task
    unprompted = sweep(str(st_folder), [t() for t in TASKS], layers="-1", config=CONFIG, vector_cache=False,
                       progress=False, prompts="none")  # fmt: skip
    assert _scores(unprompted) != _scores(ours)  # the prompts change the vectors of this model


def _by_task(frame) -> dict[str, dict[tuple[str, str], float]]:
    out: dict[str, dict[tuple[str, str], float]] = {}
    for row in frame.itertuples():
        out.setdefault(row.task, {})[(row.split, row.subset)] = row.main_score
    return out


def test_prompts_are_picked_by_mtebs_rules_and_a_users_file_replaces_them(st_folder, tmp_path):
    prompts = choose_prompts(None, st_folder)
    assert prompts is not None and prompts.mapping == PROMPTS
    retrieval, sts = MockRetrievalTask().metadata, MockSTSTask().metadata
    assert prompts.text_for(retrieval, PromptType.query) == "query: "
    assert prompts.text_for(retrieval, PromptType.document) == "passage: "
    assert prompts.text_for(sts, None) == "how similar: "
    mine = tmp_path / "mine.yaml"
    mine.write_text("Retrieval-query: 'find: '\n")
    own = choose_prompts(str(mine), st_folder)
    assert own is not None and own.text_for(retrieval, PromptType.query) == "find: "
    assert own.text_for(retrieval, PromptType.document) == ""  # the file replaces the model's prompts
    assert choose_prompts("none", st_folder) is None
    # a model in mteb's registry: the prompts its sentence-transformers loader gives replace the folder's, as in mteb
    e5 = choose_prompts(None, st_folder, "intfloat/e5-base-v2")
    assert e5 is not None and e5.mapping == {"query": "query: ", "document": "passage: "}
    assert e5.source == "mteb registry"
    assert choose_prompts(None, st_folder, "sentence-transformers/all-MiniLM-L6-v2").mapping == PROMPTS  # none there
    default = Prompts((("classification", "classify: "),), default_name="classification")
    assert default.text_for(sts, None) == "classify: "  # no rule matches: sentence-transformers' default prompt
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(["query: "]))
    with pytest.raises(UserError, match="must map prompt names to prompt texts"):
        sweep(str(st_folder), [MockSTSTask()], prompts=str(bad), progress=False)


def test_prompted_and_unprompted_runs_never_share_vectors_or_results(st_folder, tmp_path):
    loaded = load_model(str(st_folder), CONFIG)
    prompted = resolve_settings(loaded, CONFIG, prompts=choose_prompts(None, st_folder))
    plain = resolve_settings(loaded, CONFIG)
    assert store_folder(loaded, prompted, "MockSTSTask") != store_folder(loaded, plain, "MockSTSTask")
    assert prompted.experiment(2, 2) != plain.experiment(2, 2)  # mteb's result cache keeps them apart
    out = tmp_path / "run"
    sweep(str(st_folder), [MockSTSTask()], layers="-1", config=CONFIG, output=out, progress=False)
    entry = json.loads((out / "run.json").read_text())["tasks"][0]
    assert entry["prompts"] == {"source": "model", "prompts": PROMPTS, "default_prompt_name": None}
    # the exported layer carries the prompts it was scored with
    args = ["export", "--run", str(out), "--model", str(st_folder), "--layer", str(loaded.n_layers)]
    assert main([*args, "--output", str(tmp_path / "st")]) == 0
    exported = json.loads((tmp_path / "st" / "config_sentence_transformers.json").read_text())
    assert exported["prompts"] == PROMPTS
    # one folder, one setting: an unprompted run of the model is refused before it writes
    before = (out / "scores.csv").read_text()
    with pytest.raises(UserError, match="made with other prompts; this run's prompts differ"):
        sweep(str(st_folder), [MockSTSTask()], layers="-1", config=CONFIG, output=out, progress=False, prompts="none")
    assert (out / "scores.csv").read_text() == before
