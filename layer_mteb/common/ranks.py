"""This process's share of the host when ``accelerate launch`` / ``torchrun`` starts one process per GPU: each sees
the whole host, so cores and memory are divided by ``LOCAL_WORLD_SIZE`` and ``LOCAL_RANK`` picks the GPU that ``cuda``
without an index (mteb's) means.
"""

from __future__ import annotations

import os

from layer_mteb.common.errors import UserError


def local_world_size() -> int:
    """How many processes of one launch share this host (1 when not launched)."""
    text = os.environ.get("LOCAL_WORLD_SIZE", "1")
    if not text.isdigit() or int(text) < 1:
        raise UserError(f"LOCAL_WORLD_SIZE={text!r} is not a positive integer (the launcher sets it; unset it)")
    return int(text)


def host_share(amount: int) -> int:
    """This process's part of ``amount`` (cores, bytes) of the host, at least 1."""
    return max(1, amount // local_world_size())


def use_rank_device(device: str) -> None:
    """Under a launch with CUDA, make ``device``'s index (else ``LOCAL_RANK``) the GPU a bare ``cuda`` means."""
    rank = os.environ.get("LOCAL_RANK")
    if rank is None or not device.startswith("cuda"):
        return
    import torch  # here: the command line checks its options before torch loads

    if not torch.cuda.is_available():
        return
    index = torch.device(device).index
    torch.cuda.set_device(index if index is not None else int(rank))
