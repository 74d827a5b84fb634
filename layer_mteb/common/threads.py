"""The one place layer_mteb changes torch's thread count: a context manager that puts the previous count back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the body with torch on ``n`` intra-op threads, then restore the count it had, also on an error.

    torch's thread count is process-wide: the forward pass wants every core, mteb's evaluators and the eigensolvers
    one (their last bits and their speed depend on it). A count changed and not restored would leak into whatever
    runs next, so every change goes through here. The count is set even when it already is ``n``: in a forked
    worker that call is what gives the child a thread pool of its own (skipping it hung a worker in its first matmul).
    """
    import torch

    if n < 1:
        raise ValueError(f"torch_threads needs a positive thread count, got {n}")
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
