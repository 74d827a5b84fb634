"""File safety in one place: atomic files and folders (a killed run leaves old or new, never half) and quick
content fingerprints of local models and data."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from layer_mteb.common.errors import UserError

logger = logging.getLogger(__name__)


def _umask() -> int:
    """The process umask (reading it means setting it; set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(target: Path, write: Callable[[str], object]) -> None:
    """Call ``write(tmp_path)`` then rename the temporary file over ``target``, with a plain new file's mode
    (``mkstemp``'s 0600 would be unreadable to others on a shared filesystem)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextmanager
def building(target: Path) -> Iterator[Path]:
    """Build a folder under a temporary name; rename it into place only when the block finishes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        tmp.chmod(0o777 & ~_umask())  # mkdtemp makes 0700 folders
        yield tmp
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def plain_modes(folder: Path) -> None:
    """Give everything under ``folder`` the umask's plain modes: temporary-file writers leave 0600, unreadable to
    others on a shared disk."""
    mask = _umask()
    for path in [folder, *folder.rglob("*")]:
        path.chmod((0o777 if path.is_dir() else 0o666) & ~mask)


@contextmanager
def no_empty_folders_on_error(*folders: Path) -> Iterator[None]:
    """On an error inside the block, remove each of ``folders`` it created that holds no file: a failed command
    leaves no empty folder, and whatever it wrote stays."""
    new = [Path(f) for f in folders if not Path(f).exists()]
    try:
        yield
    except BaseException:
        for folder in new:
            if folder.is_dir() and not any(p.is_file() or p.is_symlink() for p in folder.rglob("*")):
                shutil.rmtree(folder, ignore_errors=True)
        raise


def check_new_folder(folder: Path, overwrite: bool = False) -> None:
    """A folder about to be written whole must be new or empty unless ``overwrite`` (a typo must not replace
    someone's files); a file in its place is always refused."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--output {str(folder)!r} is a file; choose a folder to write into")
    if folder.is_dir() and any(folder.iterdir()) and not overwrite:
        raise UserError(f"--output {str(folder)!r} exists and is not empty; choose another folder or add --overwrite")


def topmost_missing(folder: Path) -> Path:
    """The outermost folder that making ``folder`` would create (``folder`` itself when its parent exists)."""
    folder = Path(folder)
    while not folder.parent.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


def content_hash(path: Path) -> str:
    """SHA-256 over every file below ``path`` (names, sizes, contents); each file's digest is remembered by path,
    size and mtime in ``file-hashes.json`` under the cache, so unchanged GB of weights cost one ``stat`` per file."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    memo_path = cache_root() / "file-hashes.json"
    memo = _read_memo(memo_path)
    digest = hashlib.sha256()
    changed = False
    for file in files:
        stat = file.stat()
        key = str(file.resolve())
        stamp = [stat.st_size, stat.st_mtime_ns]
        known = memo.get(key)
        if not (isinstance(known, dict) and known.get("stamp") == stamp):
            memo[key] = known = {"stamp": stamp, "sha256": file_sha256(file)}
            changed = True
        name = file.relative_to(path) if path.is_dir() else file.name
        digest.update(f"{name}:{stat.st_size}:{known['sha256']}".encode())
    if changed:
        try:
            write_json(memo_path, memo)
        except OSError as err:  # a read-only cache only costs the next run the hashing again
            logger.warning("could not remember file hashes in %s: %s", memo_path, err)
    return digest.hexdigest()[:16]


def file_sha256(file: Path) -> str:
    """The SHA-256 of ``file``, read in 16 MiB blocks."""
    digest = hashlib.sha256()
    with file.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_root() -> Path:
    """Where converted models, vector caches and file hashes live: ``$LAYER_MTEB_CACHE``, else
    ``$XDG_CACHE_HOME/layer_mteb``, else ``~/.cache/layer_mteb``."""
    if os.environ.get("LAYER_MTEB_CACHE"):
        return Path(os.environ["LAYER_MTEB_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if Path(xdg).is_absolute() else Path.home() / ".cache"  # the spec: an absolute path only
    return base / "layer_mteb"


def _read_memo(memo_path: Path) -> dict:
    if not memo_path.exists():
        return {}
    try:
        memo = json.loads(memo_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        logger.warning(
            "ignoring unreadable file-hash memo %s (%s: %s); files are hashed again", memo_path, type(err).__name__, err
        )
        return {}
    return memo if isinstance(memo, dict) else {}


def write_json(target: Path, data: object) -> None:
    """Write ``data`` as indented JSON, atomically."""
    atomic_write(target, lambda tmp: Path(tmp).write_text(json.dumps(data, indent=2) + "\n"))


def text_hash(*parts: object) -> str:
    """A short hash of ``parts``' reprs, for keys and fingerprints."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
