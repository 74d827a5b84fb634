"""The WikiText texts of ``--texts wikitext``, from one of three places, in the order every text set and task follows
(:func:`layer_mteb.tasks.catalog.task_data`): the data folder's copy, else the hub, else the sample the package ships.

- **local**: WikiText-2 raw, test split, one paragraph a row (``WikiText2/test_paragraphs.jsonl`` of the data folder:
  ``--data-dir``, ``$LAYER_MTEB_DATA`` or ``../shared/data`` beside the checkout); ``metrics`` then drops headings and
  paragraphs under its minimum token count.
- **hub**: the texts the paper's WikiText metrics were measured on, selected as the authors' code selects them
  (XuweiyiChen/information_flow @ dde387a7, ``experiments/utils/dataloaders/text_dataloader.py``: wikitext-103-v1,
  its first 1,000 rows, headings and rows under twice the minimum length of 5 characters dropped, shuffled with seed
  42; the ``train`` split, which ``MTEB-Harness.py --purpose run_wikitext_metrics`` reads and whose
  ``metrics/wikitext/train/`` the release holds for most models). Rows are kept as the hub has them, spaces and
  newline included: the authors' tokenizers saw them so.
- **packaged**: every fifth paragraph of the local file (``wikitext_sample/``, remade by
  ``scripts/wikitext_sample.py``), so ``metrics --texts wikitext`` and ``stress`` run with no data folder and no hub.

Which one a number used is its ``data`` (``metrics.csv``, ``stress.json``), one of the ``ORIGIN_*`` phrases.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layer_mteb.common.errors import UserError, first_line
from layer_mteb.common.hub import hub_online
from layer_mteb.tasks.catalog import data_dir_from_env, note_data_read

#: the data folder's copy: WikiText-2 raw test paragraphs (the data folder's ``WikiText2/SOURCE.md``)
LOCAL_FILE = Path("WikiText2") / "test_paragraphs.jsonl"
#: the sample shipped as package data (its README says how it was cut)
SAMPLE_FILE = Path(__file__).resolve().parent / "wikitext_sample" / "test_paragraphs.jsonl"
#: every ``SAMPLE_STEP``-th paragraph of the local file, from the first: enough for the default 200 prompts of
#: ``metrics`` after its 30-token floor (359 paragraphs pass it with MiniLM's tokenizer)
SAMPLE_STEP = 5

#: the hub dataset the authors' ``load_dataset("wikitext", ...)`` resolves to (the hub moved the name to this owner)
HUB_DATASET, HUB_CONFIG, HUB_SPLIT = "Salesforce/wikitext", "wikitext-103-v1", "train"
#: the authors' selection: rows read (``num_samples`` in ``MTEB-Harness.py``), ``min_length`` and the shuffle seed.
#: ``min_length`` is their loader's default, which their entropy and curvature runs use; their InfoNCE, LiDAR and
#: DiME runs pass 2 (rows of 4 to 9 characters kept too). Every metric here reads one text set: the 5's.
AUTHORS_ROWS, AUTHORS_MIN_LENGTH, AUTHORS_SEED = 1000, 5, 42

ORIGIN_LOCAL = "WikiText-2 test (local)"
ORIGIN_HUB = f"{HUB_CONFIG} {HUB_SPLIT} (hub, authors' recipe)"
ORIGIN_PACKAGED = "WikiText-2 test sample (packaged)"


@dataclass(frozen=True)
class WikiTexts:
    """The rows read and where from. ``selected``: already the authors' selection (the hub's), which ``metrics``
    takes as it is; otherwise paragraphs that it filters as it always has (headings, too few tokens)."""

    texts: list[str]
    origin: str
    selected: bool = False


def wikitext_origin(data_dir: str | Path | None = None) -> str:
    """Where ``--texts wikitext`` reads from now (an ``ORIGIN_*`` phrase), decided without reading any text: asks
    whether the hub answers only where the data folder has no copy."""
    if _local_copy(data_dir) is not None:
        return ORIGIN_LOCAL
    return ORIGIN_HUB if hub_online() else ORIGIN_PACKAGED


def read_wikitext(data_dir: str | Path | None = None) -> WikiTexts:
    """The WikiText rows of :func:`wikitext_origin`'s choice."""
    local = _local_copy(data_dir)
    if local is not None:
        note_data_read(local.parents[1])
        return WikiTexts(_paragraphs(local), ORIGIN_LOCAL)
    if hub_online():
        return WikiTexts(_hub_rows(), ORIGIN_HUB, selected=True)
    return WikiTexts(_paragraphs(SAMPLE_FILE), ORIGIN_PACKAGED)


def _local_copy(data_dir: str | Path | None) -> Path | None:
    """The data folder's ``WikiText2/test_paragraphs.jsonl``, where it has one."""
    folder = data_dir_from_env(data_dir)
    return folder / LOCAL_FILE if folder is not None and (folder / LOCAL_FILE).is_file() else None


def _paragraphs(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle if line.strip()]


def is_heading(text: str) -> bool:
    """A WikiText heading line (`` = Title = ``, `` = = Section = = ``): stripped, it starts and ends with ``=``."""
    stripped = text.strip()
    return stripped.startswith("=") and stripped.endswith("=")


def authors_selection(
    rows: Any, n_rows: int = AUTHORS_ROWS, min_length: int = AUTHORS_MIN_LENGTH, seed: int = AUTHORS_SEED
) -> list[str]:
    """The texts the authors' WikiText loader keeps of a ``datasets.Dataset`` with a ``text`` column, in its order:
    the first ``n_rows`` rows, headings dropped, rows under ``2 * min_length`` characters (spaces and newline counted)
    dropped, then ``Dataset.shuffle(seed)``."""
    import datasets

    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # three bars of a few milliseconds each tell a user nothing
    try:
        first = rows.select(range(min(n_rows, len(rows))))
        kept = first.filter(lambda row: not is_heading(row["text"]) and len(row["text"]) >= 2 * min_length)
        return list(kept.shuffle(seed=seed)["text"])
    finally:
        if not quiet:
            datasets.enable_progress_bars()


def _hub_rows() -> list[str]:
    """The authors' selection of the hub's wikitext-103-v1 train split. Streamed: the first 1,000 rows, in the
    dataset's order, are all the selection reads, so the split (hundreds of MB) is never downloaded whole."""
    from datasets import Dataset, load_dataset

    try:
        stream = load_dataset(HUB_DATASET, HUB_CONFIG, split=HUB_SPLIT, streaming=True)
        first = Dataset.from_list([{"text": row["text"]} for row in stream.take(AUTHORS_ROWS)])
    except (OSError, ConnectionError, ValueError) as err:
        raise UserError(
            f"cannot load {HUB_DATASET} {HUB_CONFIG} from the hub ({first_line(err)}); pass --data-dir DIR holding "
            f"{LOCAL_FILE}, or set HF_HUB_OFFLINE=1 for the packaged WikiText-2 sample"
        ) from None
    return authors_selection(first)
