"""``layer-mteb`` run in the test's own process (no new interpreter and no second torch import): what a user would
see on stderr is what the command wrote there and the log records its logging set-up shows (layer_mteb's INFO lines,
every other library's warnings), so "one line on stderr" keeps its meaning."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from layer_mteb.cli import main


@dataclass(frozen=True)
class Done:
    """What ``layer-mteb`` left: its exit status, stdout, and the lines a terminal would show on stderr."""

    returncode: int
    stdout: str
    lines: list[str]

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)


def _shown(record: logging.LogRecord) -> bool:
    """A record the command line's logging prints (see ``setup_logging``)."""
    least = logging.INFO if record.name.split(".")[0] == "layer_mteb" else logging.WARNING
    return record.levelno >= least and "is superseded by" not in record.getMessage()


def run_main(argv: list[str], capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> Done:
    """``layer-mteb argv`` through :func:`layer_mteb.cli.main`, as the console script calls it."""
    capfd.readouterr()
    caplog.clear()
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse exits by itself
        code = exit.code
    out, err = capfd.readouterr()
    logged = [f"{r.levelname} {r.name}: {r.getMessage()}" for r in caplog.records if _shown(r)]
    return Done(code, out, [*logged, *err.strip().splitlines()])
