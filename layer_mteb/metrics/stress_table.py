"""``stress.csv`` / ``stress.csv.gz`` and ``dip.csv`` in a run folder: written atomically, merged with what is there.

A new run replaces the rows of the same (model, texts, readout, test) and keeps every other row, so tests run one
at a time, or on both readouts, add up in one folder. ``stress.csv.gz`` is the same table gzip-compressed (no
timestamp inside, so the same rows give the same bytes); a folder holds one form or the other, never both.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from layer_mteb.common.errors import UserError
from layer_mteb.common.files import atomic_write, write_json
from layer_mteb.common.run_files import DIP_FILE, STRESS_FILES
from layer_mteb.metrics.bimodality import DIP_COLUMNS

RUNS_FILE = "stress.json"
STRESS_COLUMNS = ["model", "test", "level", "prompt", "layer", "normalization", "value", "texts", "readout"]
_KEY = ["model", "texts", "readout", "test"]
_ORDER = ["model", "readout", "test", "texts", "level", "normalization", "layer", "prompt"]
_FLOATS = "%.8g"


def write_stress(values: pd.DataFrame, dips: pd.DataFrame, run_dir: str | Path, *, compress: bool = False) -> Path:
    """Merge into ``run_dir``'s stress table and ``dip.csv``; returns the stress table's path."""
    folder = Path(run_dir)
    old = read_stress(folder, missing_ok=True)
    values = _merge(old, values).sort_values(_ORDER, kind="stable")[STRESS_COLUMNS]
    dips = _merge(read_dips(folder, missing_ok=True), dips)
    dips = dips.sort_values(["model", "readout", "test", "texts", "level", "layer"], kind="stable")[DIP_COLUMNS]
    target = folder / STRESS_FILES[int(compress)]
    compression = {"method": "gzip", "mtime": 0} if compress else None
    atomic_write(target, lambda tmp: values.to_csv(tmp, index=False, float_format=_FLOATS, compression=compression))
    atomic_write(folder / DIP_FILE, lambda tmp: dips.to_csv(tmp, index=False, float_format=_FLOATS))
    other = folder / STRESS_FILES[1 - int(compress)]
    if other.exists():
        other.unlink()  # its rows were merged into the one just written
    return target


def read_stress(run_dir: str | Path, *, missing_ok: bool = False) -> pd.DataFrame:
    """The folder's per-prompt stress table (either form); empty with ``missing_ok`` when it has none."""
    folder = Path(run_dir)
    found = [folder / name for name in STRESS_FILES if (folder / name).is_file()]
    if not found:
        if missing_ok:
            return pd.DataFrame(columns=STRESS_COLUMNS)
        raise UserError(f"no stress.csv in {folder}: run `layer-mteb stress --run {folder}` first")
    return _checked(pd.read_csv(found[0]), found[0], STRESS_COLUMNS)


def read_dips(run_dir: str | Path, *, missing_ok: bool = False) -> pd.DataFrame:
    path = Path(run_dir) / DIP_FILE
    if not path.is_file():
        if missing_ok:
            return pd.DataFrame(columns=DIP_COLUMNS)
        raise UserError(f"no {DIP_FILE} in {run_dir}: run `layer-mteb stress --run {run_dir}` first")
    return _checked(pd.read_csv(path), path, DIP_COLUMNS)


def record_run(run_dir: str | Path, entry: dict) -> None:
    """Add one run's settings and wall time to ``stress.json`` (replacing an earlier run of the same key)."""
    path = Path(run_dir) / RUNS_FILE
    runs = json.loads(path.read_text()).get("runs", []) if path.is_file() else []
    key = ("model", "texts", "readout", "tests")
    runs = [r for r in runs if tuple(r.get(k) for k in key) != tuple(entry.get(k) for k in key)]
    write_json(path, {"runs": [*runs, entry]})


def _merge(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    if old.empty:
        return new.reset_index(drop=True)
    replaced = old[_KEY].astype(str).apply(tuple, axis=1).isin(set(new[_KEY].astype(str).apply(tuple, axis=1)))
    return pd.concat([old[~replaced], new], ignore_index=True)


def _checked(frame: pd.DataFrame, path: Path, columns: list[str]) -> pd.DataFrame:
    missing = set(columns) - set(frame.columns)
    if missing:
        raise UserError(f"{path} is missing column(s) {sorted(missing)}; recompute it with `layer-mteb stress`")
    return frame
