"""Offline without being told: when the hub cannot be reached, say so in one INFO line and use only cached files.

Without ``HF_HUB_OFFLINE``, huggingface_hub retries every request with backoff (five retries, about 30 s per file,
each logged twice), so a hub model id on a machine without network printed some twenty retry lines and took a
minute before its error. One short probe of the hub's address decides instead; the command line runs it only when
a model or a task's data may come from the hub, and only once its arguments have been checked.
"""

from __future__ import annotations

import logging
import os
import socket
from urllib.parse import urlparse

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 3.0


def hub_reachable(timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the hub endpoint (``HF_ENDPOINT``, default huggingface.co) opens in ``timeout``."""
    from huggingface_hub import constants

    endpoint = urlparse(constants.ENDPOINT)
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def offline_unless_reachable() -> None:
    """Switch huggingface_hub (and libraries that read ``HF_HUB_OFFLINE`` later) to offline mode when the hub cannot
    be reached; a no-op when ``HF_HUB_OFFLINE`` is already set either way."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip():
        return
    if hub_reachable():
        return
    from huggingface_hub import constants

    logger.info(
        "the hub (%s) cannot be reached: using locally cached models and data only (HF_HUB_OFFLINE=1 skips this check)",
        urlparse(constants.ENDPOINT).hostname,
    )
    os.environ["HF_HUB_OFFLINE"] = "1"  # worker processes and libraries imported from here on
    constants.HF_HUB_OFFLINE = True  # huggingface_hub (and transformers through it), imported already
