"""Instruction embedders whose mteb loader changes how the model reads its texts: e5-mistral-7b-instruct and
gte-Qwen2 append the end-of-sequence token (``add_eos_token``; e5-mistral also rebuilds its tokenizer's
post-processor with ``tokenizer_kwargs={"add_bos_token": True}``) and pool on it, and load the weights in float16.
A tiny random Mistral and Qwen2 saved like them (last-token pooling, Normalize, their tokenizers' special tokens, the
real model's name) get all of it with no flags, so their last layer through ``layer-mteb run`` is ``mteb.evaluate``
of mteb's own loader of the same folder; the tokenizer arguments and dtype are recorded, key the vectors, and the
exported layer carries them. A loader that cannot be read, or one that does what the layers cannot, is said."""

from __future__ import annotations

import json
import logging
import warnings

import mteb
import pandas as pd
import pytest
import torch
from _task_files import SENTENCES, search_task_file
from mteb.models.instruct_wrapper import InstructSentenceTransformerModel

from layer_mteb.cli import main
from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.instructions import Instructions, choose_instructions, instructions_of
from layer_mteb.common.settings import RunSettings
from layer_mteb.evaluation.request import own_settings
from layer_mteb.model.loading import load_model
from layer_mteb.model.names import PACKAGED_MODELS
from layer_mteb.tasks.catalog import load_tasks
from layer_mteb.vectors.store import store_folder

E5_MISTRAL = "intfloat/e5-mistral-7b-instruct"
GTE_QWEN2 = "Alibaba-NLP/gte-Qwen2-1.5B-instruct"
#: words the tiny tokenizers learn their merges from (every byte or letter is a token too)
CORPUS = [*SENTENCES, "Instruct: Retrieve semantically similar text.\nQuery: a cat by the window", "markets music rain"]


def _byte_level_bpe(special: list[str]):
    """A small byte-level BPE (Qwen2's kind of tokenizer), learned offline from :data:`CORPUS`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    bpe.train_from_iterator(
        CORPUS, trainers.BpeTrainer(vocab_size=500, special_tokens=special, initial_alphabet=alphabet)
    )
    return bpe


def _metaspace_bpe(special: list[str]):
    """A small SentencePiece-style BPE (Mistral's kind of tokenizer), learned offline from :data:`CORPUS`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace()
    bpe.decoder = decoders.Metaspace()
    letters = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:;!?'\"-()\n")
    bpe.train_from_iterator(
        CORPUS, trainers.BpeTrainer(vocab_size=500, special_tokens=special, initial_alphabet=letters)
    )
    return bpe


def _save_like(root, name: str, model_config, tokenizer, tokenizer_config: dict):
    """A 2-block random model under ``name`` as a sentence-transformers folder of last-token pooling and Normalize,
    its ``tokenizer_config.json`` amended by ``tokenizer_config`` (what the real model's says)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import AutoModel

    torch.manual_seed(0)
    weights = root / "weights"
    AutoModel.from_config(model_config).save_pretrained(weights)
    tokenizer.save_pretrained(weights)
    transformer = Transformer(str(weights))
    pooling = Pooling(transformer.get_embedding_dimension(), "lasttoken")
    SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu").save(str(root / name))
    path = root / name / "tokenizer_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **tokenizer_config}, indent=2))
    return root / name


def _decoder_sizes(tokenizer) -> dict:
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 512,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }


@pytest.fixture(scope="module")
def e5_mistral_folder(tmp_path_factory):
    """Saved as e5-mistral-7b-instruct is: a Llama tokenizer whose ``tokenizer.json`` adds only ``<s>`` while its
    ``tokenizer_config.json`` says ``add_eos_token`` (which transformers 5 ignores), ``</s>`` as the pad token."""
    from transformers import LlamaTokenizer, MistralConfig

    tokenizer = LlamaTokenizer(
        tokenizer_object=_metaspace_bpe(["<unk>", "<s>", "</s>"]),
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="</s>",
        add_bos_token=True,
        add_eos_token=False,
    )
    config = MistralConfig(**_decoder_sizes(tokenizer), head_dim=16, bos_token_id=tokenizer.bos_token_id)
    said = {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": True}
    return _save_like(tmp_path_factory.mktemp("e5"), "e5-mistral-7b-instruct", config, tokenizer, said)


@pytest.fixture(scope="module")
def gte_qwen2_folder(tmp_path_factory):
    """Saved as gte-Qwen2-1.5B-instruct is: a byte-level Qwen2 tokenizer, no start token, ``<|endoftext|>`` the end
    and the pad token."""
    from transformers import Qwen2Config, Qwen2Tokenizer

    tokenizer = Qwen2Tokenizer(
        tokenizer_object=_byte_level_bpe(["<|endoftext|>"]),
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
    )
    config = Qwen2Config(**_decoder_sizes(tokenizer))
    return _save_like(tmp_path_factory.mktemp("gte"), "gte-Qwen2-1.5B-instruct", config, tokenizer, {})


@pytest.fixture(scope="module")
def search_file(tmp_path_factory):
    """A small Retrieval task of real sentences beside STS17 (en-en, the copy the package ships)."""
    return search_task_file(tmp_path_factory.mktemp("search"))


def test_the_registry_entry_gives_the_end_token_the_tokenizer_arguments_and_the_dtype(
    e5_mistral_folder, gte_qwen2_folder
):
    e5 = choose_instructions(None, "local/e5-mistral-7b-instruct")
    assert e5 is not None and e5.model == E5_MISTRAL
    assert e5.tokenizer_arguments == {"add_bos_token": True, "add_eos_token": True} and e5.dtype == "float16"
    gte = choose_instructions(None, "local/gte-Qwen2-1.5B-instruct")
    assert gte is not None and gte.model == GTE_QWEN2
    assert gte.tokenizer_arguments == {"add_eos_token": True} and gte.dtype == "float16"
    # the dtype is the run's own setting under --protocol model, beside the folder's pipeline; --instructions none
    # or the paper's protocol drop it with the instructions
    own = own_settings([str(e5_mistral_folder)], None, "model")
    assert own.settings == {"pooling": "last", "normalize": True, "max_length": 512, "dtype": "float16"}
    assert own.source.endswith(f"dtype float16 of mteb's registry entry {E5_MISTRAL}")
    assert "dtype" not in own_settings([str(e5_mistral_folder)], None, "model", "none").settings
    assert own_settings([str(gte_qwen2_folder)], None, "paper").settings == {}
    # the tokenizer made with them appends the end token: the last token, the one pooled, is </s> (<|endoftext|>)
    for folder, instructions in ((e5_mistral_folder, e5), (gte_qwen2_folder, gte)):
        plain = load_model(str(folder)).tokenizer
        made = load_model(str(folder), tokenizer=instructions.tokenizer_arguments).tokenizer
        assert plain("a cat").input_ids[-1] != plain.eos_token_id
        assert made("a cat").input_ids[-1] == made.eos_token_id
        assert made("a cat").input_ids[:-1] == plain("a cat").input_ids  # e5-mistral keeps its <s>
        cut = made(["a cat sat on the mat " * 20], truncation=True, max_length=8).input_ids[0]
        assert len(cut) == 8 and cut[-1] == made.eos_token_id  # truncated before the end token is appended


def test_the_tokenizer_arguments_and_dtype_key_the_vectors_the_results_and_the_record():
    encode = EncodeConfig(attention="causal", pooling="last", normalize=True)
    e5 = choose_instructions(E5_MISTRAL, "local/x")
    kept = {k: v for k, v in e5.arguments.items() if k not in ("add_eos_token", "tokenizer_kwargs")}
    without = Instructions(E5_MISTRAL, kept)
    assert e5.digest() != without.digest()  # the same template and instructions, other token ids

    class _Model:  # what store_folder reads of a loaded model
        name, revision = "local/x", "r"

    keys = {
        store_folder(_Model(), RunSettings(encode, instructions=e5), "T"),
        store_folder(_Model(), RunSettings(encode, instructions=without), "T"),
        store_folder(_Model(), RunSettings(EncodeConfig(**{**vars(encode), "dtype": "float16"}), instructions=e5), "T"),
    }
    assert len(keys) == 3
    settings = RunSettings(encode, instructions=e5)
    assert (
        settings.experiment(2, 2)["instructions"]
        != RunSettings(encode, instructions=without).experiment(2, 2)["instructions"]
    )
    record = settings.record(1)["instructions"]
    assert record["tokenizer_arguments"] == {"add_bos_token": True, "add_eos_token": True}
    assert record["dtype"] == "float16"


def loads_a_tokenizer_first(model_name: str, revision: str, **kwargs):
    """A registry loader as some are written: it loads the model's tokenizer (here: one never found) before it calls
    mteb's instruction wrapper, so reading its arguments stops at the tokenizer."""
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained("no-such-org/no-such-model", local_files_only=True)
    return InstructSentenceTransformerModel(model_name, revision, **kwargs)


def test_a_loader_that_cannot_be_read_is_one_warning_naming_the_model_and_what_is_not_applied(caplog):
    meta = mteb.get_model_meta(E5_MISTRAL).model_copy(update={"loader": loads_a_tokenizer_first})
    with caplog.at_level(logging.WARNING, logger="layer_mteb"):
        assert instructions_of(meta, None) is None
    [line] = [r.getMessage() for r in caplog.records if r.name.startswith("layer_mteb")]
    assert line.startswith(f"{E5_MISTRAL}: mteb's loader ") and "loads_a_tokenizer_first" in line
    assert "instructions, template, tokenizer arguments and dtype are not applied" in line
    assert "\n" not in line
    with pytest.raises(UserError, match="failed before it reached its instruction wrapper"):
        instructions_of(meta, E5_MISTRAL)


def test_what_the_layers_cannot_reproduce_is_refused_in_one_line():
    # GritLM pools without its prompt tokens; a truncated embedding (embed_dim) is no layer's either
    with pytest.raises(UserError, match=r"GritLM/GritLM-7B: mteb's loader sets include_prompt=False, which the layers"):
        choose_instructions(None, "local/GritLM-7B")
    with pytest.raises(UserError, match=r"embed_dim=1024.*--instructions none"):
        choose_instructions(None, "local/Octen-Embedding-4B-INT8")
    assert choose_instructions("none", "local/GritLM-7B") is None
    # the packaged models are no instruction embedders: their runs need not read the registry before loading
    assert all(choose_instructions(None, packaged.hub_id) is None for packaged in PACKAGED_MODELS.values())


#: how far mteb's own float16 score of STS17 moves with nothing but its batch size (32: 0.545331, 8: 0.545218, 1:
#: 0.545308 for the tiny e5-mistral folder): float16 rounds each batch's sums in their own order, so the last bits of a
#: text's vector depend on its batch-mates, in mteb's loader as in the layers. A correlation of 500 pairs feels them;
#: retrieval ranks and classification accuracy here do not (the same at every batch size)
FLOAT16_BATCH_SPREAD = 2e-4


def _mtebs_loader_scores(folder, registered: str, tasks, dtype: str | None = None) -> dict[str, float]:
    """``mteb.evaluate`` of mteb's own loader of ``folder`` (its registry entry ``registered``, its weights in
    ``dtype`` where given), on the CPU."""
    meta = mteb.get_model_meta(registered)
    arguments = {**(meta.loader_kwargs or {}), **({"model_kwargs": {"dtype": dtype}} if dtype else {})}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrapper = meta.loader(str(folder), revision=None, device="cpu", **arguments)
        wrapper.mteb_model_meta = meta
        # on the CPU too mteb's loader computes in the entry's float16, and pools the appended end token
        assert next(wrapper.model.parameters()).dtype == getattr(torch, dtype or "float16")
        tokenizer = wrapper.model.tokenizer
        assert tokenizer("a cat").input_ids[-1] == tokenizer.eos_token_id
        result = mteb.evaluate(wrapper, tasks, cache=None, show_progress_bar=False)
    return {r.task_name: r.get_score() for r in result.task_results}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fixture", "registered"), [("e5_mistral_folder", E5_MISTRAL), ("gte_qwen2_folder", GTE_QWEN2)]
)
def test_the_last_layer_with_no_flags_is_mtebs_loader_of_the_same_folder(
    fixture, registered, request, search_file, demo_data_dir, tmp_path
):
    from mteb.mocks.mock_tasks.classification import MockClassificationTask

    from layer_mteb import sweep

    folder = request.getfixturevalue(fixture)
    tasks = str(search_file)
    argv = ["run", "--model", str(folder), "--tasks", tasks, "--data-dir", str(demo_data_dir), "--layers", "-1"]
    out = tmp_path / "run"
    assert main([*argv, "--eval-workers", "1", "--output", str(out)]) == 0
    theirs = _mtebs_loader_scores(folder, registered, [*load_tasks(tasks, demo_data_dir), MockClassificationTask()])
    ours = pd.read_csv(out / "scores.csv").set_index("task")
    assert set(ours.index) == {"TinySearch", "STS17"}
    assert ours.loc["TinySearch", "main_score"] == pytest.approx(theirs["TinySearch"], abs=1e-6)
    assert ours.loc["STS17", "main_score"] == pytest.approx(theirs["STS17"], abs=FLOAT16_BATCH_SPREAD)
    mock = sweep(str(folder), [MockClassificationTask()], layers=[-1], progress=False, vector_cache=False)
    assert float(mock["main_score"].iloc[0]) == pytest.approx(theirs["MockClassificationTask"], abs=1e-6)
    assert set(ours["dtype"]) == set(mock["dtype"]) == {"float16"} and set(ours["pooling"]) == {"last"}
    entry = json.loads((out / "run.json").read_text())["tasks"][0]
    assert entry["instructions"]["model"] == registered
    assert entry["instructions"]["tokenizer_arguments"]["add_eos_token"] is True
    assert entry["instructions"]["dtype"] == "float16"
    assert entry["settings_from"].endswith(f"dtype float16 of mteb's registry entry {registered}")
    # in float32 on both sides every score agrees to 1e-6: the end token and the tokenizer's arguments are exact, and
    # what is left above is float16's arithmetic
    out32 = tmp_path / "run32"
    assert main([*argv, "--dtype", "float32", "--output", str(out32)]) == 0
    theirs32 = _mtebs_loader_scores(folder, registered, load_tasks(tasks, demo_data_dir), dtype="float32")
    ours32 = pd.read_csv(out32 / "scores.csv").set_index("task")["main_score"]
    for task, score in theirs32.items():
        assert ours32.loc[task] == pytest.approx(score, abs=1e-6), task
    # the exported layer makes the same token ids in the same dtype: it is mteb's loader of the folder again
    exported = tmp_path / "exported"
    assert main(["export", "--run", str(out), "--model", str(folder), "--layer", "2", "--output", str(exported)]) == 0
    from sentence_transformers import SentenceTransformer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SentenceTransformer(str(exported), device="cpu")
        assert model.tokenizer("a cat").input_ids[-1] == model.tokenizer.eos_token_id
        assert next(model.parameters()).dtype == torch.float16
        again = mteb.evaluate(model, load_tasks("STS17", demo_data_dir), cache=None, show_progress_bar=False)
    assert again.task_results[0].get_score() == pytest.approx(theirs["STS17"], abs=1e-6)


def test_a_dtype_given_is_the_users_and_counts_against_the_protocol_only_where_the_entry_sets_one(e5_mistral_folder):
    from layer_mteb.common.instructions import NONE
    from layer_mteb.evaluation.request import RunRequest

    own = own_settings([str(e5_mistral_folder)], None, "model")
    assert own.describe(EncodeConfig(**own.settings)) == own.source
    assert own.describe(EncodeConfig(**{**own.settings, "dtype": "float32"})) == "given"
    plain = own_settings([str(e5_mistral_folder)], None, "model", NONE)  # the pipeline alone: no dtype of its own
    assert plain.describe(EncodeConfig(**plain.settings, dtype="bfloat16")) == plain.source
    assert RunRequest(str(e5_mistral_folder), "STS12").config.dtype == "float16"
