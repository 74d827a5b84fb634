"""Remake the WikiText-2 sample the package ships (``layer_mteb/metrics/wikitext_sample/``) from a data folder's copy.

The sample is every fifth paragraph of ``WikiText2/test_paragraphs.jsonl`` (WikiText-2 raw, test split, one non-empty,
non-heading line a row), from the first, each line byte for byte as in that file: spread over every article of the
split and small enough to ship. Rerunning it on the same copy gives the same bytes.
Usage: python scripts/wikitext_sample.py [DATA_DIR] (default: $LAYER_MTEB_DATA, else ../shared/data)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from layer_mteb.metrics.wikitext import LOCAL_FILE, SAMPLE_FILE, SAMPLE_STEP
from layer_mteb.tasks.catalog import data_dir_from_env


def sample_lines(paragraphs: bytes, step: int = SAMPLE_STEP) -> bytes:
    """Every ``step``-th line of ``paragraphs`` from the first, unchanged."""
    lines = [line for line in paragraphs.splitlines(keepends=True) if line.strip()]
    return b"".join(lines[::step])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", help="the data folder holding WikiText2/")
    args = parser.parse_args()
    folder = data_dir_from_env(args.data_dir)
    source = folder / LOCAL_FILE if folder is not None else Path(LOCAL_FILE)
    if not source.is_file():
        raise SystemExit(f"no {source}: give the data folder holding {LOCAL_FILE}")
    sample = sample_lines(source.read_bytes())
    SAMPLE_FILE.write_bytes(sample)
    rows = len(sample.splitlines())
    print(f"{SAMPLE_FILE}: {rows} paragraphs, {len(sample):,} bytes, from {source}")


if __name__ == "__main__":
    main()
