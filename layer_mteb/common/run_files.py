"""The layout of a run folder: every file and folder that ``layer-mteb`` writes into one or reads from one, named here
and nowhere else.

```
<run>/
  scores.csv               one row per (task, subset, layer): mteb's main score          (layer-mteb run, import)
  scores.shard-I-of-N.csv  one shard's rows, until `layer-mteb merge` joins them          (run --shard I/N)
  run.json                 per (model, task): settings, what was encoded, evaluated, reused (run; run.shard-I-of-N.json)
  mteb/                    mteb's own result JSONs, one experiment per layer (its ResultCache folder)
  metrics.csv              label-free metrics per layer                                   (metrics, run --task-metrics)
  stress.csv[.gz]          per-prompt entropy of the stress tests                         (stress)
  dip.csv                  Hartigan's dip test of those entropies per layer               (stress)
  selection.csv            every label-free selector's pick                               (select)
  selection.<by>.csv       the picks of a narrower `select --by`                          (select --by)
  selection.labels-K.csv   the picks of K labelled examples                               (select --labels K)
  correlation.csv          each metric against the score across layers                    (correlate)
```
"""

from __future__ import annotations

from typing import NamedTuple

SCORES_FILE = "scores.csv"
RUN_LOG = "run.json"
MTEB_FOLDER = "mteb"
METRICS_FILE = "metrics.csv"
#: plain and gzipped: a run folder holds one of them
STRESS_FILES = ("stress.csv", "stress.csv.gz")
DIP_FILE = "dip.csv"
SELECTION_FILE = "selection.csv"
CORRELATION_FILE = "correlation.csv"
COST_FILE = "cost.csv"  # seconds and FLOPs of the model cut at each layer (`layer-mteb cost`)


class SideFile(NamedTuple):
    """An optional table beside ``scores.csv`` that a report reads; ``refresh`` is the command that recomputes it
    from the scores (``None`` where it does not depend on them), so a sweep that changed the scores makes it stale."""

    name: str
    refresh: str | None


#: The side files by the report's name for them.
SIDE_FILES = {
    "selection": SideFile(SELECTION_FILE, "layer-mteb select"),
    "metrics": SideFile(METRICS_FILE, None),
    "correlation": SideFile(CORRELATION_FILE, "layer-mteb correlate"),
}


def sharded(name: str, shard: tuple[int, int] | None) -> str:
    """``name`` for a whole run, ``<stem>.shard-I-of-N.<suffix>`` for shard I of N (``scores.shard-1-of-4.csv``)."""
    if shard is None or shard[1] == 1:
        return name
    stem, _, suffix = name.partition(".")
    return f"{stem}.shard-{shard[0]}-of-{shard[1]}.{suffix}"


def shard_pattern(name: str) -> str:
    """The glob matching every shard file of ``name`` (``scores.shard-*-of-*.csv``)."""
    stem, _, suffix = name.partition(".")
    return f"{stem}.shard-*-of-*.{suffix}"


def selection_file(by: str | list[str] | None = None) -> str:
    """``selection.csv`` for every metric (what the report reads); a narrower ``by`` writes beside it, as
    ``selection.<by>.csv`` (a metric or any selector name), so picking by one never drops the other selectors' picks."""
    if by is None:
        return SELECTION_FILE
    return f"selection.{by if isinstance(by, str) else '+'.join(by)}.csv"


def labels_file(k: int | str) -> str:
    """Where ``layer-mteb select --labels K`` writes its picks, one file per K."""
    return f"selection.labels-{k}.csv"
