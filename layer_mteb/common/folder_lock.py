"""The writers' lock of a run folder: one writer at a time.

Every read-modify-write of a table (and every whole-table write) holds an exclusive lock on the folder
(:func:`locked`, a ``filelock`` OS lock on ``.layer-mteb.lock``), so two commands writing one folder at once (two
array jobs of a sweep, a ``metrics`` beside a ``run``) serialise and every row of both stays. The OS releases the lock
when its process dies, killed or not, so a crashed writer never blocks the next one; its stale ``.holder`` note is
overwritten by the next holder. A writer that waits longer than ``$LAYER_MTEB_LOCK_TIMEOUT`` seconds (default 300)
stops with one line naming the process that holds the lock. Where the file system refuses ``flock`` (Lustre without
``-o flock``) filelock (>= 4.1.0) takes turns through a marker file instead, taking over the marker of a holder dead
on this host; the project says so once per folder (:func:`lacks_flock`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from layer_mteb.common.errors import UserError

#: the lock's lines are the run folder's, under the name they have always been logged with
logger = logging.getLogger("layer_mteb.common.run_folder")

LOCK_FILE = ".layer-mteb.lock"
#: who holds the lock: pid, host, command and since when (written by the holder, for a writer that waits too long)
LOCK_HOLDER_FILE = ".layer-mteb.lock.holder"
LOCK_TIMEOUT_ENV = "LAYER_MTEB_LOCK_TIMEOUT"
DEFAULT_LOCK_TIMEOUT = 300.0
#: the start of filelock's own warning where ``flock`` is refused: the project says it in its words instead
FILELOCK_FALLBACK_WARNING = "flock not supported on this filesystem"

#: one lock object per folder and process, so a writer may nest (an update inside a locked merge) without waiting
#: on itself; ``filelock`` keeps a count per thread, so threads of one process serialise too
_LOCKS: dict[Path, Any] = {}
_LOCKS_GUARD = threading.Lock()


def lock_timeout() -> float:
    """Seconds a writer waits for a run folder's lock (``$LAYER_MTEB_LOCK_TIMEOUT``, default 300)."""
    raw = os.environ.get(LOCK_TIMEOUT_ENV, "").strip()
    try:
        return float(raw) if raw else DEFAULT_LOCK_TIMEOUT
    except ValueError:
        raise UserError(f"${LOCK_TIMEOUT_ENV} must be a number of seconds, not {raw!r}") from None


def _folder_lock(folder: Path):
    from filelock import FileLock

    key = folder.resolve()
    with _LOCKS_GUARD:
        if key not in _LOCKS:
            if lacks_flock(key):
                _say_flockless(key)
            _LOCKS[key] = FileLock(key / LOCK_FILE)
        return _LOCKS[key]


def lacks_flock(folder: Path) -> bool:
    """Whether ``folder``'s file system refuses ``flock`` (``ENOSYS``, as Lustre mounted without ``-o flock``), where
    filelock falls back to a marker file. Probed on an unnamed scratch file in the folder, never on the lock file:
    where ``flock`` is missing, that file's existence is the lock."""
    import errno
    import tempfile

    try:
        import fcntl
    except ImportError:  # Windows: filelock locks with msvcrt, which every local and SMB disk honours
        return False
    try:
        with tempfile.TemporaryFile(dir=folder) as probe:
            fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        return err.errno == errno.ENOSYS
    return False


def _say_flockless(folder: Path) -> None:
    """One line of the project's own, once per folder and process, in place of filelock's warning."""
    import warnings

    warnings.filterwarnings("ignore", message=FILELOCK_FALLBACK_WARNING, category=UserWarning)
    logger.warning(
        "run folder %s: its file system has no flock (as Lustre mounted without -o flock), so writers take turns "
        "through a marker file: every row stays, and a writer killed on this host is taken over at once, but one "
        "killed on another host holds the folder until $%s (docs/scale.md)",
        folder,
        LOCK_TIMEOUT_ENV,
    )


def _holder(folder: Path) -> str:
    """Who holds ``folder``'s lock, as its holder wrote it (``another process`` where it wrote nothing)."""
    try:
        note = json.loads((folder / LOCK_HOLDER_FILE).read_text())
        return f"pid {note['pid']} on {note['host']} ({note['command']}, since {note['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def _command() -> str:
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    return " ".join([name, *sys.argv[1:2]])


@contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s writers' lock for the block (made with the folder where it is new; nested holds in one
    thread reuse the outer one). A writer that cannot take it within :func:`lock_timeout` seconds stops with one
    line naming the holder."""
    from filelock import Timeout

    folder.mkdir(parents=True, exist_ok=True)
    lock = _folder_lock(folder)
    outermost = not lock.is_locked
    timeout = lock_timeout()
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise UserError(
            f"run folder {folder} is being written by {_holder(folder)}: waited {timeout:.0f} s for it; "
            f"let it finish, or wait longer with ${LOCK_TIMEOUT_ENV}"
        ) from None
    note = folder / LOCK_HOLDER_FILE
    try:
        if outermost:
            since = time.strftime("%Y-%m-%d %H:%M:%S")
            holder = {"pid": os.getpid(), "host": socket.gethostname(), "command": _command(), "since": since}
            note.write_text(json.dumps(holder) + "\n")
        yield
    finally:
        if outermost:
            note.unlink(missing_ok=True)
        lock.release()
