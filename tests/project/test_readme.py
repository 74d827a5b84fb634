"""The README's Python examples run as written, offline, on a checkout with nothing beside it; the numbers of the
README and of the studies it summarises (docs/studies.md) that can drift are the committed results' and the test
suite's; the README stays a front page of at most 200 lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pandas as pd
import pytest
from conftest import COLLECTED, REPO

BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.mark.slow  # two model loads and a sweep of two layers: about 50 s on 2 cores; make test runs it
def test_readme_python_blocks_run_offline_with_no_data_folder(tmp_path):
    blocks = BLOCK.findall((REPO / "README.md").read_text())
    assert blocks, "the README has no ```python block"
    checkout = tmp_path / "checkout"  # the README's relative paths: runs/ in the checkout, no data folder beside it
    checkout.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LAYER_MTEB_CACHE": str(tmp_path / "cache")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.pop("LAYER_MTEB_DATA", None)
    for block in blocks:
        done = subprocess.run([sys.executable, "-c", block], cwd=checkout, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
    assert (checkout / "runs" / "sts17" / "scores.csv").is_file()


def test_the_readme_s_held_out_family_means_are_the_committed_ones_like_for_like():
    """The LOFO table's means over the final models (checkpoints left out, as ``lofo_means`` counts models), and,
    beside the paper's rule, the same means over only the models that rule has metrics for."""
    lofo = pd.read_csv(REPO / "results" / "paper" / "lofo.csv")
    models = lofo[~lofo["model"].str.contains("@")]
    readme = (REPO / "docs" / "studies.md").read_text()
    every = f"| **mean over {len(models)} models** | | **{models['regret'].mean():.2f}** | "
    assert every + f"{models['last_regret'].mean():.2f} | |" in readme
    ruled = models[models["paper_rule_regret"].notna()]
    like = f"| **mean over the {len(ruled)} models the paper's rule has metrics for** | | "
    values = [ruled[c].mean() for c in ("regret", "last_regret", "paper_rule_regret")]
    assert like + "**{:.2f}** | {:.2f} | {:.2f} |".format(*values) in readme


def test_the_readme_s_labels_against_agreement_are_the_committed_label_budget():
    """'64 labels tie with agreement on SmolLM2 and lose to it on Gemma, 128 beat it': the label numbers quoted are
    label_budget.csv's mean regret over tasks, in points."""
    budget = pd.read_csv(REPO / "results" / "paper" / "label_budget.csv")
    regret = budget.groupby(["model", "k"])["mean_regret"].mean() * 100
    smol, gemma = "HuggingFaceTB/SmolLM2-135M-Instruct", "google/gemma-3-270m"
    readme = " ".join((REPO / "docs" / "studies.md").read_text().split())
    assert f"tie with agreement on SmolLM2 ({regret[smol, '64']:.2f} and 1.87)" in readme
    assert f"lose to it on Gemma ({regret[gemma, '64']:.2f} against 1.16)" in readme
    assert f"128 beat it ({regret[smol, '128']:.2f}, {regret[gemma, '128']:.2f})" in readme


def test_the_readme_is_a_front_page_of_at_most_200_lines():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move detail to docs/"
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:2] == ["## Two commands", "## Everyday commands"]  # how to use it before any study


COUNT = re.compile(r"about (\d+) tests")
#: a time figure: "19 s", "10.1 min", "7 min 50 s", "2 h"
TIME = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|min|ms|h)\b")
#: what says where and under what load a time was taken
MACHINE = re.compile(r"\d-core|GPU|H100|H200|busy|idle")


def _sections(text: str) -> list[str]:
    """The README cut at its ``##`` headings (code blocks kept whole: a ``#`` comment there is no heading)."""
    parts, current, fenced = [], [], False
    for line in text.splitlines():
        fenced ^= line.startswith("```")
        if line.startswith("## ") and not fenced:
            parts.append("\n".join(current))
            current = []
        current.append(line)
    return [*parts, "\n".join(current)]


@pytest.mark.slow  # without the whole suite in this session, collects it in a subprocess: a minute on 2 busy cores
def test_the_readme_s_test_count_is_what_pytest_collects(request):
    """The README says "about N tests"; pytest collects within 5 % of N (other work adds tests between updates).
    In ``make test`` this session collected the whole suite already (conftest counts it); otherwise a new one does."""
    stated = {int(n) for n in COUNT.findall((REPO / "README.md").read_text())}
    assert len(stated) == 1, f"the README states the test count as {sorted(stated)}: one number, please"
    collected = request.config.stash.get(COLLECTED, None)
    if collected is None:
        command = ["--collect-only", "-q", "-m", "slow or not slow", "-p", "no:cacheprovider"]
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *command], cwd=REPO, capture_output=True, text=True, timeout=600
        )
        collected = int(re.search(r"(\d+) tests? collected", done.stdout)[1])
    [n] = stated
    assert abs(collected - n) <= 0.05 * collected, f"README: about {n} tests; pytest collects {collected}"


def test_every_time_in_the_readme_says_the_machine_it_was_taken_on():
    """A section that gives a time (outside code) names the machine or the load it was measured under."""
    for section in _sections((REPO / "README.md").read_text()):
        prose = re.sub(r"```.*?```", "", section, flags=re.DOTALL)
        if TIME.search(prose):
            heading = section.splitlines()[0] if section.startswith("## ") else "(the top)"
            assert MACHINE.search(prose), f"README section {heading}: times without the machine they were taken on"
