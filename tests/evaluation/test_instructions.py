"""Instruction embedders as mteb scores them: a local folder of a model that mteb's registry loads with its
instruction wrapper (here a tiny Qwen3 decoder saved like Qwen3-Embedding: last-token pooling, left padding,
Normalize, under that model's name) gets the registry entry's template and per-task instructions (queries only, as
mteb does for Qwen3-Embedding), so its last layer through ``layer-mteb run`` with no flags is ``mteb.evaluate`` of
mteb's own ``InstructSentenceTransformerModel`` of the same folder; the instructions are recorded and keep vectors
and results apart, and the exported layer carries them as prompts."""

from __future__ import annotations

import copy
import json
import warnings

import mteb
import pandas as pd
import pytest
import torch
from _task_files import search_task_file
from mteb.mocks.mock_tasks.retrieval import MockRetrievalTask
from mteb.types import PromptType

from layer_mteb.cli import main
from layer_mteb.common.errors import UserError
from layer_mteb.common.instructions import choose_instructions, registry_name
from layer_mteb.common.settings import RunSettings
from layer_mteb.evaluation.request import RunRequest
from layer_mteb.model.pipeline import read_pipeline
from layer_mteb.tasks.catalog import load_tasks
from layer_mteb.vectors.store import store_folder

REGISTERED = "Qwen/Qwen3-Embedding-0.6B"
#: the prompts Qwen3-Embedding's own folder declares (a query prompt, an empty document one)
FOLDER_PROMPTS = {"query": "Instruct: Given a web search query, retrieve relevant passages\nQuery:", "document": ""}


def _tiny_qwen3_folder(root, bert_tokenizer, name: str):
    """A 2-block random Qwen3 saved as a sentence-transformers folder the way Qwen3-Embedding is: last-token
    pooling, Normalize, a tokenizer that pads on the left, the model's prompts."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import AutoModel, Qwen3Config

    config = Qwen3Config(
        vocab_size=len(bert_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=512,
        pad_token_id=0,
        bos_token_id=101,
        eos_token_id=102,
    )
    torch.manual_seed(0)
    weights = root / "weights"
    AutoModel.from_config(config).save_pretrained(weights)
    tokenizer = copy.deepcopy(bert_tokenizer)
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(weights)
    transformer = Transformer(str(weights))
    pooling = Pooling(transformer.get_embedding_dimension(), "lasttoken")
    model = SentenceTransformer(modules=[transformer, pooling, Normalize()], prompts=FOLDER_PROMPTS, device="cpu")
    model.save(str(root / name))
    return root / name


@pytest.fixture(scope="module")
def qwen3_folder(tmp_path_factory, bert_tokenizer):
    """Named as the model it is a copy of, so the registry entry is found from the folder's name."""
    return _tiny_qwen3_folder(tmp_path_factory.mktemp("qwen3"), bert_tokenizer, "Qwen3-Embedding-0.6B")


@pytest.fixture(scope="module")
def search_file(tmp_path_factory):
    """A small Retrieval task of real sentences (mteb encodes its queries and documents differently) beside STS17
    (en-en, the copy the package ships)."""
    return search_task_file(tmp_path_factory.mktemp("search"))


def test_the_registry_entry_gives_the_template_and_queries_only_instructions(qwen3_folder, tmp_path):
    assert registry_name("local/Qwen3-Embedding-0.6B") == REGISTERED
    assert registry_name("local/some-other-folder") is None
    instructions = choose_instructions(None, "local/Qwen3-Embedding-0.6B")
    assert instructions is not None and instructions.model == REGISTERED and not instructions.to_passages
    task = MockRetrievalTask().metadata
    # the mock declares no prompt of its own: mteb's default for its type, in Qwen3-Embedding's template
    assert instructions.text_for(task, PromptType.query) == "Instruct: Retrieve text based on user query.\nQuery:"
    assert instructions.text_for(task, PromptType.document) == ""
    # a model mteb scores without instructions gets none; a named entry that has none is one line
    assert choose_instructions(None, "sentence-transformers/all-MiniLM-L6-v2") is None
    assert choose_instructions("none", "local/Qwen3-Embedding-0.6B") is None
    with pytest.raises(UserError, match="not with its instruction wrapper"):
        choose_instructions("sentence-transformers/all-MiniLM-L6-v2", "local/x")
    with pytest.raises(UserError, match="give --instructions or a --prompts file, not both"):
        (prompts := tmp_path / "prompts.yaml").write_text("query: 'q: '\n")
        RunRequest(str(qwen3_folder), "STS12", instructions=REGISTERED, prompts=str(prompts))
    pipeline = read_pipeline(qwen3_folder)
    assert (pipeline.pooling, pipeline.normalize) == ("last", True)


def test_instructions_key_the_vector_store_and_the_results():
    from layer_mteb.common.config import EncodeConfig

    encode = EncodeConfig(attention="causal")
    plain = RunSettings(encode)
    instructed = RunSettings(encode, instructions=choose_instructions(REGISTERED, "local/x"))
    assert "instructions" in instructed.experiment(2, 2) and "instructions" not in plain.experiment(2, 2)

    class _Model:  # what store_folder reads of a loaded model
        name, revision = "local/x", "r"

    assert store_folder(_Model(), plain, "T") != store_folder(_Model(), instructed, "T")


@pytest.mark.slow
def test_the_last_layer_with_no_flags_is_mtebs_instruct_wrapper_of_the_same_folder(
    qwen3_folder, search_file, demo_data_dir, tmp_path
):
    out = tmp_path / "run"
    tasks = str(search_file)
    argv = ["run", "--model", str(qwen3_folder), "--tasks", tasks, "--data-dir", str(demo_data_dir)]
    assert main([*argv, "--layers", "-1", "--eval-workers", "1", "--output", str(out)]) == 0
    meta = mteb.get_model_meta(REGISTERED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrapper = meta.loader(str(qwen3_folder), revision=None, device="cpu", **(meta.loader_kwargs or {}))
        wrapper.mteb_model_meta = meta
        assert wrapper.model.tokenizer.padding_side == "left"  # mteb's side pads on the left
        result = mteb.evaluate(wrapper, load_tasks(tasks, demo_data_dir), cache=None, show_progress_bar=False)
    theirs = {r.task_name: r.get_score() for r in result.task_results}
    ours = pd.read_csv(out / "scores.csv").set_index("task")
    assert set(theirs) == set(ours.index) == {"TinySearch", "STS17"}
    for task, score in theirs.items():
        assert ours.loc[task, "main_score"] == pytest.approx(score, abs=1e-6), task
    assert set(ours["pooling"]) == {"last"} and set(ours["normalize"]) == {True}
    entry = json.loads((out / "run.json").read_text())["tasks"][0]
    assert entry["instructions"]["model"] == REGISTERED
    assert entry["instructions"]["apply_instruction_to_passages"] is False
    # without the instructions the model reads other texts: another score, kept in its own folder
    plain = tmp_path / "plain"
    assert main([*argv, "--layers", "-1", "--instructions", "none", "--output", str(plain)]) == 0
    plain_scores = pd.read_csv(plain / "scores.csv").set_index("task")["main_score"]
    assert plain_scores.loc["STS17"] != ours.loc["STS17", "main_score"]
    before = (out / "scores.csv").read_text()  # a folder holds one setting: no uninstructed rows beside these
    assert main([*argv, "--layers", "-1", "--instructions", "none", "--output", str(out)]) != 0
    assert (out / "scores.csv").read_text() == before
    # the exported layer says the instructions as sentence-transformers prompts under each task's name; mteb picks
    # them for the tasks of its registry (a custom task's name is no key it takes), and scores the layer alike
    exported = tmp_path / "exported"
    export = ["export", "--run", str(out), "--model", str(qwen3_folder), "--layer", "2"]
    assert main([*export, "--output", str(exported)]) == 0
    prompts = json.loads((exported / "config_sentence_transformers.json").read_text())["prompts"]
    assert prompts["TinySearch-query"].startswith("Instruct: ") and prompts["TinySearch-document"] == ""
    assert prompts["STS17"].startswith("Instruct: ")
    from sentence_transformers import SentenceTransformer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SentenceTransformer(str(exported), device="cpu")
        again = mteb.evaluate(model, load_tasks("STS17", demo_data_dir), cache=None, show_progress_bar=False)
    assert again.task_results[0].get_score() == pytest.approx(theirs["STS17"], abs=1e-6)
