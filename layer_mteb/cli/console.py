"""What the command line shows: logging and progress set up once, results printed, and every user mistake or full
disk translated into one line on stderr (exit 2) instead of a traceback."""

from __future__ import annotations

import errno
import logging
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from layer_mteb.common.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

PROG = "layer-mteb"
#: What Ctrl-C leaves behind, said in its one line (``INTERRUPTED`` of each command module).
RESUME = "finished units are saved, run the same command again to resume"
NOTHING_SAVED = "nothing was saved, run the same command again"
TASKS_SAVED = "finished tasks are saved, run the same command again to resume"
CURVES_SAVED = "finished tasks' agreement curves are saved in agreement.csv, run the same command again to resume"
REWRITE = "files already written stay, run the same command again to write them all"


def setup_logging(verbose: bool = False) -> None:
    """:func:`package_logging`, mteb's "superseded" warnings dropped (the paper's tasks are, on purpose), and other
    libraries' progress bars off unless ``verbose`` (tqdm reads ``TQDM_DISABLE`` on import, which the checks never
    do; the package's own bars pass ``disable`` themselves, so they stay)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not verbose:
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")  # read when datasets is imported, workers too
        os.environ.setdefault("TQDM_DISABLE", "1")  # tqdm's default for a bar that does not say; read on import
        if "datasets" in sys.modules:
            sys.modules["datasets"].disable_progress_bars()
    package_logging()
    warnings.filterwarnings("ignore", message=".*is superseded by.*")
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # keep stderr for progress of the sweep and one-line errors
    for handler in logging.getLogger().handlers:
        handler.addFilter(lambda record: "is superseded by" not in record.getMessage())


def package_logging() -> None:
    """Warnings and errors of libraries, INFO lines of layer_mteb (sizes up front, progress in logs); nothing heavy
    imported, so a command's checks can say what they decided (the hub probe's one line) before it runs."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("layer_mteb").setLevel(logging.INFO)


def run_reporting_errors(command: Callable[[], None], interrupted: str = RESUME) -> int:
    """Run ``command``; a :class:`UserError`, a full disk, no write access or a path too long is one line, exit 2;
    Ctrl-C one line saying what was saved (``interrupted``), exit 130 (128 + SIGINT, as shells report it)."""
    try:
        command()
    except UserError as err:
        return fail(str(err))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; {interrupted}", file=sys.stderr)
        return 130
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            return fail(
                f"no space left on device writing {err.filename or 'results'}; free space or use another "
                "--output / $LAYER_MTEB_CACHE"
            )
        if err.errno in (errno.EACCES, errno.EROFS, errno.EPERM):
            return fail(f"cannot write {err.filename}: {err.strerror}; choose another --output / $LAYER_MTEB_CACHE")
        if err.errno == errno.ENAMETOOLONG:  # a path argument longer than the file system allows
            return fail(f"{err.strerror}: {str(err.filename)[:60]}... ({len(str(err.filename))} characters)")
        raise
    return 0


def fail(message: str) -> int:
    """Print ``message`` as the one error line; the exit status."""
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def print_scores(frame: pd.DataFrame, output: Path) -> None:
    """A layer × task table per (model, revision), a best-and-last line each, then where the files are; tasks as
    mteb counts them (:func:`task_rows`: an aggregate's subtasks stay out). Table and lines on one scale: mteb's
    0–1 main scores with four decimals."""
    from layer_mteb.analysis.report.table1 import run_summary
    from layer_mteb.common.scores import task_rows

    frame = task_rows(frame)
    for (model, revision), part in frame.groupby(["model", "revision"], sort=False):
        table = part.pivot_table(index="layer", columns="task", values="main_score", aggfunc="mean")
        table["mean"] = table.mean(axis=1)
        print(f"\n{model} @ {revision}\n{table.to_string(float_format='{:.4f}'.format)}")
    if not frame.empty:
        print("\n" + "\n".join(run_summary(frame)))
    print(f"\nscores: {output / 'scores.csv'}  ·  mteb results: {output / 'mteb'}")


def print_leaderboard(board: pd.DataFrame, path: Path, note: str | None = None) -> None:
    print(board.round(4).to_string(index=False))
    if note:
        print(f"\n{note}")
    print(f"\nselection: {path}")


def arithmetics_of(frame: pd.DataFrame) -> list[str]:
    """The metric arithmetics a table of picks or correlations names (a baseline's ``-`` is none)."""
    return sorted(set(frame["arithmetic"].astype(str)) - {"-"}) if "arithmetic" in frame.columns else []


def print_written(folder: Path, since: float) -> None:
    """``wrote FOLDER: a, b, c``: the files a command wrote (or rewrote) into ``folder`` since ``since``."""
    names = sorted(p.name for p in folder.glob("*") if p.is_file() and p.stat().st_mtime >= since - 1)
    print(f"wrote {folder}: {', '.join(names) or 'nothing'}")
