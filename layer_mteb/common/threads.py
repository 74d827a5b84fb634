"""The one place layer_mteb changes torch's thread count: a context manager that puts the previous count back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the body with torch on ``n`` intra-op threads, then restore the process-wide count, also on an error. It is
    set even when already ``n``: that gives a forked worker its own pool (skipping it hung one in its first matmul)."""
    import torch

    if n < 1:
        raise ValueError(f"torch_threads needs a positive thread count, got {n}")
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
