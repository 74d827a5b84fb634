"""The README's first page runs as written for a newcomer: every command line of "Two commands" and "Everyday
commands", then both Python snippets, in order, on a copy of the checkout with nothing beside it, an empty home, no
data folder, ``HF_HUB_OFFLINE`` unset and the hub unreachable (``HF_ENDPOINT`` at a closed local port).

Each line exits 0, but for the lines that truly need what a clone lacks; the README says so on the line, and such a
line must be refused in one error line, quickly, with nothing half-written. The test runs with the project's virtual
environment instead of building one (``make -o`` keeps make from re-running setup), and names the two lines it cannot
run: ``make test`` is this suite and ``source`` changes only the calling shell.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
#: lines the walk cannot run as themselves: they are the walk's own setting, not a step of it
NOT_RUN = {"make test": "this test suite itself", "source .venv/bin/activate": "the walk puts .venv/bin on PATH"}
#: the README's words on a line that cannot run on a bare clone, and must then be refused in one line
NEEDS = re.compile(r"\((?:needs|with) (?:the hub|the authors' release)[^)]*\)")
#: a refusal is quick: no download retries, no model loaded first
REFUSAL_S = 60


def _section(text: str, heading: str) -> str:
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def readme_steps() -> list[tuple[str, str, bool]]:
    """(kind, command or code, expected to be refused) in README order: shell lines of the two sections' blocks,
    then each ``python`` block of the whole README."""
    text = (REPO / "README.md").read_text()
    steps: list[tuple[str, str, bool]] = []
    for heading in ("Two commands", "Everyday commands"):
        for language, body in BLOCK.findall(_section(text, heading)):
            assert language == "bash", f"README {heading}: a ```{language} block where a shell block was expected"
            for line in body.splitlines():
                command, _, comment = line.partition(" #")
                if command.strip():
                    steps.append(("shell", command.strip(), bool(NEEDS.search(comment))))
    steps += [("python", body, False) for language, body in BLOCK.findall(text) if language == "python"]
    return steps


def closed_port() -> str:
    """A local address that refuses connections (bound, never listening), kept bound by the caller's socket."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    closed_port.keep = sock  # type: ignore[attr-defined]  # the port stays refused for the walk
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


def bare_copy(tmp_path: Path) -> Path:
    """The checkout's tracked and new files (as a clone has them), in a folder with nothing beside it."""
    checkout = tmp_path / "clone"
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, files):
        source, target = REPO / os.fsdecode(name), checkout / os.fsdecode(name)
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    return checkout


def shell_command(command: str, venv: Path) -> list[str]:
    """``make X`` with the project's environment (already set up: not remade), any other line as written."""
    words = shlex.split(command)
    if words[0] == "make":
        return ["make", f"VENV={venv}", "-o", f"{venv}/.installed", *words[1:]]
    return words


@pytest.mark.slow  # the demo, a second run, metrics, stress, cost and a report of MiniLM: minutes on 2 cores
@pytest.mark.timeout(2400)
def test_every_readme_line_runs_on_a_bare_clone_with_the_hub_unreachable(tmp_path):
    steps = readme_steps()
    assert any(kind == "python" for kind, _, _ in steps) and len(steps) > 10, steps
    venv = Path(sys.executable).parent.parent
    checkout, home = bare_copy(tmp_path), tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "LAYER_MTEB_", "TRANSFORMERS_"))}
    env.pop("CI", None)
    env.update(
        HOME=str(home),
        HF_ENDPOINT=closed_port(),
        PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
        PYTHONPATH=str(checkout),
        MPLBACKEND="Agg",
        TOKENIZERS_PARALLELISM="false",
    )
    walked = []
    for kind, step, refused in steps:
        if kind == "shell" and step in NOT_RUN:
            continue
        argv = [sys.executable, "-c", step] if kind == "python" else shell_command(step, venv)
        start = time.monotonic()
        done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=1800)
        seconds = time.monotonic() - start
        walked.append((step.splitlines()[0], done.returncode, round(seconds)))
        print(f"{done.returncode:>3} {seconds:7.1f} s  {step.splitlines()[0]}")
        errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
        assert "Traceback" not in done.stderr, f"{step}:\n{done.stderr[-3000:]}"
        assert "Retry" not in done.stderr and "retrying" not in done.stderr.lower(), f"{step}:\n{done.stderr[-3000:]}"
        if refused:
            assert done.returncode != 0, f"{step}: the README says it needs what a clone lacks, yet it ran"
            assert seconds < REFUSAL_S, f"{step}: refused after {seconds:.0f} s"
            assert len([e for e in errors if "layer-mteb: error:" in e]) == 1, f"{step}:\n{done.stderr[-3000:]}"
        else:
            assert done.returncode == 0, f"{step} (exit {done.returncode}):\n{done.stderr[-3000:]}"
    print("\n".join(f"{code} {seconds} s {step}" for step, code, seconds in walked))
