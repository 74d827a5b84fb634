"""The README's Python examples run as written, offline: cwd a checkout with ``../shared/data`` beside it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.mark.slow  # two model loads and a sweep of two layers: about 50 s on 2 cores; make test runs it
def test_readme_python_blocks_run_offline(data_dir, tmp_path):
    blocks = BLOCK.findall((REPO / "README.md").read_text())
    assert blocks, "the README has no ```python block"
    checkout = tmp_path / "checkout"  # the README's relative paths: runs/ in the checkout, data in ../shared/data
    checkout.mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(Path(data_dir).resolve())
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LAYER_MTEB_CACHE": str(tmp_path / "cache")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.pop("LAYER_MTEB_DATA", None)
    for block in blocks:
        done = subprocess.run([sys.executable, "-c", block], cwd=checkout, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
    assert (checkout / "runs" / "biosses" / "scores.csv").is_file()
