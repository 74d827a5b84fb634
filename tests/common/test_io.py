"""Run-folder files are readable as the user's umask says, and model fingerprints follow every weight."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from layer_mteb.common.errors import UserError
from layer_mteb.common.files import (
    atomic_write,
    building,
    content_hash,
    no_empty_folders_on_error,
    topmost_missing,
    write_json,
)


@pytest.fixture
def umask_027():
    previous = os.umask(0o027)
    yield
    os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_files_and_folders_get_the_umask_mode_not_the_temp_file_default(tmp_path, umask_027):
    write_json(tmp_path / "run.json", {"a": 1})
    atomic_write(tmp_path / "scores.csv", lambda tmp: Path(tmp).write_text("x\n"))
    with building(tmp_path / "model") as folder:
        (folder / "config.json").write_text("{}")
    assert _mode(tmp_path / "run.json") == 0o640
    assert _mode(tmp_path / "scores.csv") == 0o640
    assert _mode(tmp_path / "model") == 0o750


def test_fingerprint_changes_when_a_middle_tensor_changes(tmp_path, monkeypatch):
    """The old fingerprint read only the first and last MiB: an in-place fine-tune could keep it."""
    monkeypatch.setenv("LAYER_MTEB_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    folder.mkdir()
    tensors = {f"layer{i}": torch.zeros(1 << 18) for i in range(4)}  # 4 MiB: layer1 sits past the first MiB
    save_file(tensors, folder / "model.safetensors")
    before = content_hash(folder)
    assert content_hash(folder) == before  # the remembered digest gives the same answer
    tensors["layer1"][100] = 1.0  # same size, different weights
    save_file(tensors, folder / "model.safetensors")
    size = (folder / "model.safetensors").stat().st_size
    after = content_hash(folder)
    assert after != before
    assert (folder / "model.safetensors").stat().st_size == size


def test_a_failed_block_leaves_no_folder_it_made_empty_and_keeps_what_it_wrote(tmp_path):
    existing = tmp_path / "existing"
    existing.mkdir()
    new = tmp_path / "runs" / "model"
    assert topmost_missing(new) == tmp_path / "runs" and topmost_missing(existing) == existing
    with pytest.raises(UserError), no_empty_folders_on_error(existing / "mteb", topmost_missing(new)):
        (existing / "mteb" / "a" / "b").mkdir(parents=True)
        new.mkdir(parents=True)
        raise UserError("too small")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing"] and list(existing.iterdir()) == []
    with pytest.raises(UserError), no_empty_folders_on_error(existing / "mteb", topmost_missing(new)):
        (existing / "mteb").mkdir()
        (new / "scores.csv").parent.mkdir(parents=True)
        (new / "scores.csv").write_text("task,layer\n")
        raise UserError("later")
    assert not (existing / "mteb").exists() and (new / "scores.csv").read_text() == "task,layer\n"
    with no_empty_folders_on_error(existing / "kept"):
        (existing / "kept").mkdir()  # no error: an empty folder made on purpose stays
    assert (existing / "kept").is_dir()
