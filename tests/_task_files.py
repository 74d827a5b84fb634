"""Small task files written in a test's folder: the sentences and the CSV / JSONL writers custom tasks are made of."""

from __future__ import annotations

import csv
import json
from pathlib import Path

SENTENCES = [
    "The cat sat on the warm windowsill.",
    "A kitten is sleeping by the window.",
    "Stock markets fell sharply on Monday.",
    "Shares dropped at the start of the week.",
    "She is baking bread for the party.",
    "He repaired the bicycle's flat tyre.",
    "Heavy rain flooded the village streets.",
    "The orchestra played a new symphony.",
]


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_search_tasks(
    folder: Path,
    names: tuple[str, str],
    corpus: list[dict],
    queries: list[list[object]],
    qrels: list[list[object]],
    candidates: list[list[object]],
) -> str:
    """A task file of one Retrieval task (``names[0]``: ``qrels``, query-id/corpus-id pairs, all relevant) and one
    Reranking task (``names[1]``: ``candidates``, query-id/corpus-id/score rows) over one corpus and query set."""
    write_jsonl(folder / "corpus.jsonl", corpus)
    write_csv(folder / "queries.csv", ["id", "text"], queries)
    write_csv(folder / "qrels.csv", ["query-id", "corpus-id"], qrels)
    write_csv(folder / "candidates.csv", ["query-id", "corpus-id", "score"], candidates)
    path = folder / "search.yaml"
    files = "corpus: corpus.jsonl, queries: queries.csv"
    path.write_text(
        "custom:\n"
        f"  - {{name: {names[0]}, type: Retrieval, files: {{{files}, qrels: qrels.csv}}}}\n"
        f"  - {{name: {names[1]}, type: Reranking, files: {{{files}, qrels: candidates.csv}}}}\n"
    )
    return str(path)


def search_task_file(folder: Path) -> Path:
    """A task file of a small Retrieval task of real sentences (mteb encodes its queries and documents differently)
    beside STS17 (en-en, the copy the package ships)."""
    write_jsonl(folder / "corpus.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(SENTENCES)])
    queries = [["q0", "a cat by the window"], ["q1", "markets fell"], ["q2", "rain in the village"], ["q3", "music"]]
    write_csv(folder / "queries.csv", ["id", "text"], queries)
    write_csv(folder / "qrels.csv", ["query-id", "corpus-id"], [["q0", "d1"], ["q1", "d3"], ["q2", "d6"], ["q3", "d7"]])
    path = folder / "search.yaml"
    path.write_text(
        "tasks:\n  STS:\n    - {name: STS17, subsets: [en-en]}\n"
        "custom:\n"
        "  - name: TinySearch\n"
        "    type: Retrieval\n"
        "    files: {corpus: corpus.jsonl, queries: queries.csv, qrels: qrels.csv}\n"
    )
    return path
