"""torch's thread count changes in one place (layer_mteb/common/threads.py) and is always put back."""

from __future__ import annotations

import pytest
import torch

from layer_mteb.common.threads import torch_threads
from layer_mteb.evaluation.workers import one_thread
from layer_mteb.metrics.representation import single_threaded


@pytest.fixture(autouse=True)
def _two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_the_count_is_set_inside_and_restored_after():
    with torch_threads(1):
        assert torch.get_num_threads() == 1
        with torch_threads(3):
            assert torch.get_num_threads() == 3
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


def test_the_count_is_restored_after_an_error():
    with pytest.raises(KeyError), torch_threads(1):
        raise KeyError("inside")
    assert torch.get_num_threads() == 2


def test_an_unchanged_count_stays_and_a_bad_one_is_refused():
    with torch_threads(2):
        assert torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="positive"), torch_threads(0):
        pass
    assert torch.get_num_threads() == 2


def test_evaluators_and_eigensolvers_run_on_one_thread_and_give_the_count_back():
    with one_thread():
        assert torch.get_num_threads() == 1
    with single_threaded(torch.zeros(2)):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


def test_a_cache_fill_runs_the_forward_on_the_threads_it_was_made_with(tiny_gpt_neox):
    """The sweep scores layers on one thread; a text met then is encoded on the cache's own count, then back to 1."""
    from layer_mteb.common.config import EncodeConfig
    from layer_mteb.vectors.store import LayerCache

    cache = LayerCache(tiny_gpt_neox, EncodeConfig(), memory_limit=10**8)
    seen = []
    handle = tiny_gpt_neox.model.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    try:
        with one_thread():
            cache.fill(["a short text", "another one"])
            assert torch.get_num_threads() == 1
    finally:
        handle.remove()
    assert seen and set(seen) == {2}
