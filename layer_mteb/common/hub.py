"""Whether the Hugging Face hub answers, decided once per process for every command and public function.

Without ``HF_HUB_OFFLINE`` and no network, huggingface_hub and datasets retry each file for about 30 s with twenty
log lines before they fail with a traceback. One short TCP probe instead decides, the first time anything asks,
whether the hub is there; where it is not, the process (and every worker it starts) is switched offline, so each
loader goes straight to its shipped, local or cached copy, and a name with no such copy is one clear error.
``HF_HUB_OFFLINE`` set either way is the user's decision and is never probed.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from urllib.parse import urlparse

logger = logging.getLogger(__name__)

#: long enough for a real connection across the world, short enough that a dropped packet costs a few seconds
PROBE_TIMEOUT_S = 3.0
_probed = False
#: the probe found the hub unreachable (not the user's ``HF_HUB_OFFLINE``): what an error line says
_unreachable = False


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


def _host() -> str:
    from huggingface_hub import constants

    endpoint = urlparse(constants.ENDPOINT)
    return endpoint.netloc or constants.ENDPOINT


def _offline_set() -> bool | None:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) as the user set it, ``None`` where neither is set."""
    value = (os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or "").strip()
    return None if not value else value.upper() in {"1", "ON", "YES", "TRUE"}


def _go_offline() -> None:
    """Tell every library that reads the switch, imported already or later, that the hub is not there."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # worker processes, and libraries imported from here on
    from huggingface_hub import constants

    constants.HF_HUB_OFFLINE = True  # huggingface_hub, and transformers through it
    datasets_config = sys.modules.get("datasets.config")
    if datasets_config is not None:  # datasets copies the switch when it is imported
        datasets_config.HF_HUB_OFFLINE = datasets_config.HF_DATASETS_OFFLINE = True


def offline_unless_reachable() -> None:
    """Probe the hub now, unless ``HF_HUB_OFFLINE`` is set either way, and switch offline (one INFO line) where it
    does not answer."""
    if _offline_set() is not None or hub_reachable():
        return
    logger.info(
        "the hub (%s) cannot be reached: using the packaged, local and cached copies only (HF_HUB_OFFLINE=1 skips "
        "this check)",
        _host(),
    )
    global _unreachable
    _unreachable = True
    _go_offline()


def hub_online() -> bool:
    """Whether models and data may come from the hub: ``HF_HUB_OFFLINE`` as huggingface_hub holds it, the hub
    probed the first time nobody has decided (the probe's answer then holds for the process and its workers)."""
    global _probed
    if not _probed:
        _probed = True
        offline_unless_reachable()
    from huggingface_hub import constants

    return not constants.HF_HUB_OFFLINE


def hub_offline() -> bool:
    """``not hub_online()``: the packaged or local copy of a task or model is to be used, the hub never asked."""
    return not hub_online()


def offline_reason() -> str:
    """Why the hub is not asked, for an error line that says what to do: the user's ``HF_HUB_OFFLINE``, or the
    probe."""
    return f"the hub ({_host()}) cannot be reached" if _unreachable else "HF_HUB_OFFLINE is set"


def online_advice() -> str:
    """How to let the hub be asked again, matching :func:`offline_reason`."""
    return "run where the hub answers" if _unreachable else "unset HF_HUB_OFFLINE where the hub answers"
