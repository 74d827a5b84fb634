"""``layer-mteb`` in one new interpreter where nothing was imported before: several command lines in one start, each
with what it printed on stderr and which heavy libraries were loaded by then (the checks must fail before any loads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "transformers", "mteb", "datasets", "pandas")

FRESH_MAIN = """
import contextlib, io, json, os, sys, tempfile
from layer_mteb.cli import main

heavy, out = json.loads(sys.argv[1]), []
for argv, cwd in json.loads(sys.argv[2]):
    os.chdir(cwd)
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as err:
        os.dup2(err.fileno(), 2)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                code = main(argv)
        except SystemExit as exit:  # argparse exits by itself
            code = exit.code
        except BaseException as error:  # reported as this case's failure, the other cases still run
            code = repr(error)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        said = err.read().decode()
    out.append([code, said.strip().splitlines(), [m for m in heavy if m in sys.modules]])
print(json.dumps(out))
"""


def fresh_mains(runs: list[tuple[list[str], Path]]) -> list[tuple[int, list[str], list[str]]]:
    """(exit code, stderr lines, heavy modules loaded) of ``layer-mteb argv`` in folder ``cwd``, for each
    ``(argv, cwd)`` of ``runs``: all of them in one new interpreter, where nothing was imported before."""
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9"}  # a probe would be seen as a "cannot be reached" line
    env.pop("HF_HUB_OFFLINE", None)
    done = subprocess.run(
        [sys.executable, "-c", FRESH_MAIN, json.dumps(HEAVY), json.dumps([[argv, str(cwd)] for argv, cwd in runs])],
        capture_output=True,
        text=True,
        cwd=runs[0][1],
        env=env,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.strip(), done.stderr[-3000:]
    results = json.loads(done.stdout.splitlines()[-1])
    assert len(results) == len(runs)
    return [tuple(result) for result in results]
