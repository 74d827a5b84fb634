"""This process's share of the host when ``accelerate launch`` / ``torchrun`` starts one process per GPU.

Every process of a launch sees the whole host: each would take every CPU core for its evaluation workers and half
the host's memory for its vectors, and each would do CUDA work on GPU 0 wherever code says ``cuda`` without an
index (mteb does). The launcher says how many processes share this host (``LOCAL_WORLD_SIZE``) and which one this is
(``LOCAL_RANK``); what is shared is divided by the first, the GPU is chosen by the second.
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
    """Make this process's GPU the current one under a launch, so ``cuda`` without an index (mteb's, torch's caches)
    means it: the index ``device`` names, else ``LOCAL_RANK``. Nothing happens without a launch or without CUDA."""
    rank = os.environ.get("LOCAL_RANK")
    if rank is None or not device.startswith("cuda"):
        return
    import torch  # here: the command line checks its options before torch loads

    if not torch.cuda.is_available():
        return
    index = torch.device(device).index
    torch.cuda.set_device(index if index is not None else int(rank))
