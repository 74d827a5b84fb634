"""CI cannot pass on nothing: with ``CI=true`` a missing task data folder or authors' release stops the test run
with exit status 1 and one message naming what is missing; elsewhere the tests that need it skip, saying why."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO

#: a test that needs no data, and one that reads the data folder
NO_DATA = "tests/project/test_docs.py::test_github_slugs_of_headings_the_docs_link_to"
NEEDS_DATA = "tests/tasks/test_demo_data.py::test_the_shipped_files_equal_the_data_folders"


def pytest_run(*args: str, **env: str) -> subprocess.CompletedProcess:
    """The test suite run as CI runs it, in a process of its own, with ``env`` on top of this one's."""
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, check=False)


@pytest.mark.slow  # a pytest run of its own: conftest imports torch again
def test_in_ci_a_missing_data_or_reference_folder_fails_the_run(tmp_path):
    run = pytest_run(NO_DATA, CI="true", LAYER_MTEB_DATA=str(tmp_path), LAYER_MTEB_RELEASE=str(tmp_path))
    said = run.stdout + run.stderr
    assert run.returncode == 1, said
    assert "CI=true, and missing: the task data folder" in said
    assert f"extracted from the authors' release ({tmp_path}/official_layer_scores.csv not found" in said
    assert f"the authors' release ({tmp_path}/release/experiments/results not found" in said


@pytest.mark.slow  # a pytest run of its own: conftest imports torch again
def test_outside_ci_a_test_that_needs_the_data_folder_skips_saying_why(tmp_path):
    run = pytest_run(NEEDS_DATA, NO_DATA, CI="", LAYER_MTEB_DATA=str(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"shared task data not found at {tmp_path} (set LAYER_MTEB_DATA)" in run.stdout
    assert "1 passed, 2 skipped" in run.stdout
