"""File safety in one place: atomic files and folders (a killed run leaves old or new, never half) and quick
content fingerprints for local models and data."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def atomic_write(target: Path, write: Callable[[str], object]) -> None:
    """Call ``write(tmp_path)`` then rename the temporary file over ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-")
    os.close(fd)
    try:
        write(tmp)
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
        yield tmp
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def content_hash(path: Path) -> str:
    """Sizes plus the first and last MiB of every file below ``path``: fast for GB weights, changes with content."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        size = file.stat().st_size
        name = file.relative_to(path) if path.is_dir() else file.name
        digest.update(f"{name}:{size}".encode())
        with file.open("rb") as handle:
            digest.update(handle.read(1 << 20))
            if size > 1 << 21:
                handle.seek(-(1 << 20), os.SEEK_END)
                digest.update(handle.read())
    return digest.hexdigest()[:16]


def write_json(target: Path, data: object) -> None:
    atomic_write(target, lambda tmp: Path(tmp).write_text(json.dumps(data, indent=2) + "\n"))


def text_hash(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
