"""The fast paths give the same vectors as the plain one: token-budget batches, forwards that stop after the deepest
requested block, the one-layer-at-a-time readout."""

from __future__ import annotations

import pytest
import torch
from conftest import FAMILIES, RAGGED_TEXTS, ForwardCounter, direct_vectors, tiny_config, tiny_model

from layer_mteb.common.config import READOUTS, EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.sweep import sweep
from layer_mteb.model.architectures import wrap_model
from layer_mteb.model.forward import encode_all_layers, length_sorted_batches
from layer_mteb.vectors.store import LayerCache

TEXTS = [
    *RAGGED_TEXTS,
    "Another short one.",
    "The quick brown fox jumps over the lazy dog, twice, and then sits down.",
]


class BlockCounter:
    """Counts calls of every block of a loaded model (forward pre-hooks on the block modules themselves)."""

    def __init__(self, loaded):
        self.calls = 0
        blocks = loaded.blocks
        self._handles = [b.register_forward_pre_hook(self._count) for b in blocks]

    def _count(self, *_) -> None:
        self.calls += 1

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


def deeper_model(family: str, tokenizer, n_layers: int = 4):
    """A tiny random model of ``family`` with ``n_layers`` blocks, so that stopping in the middle means something."""
    from transformers import AutoModel

    config = tiny_config(family, len(tokenizer))
    config.num_hidden_layers = n_layers
    if hasattr(config, "layer_types") and config.layer_types is not None:
        config.layer_types = (list(config.layer_types) * n_layers)[:n_layers]
    torch.manual_seed(0)
    return wrap_model(AutoModel.from_config(config), tokenizer, name=f"test/deeper-{family}")


@pytest.mark.parametrize(("batch_size", "budget"), [(32, None), (3, None), (32, 40), (2, 10), (100, 1)])
def test_batches_cover_every_text_once_longest_first_within_both_limits(batch_size, budget):
    lengths = [5, 1, 17, 3, 3, 40, 8, 2, 11, 6]
    batches = length_sorted_batches(lengths, batch_size, budget)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)
    for batch in batches:
        assert len(batch) <= batch_size
        if budget is not None and len(batch) > 1:
            assert len(batch) * max(lengths[i] for i in batch) <= budget


def test_a_token_budget_makes_short_batches_longer_and_long_batches_shorter():
    lengths = [100] * 4 + [5] * 40
    batches = length_sorted_batches(lengths, 64, max_tokens=200)
    assert [len(b) for b in batches] == [2, 2, 40]


@pytest.mark.parametrize("family", ["gpt2", "llama", "bert", "mamba"])
def test_token_budget_batching_gives_the_same_vectors(family, bert_tokenizer):
    loaded = tiny_model(family, bert_tokenizer)
    plain, _ = encode_all_layers(loaded, TEXTS, EncodeConfig(batch_size=32))
    budgeted, _ = encode_all_layers(loaded, TEXTS, EncodeConfig(batch_size=32, max_batch_tokens=24))
    torch.testing.assert_close(budgeted, plain, atol=1e-5, rtol=1e-5)


def test_token_budget_is_validated_and_not_part_of_the_key():
    with pytest.raises(UserError, match="--max-batch-tokens"):
        EncodeConfig(max_batch_tokens=0)
    assert EncodeConfig(max_batch_tokens=512).key() == EncodeConfig().key()


@pytest.mark.parametrize("family", FAMILIES)
def test_stopping_after_the_deepest_requested_block_keeps_those_layers_exact(family, bert_tokenizer):
    loaded = deeper_model(family, bert_tokenizer) if family in ("gpt2", "llama", "bert") else None
    loaded = loaded or tiny_model(family, bert_tokenizer)
    n = loaded.n_layers
    for readout in READOUTS:
        config = EncodeConfig(readout=readout, batch_size=3)
        full, _ = encode_all_layers(loaded, TEXTS, config)
        for depth in range(n + 1):
            counter = BlockCounter(loaded)
            try:
                shallow, _ = encode_all_layers(loaded, TEXTS, config, depth=depth)
            finally:
                counter.close()
            assert shallow.shape == (depth + 1, len(TEXTS), loaded.hidden_size)
            torch.testing.assert_close(shallow, full[: depth + 1], atol=1e-6, rtol=1e-6, msg=f"{readout} {depth}")
            n_batches = len(length_sorted_batches([1] * len(TEXTS), 3))
            blocks_run = max(depth, 1)
            assert counter.calls == n_batches * blocks_run, f"{readout} depth {depth}"
        assert loaded.n_layers == n  # the block list and the norm are swapped back
        assert not isinstance(loaded.final_norm, torch.nn.Identity)


def test_a_first_forward_that_stops_early_leaves_later_full_forwards_whole(bert_tokenizer):
    loaded = deeper_model("llama", bert_tokenizer)  # fresh: transformers installs its hidden-state hooks lazily
    encode_all_layers(loaded, TEXTS[:2], EncodeConfig(), depth=1)
    full, _ = encode_all_layers(loaded, TEXTS, EncodeConfig(batch_size=4))
    for i, text in enumerate(TEXTS):
        torch.testing.assert_close(full[:, i], direct_vectors(loaded, text, "final_norm", "mean"), atol=1e-5, rtol=1e-5)


def test_cache_of_a_given_depth_holds_and_serves_only_those_layers(bert_tokenizer, tmp_path):
    loaded = deeper_model("llama", bert_tokenizer)
    config = EncodeConfig()
    full = LayerCache(loaded, config, tmp_path / "full")
    want = full.vectors(TEXTS)
    full.save()
    shallow = LayerCache(loaded, config, depth=2)
    torch.testing.assert_close(shallow.vectors(TEXTS), want[:3], atol=1e-6, rtol=1e-6)
    with pytest.raises(ValueError, match=r"holds layers 0\.\.2"):
        shallow.vectors(TEXTS, layer=3)

    counter = ForwardCounter(loaded.model)
    try:
        reused = LayerCache(loaded, config, tmp_path / "full", depth=1)  # a deeper cache on disk serves it
        torch.testing.assert_close(reused.vectors(TEXTS, layer=1), want[1])
    finally:
        counter.close()
    assert counter.texts == 0

    shallow.save(tmp_path / "shallow")
    deeper = LayerCache(loaded, config, tmp_path / "shallow")  # too shallow for all layers: recomputed
    assert len(deeper) == 0
    torch.testing.assert_close(deeper.vectors(TEXTS), want, atol=1e-6, rtol=1e-6)


def test_sweep_of_shallow_layers_skips_deeper_blocks_and_scores_the_same(bert_tokenizer, data_dir):
    loaded = deeper_model("llama", bert_tokenizer)
    config = EncodeConfig(batch_size=64)

    def run(layers: str):
        quiet = {"vector_cache": False, "progress": False}
        return sweep(loaded, ["BIOSSES"], layers=layers, config=config, data_dir=data_dir, **quiet)

    full = run("all")
    counter = BlockCounter(loaded)
    try:
        shallow = run("0:2")
    finally:
        counter.close()
    assert shallow["layer"].tolist() == [0, 1]
    assert shallow["main_score"].tolist() == full["main_score"].tolist()[:2]
    full_counter = BlockCounter(loaded)
    try:
        run("all")
    finally:
        full_counter.close()
    assert counter.calls > 0
    assert counter.calls * loaded.n_layers == full_counter.calls  # layers 0..1 need block 1 of 4 only
