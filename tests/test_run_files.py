"""The run folder's file names, from their one definition."""

from __future__ import annotations

from layer_mteb.common.run_files import (
    RUN_LOG,
    SCORES_FILE,
    SIDE_FILES,
    labels_file,
    selection_file,
    shard_pattern,
    sharded,
)


def test_a_shard_file_is_named_by_its_shard_and_matched_by_the_pattern(tmp_path):
    assert sharded(SCORES_FILE, None) == sharded(SCORES_FILE, (0, 1)) == "scores.csv"
    assert sharded(SCORES_FILE, (1, 4)) == "scores.shard-1-of-4.csv"
    assert sharded(RUN_LOG, (0, 2)) == "run.shard-0-of-2.json"
    for name in (sharded(SCORES_FILE, (0, 2)), sharded(SCORES_FILE, (1, 2)), SCORES_FILE, sharded(RUN_LOG, (0, 2))):
        (tmp_path / name).touch()
    assert sorted(p.name for p in tmp_path.glob(shard_pattern(SCORES_FILE))) == [
        "scores.shard-0-of-2.csv",
        "scores.shard-1-of-2.csv",
    ]


def test_selection_files_sit_beside_selection_csv():
    assert selection_file() == SIDE_FILES["selection"].name == "selection.csv"
    assert selection_file("prompt_entropy") == "selection.prompt_entropy.csv"
    assert selection_file(["a", "b"]) == "selection.a+b.csv"
    assert labels_file(8) == "selection.labels-8.csv"


def test_only_files_computed_from_the_scores_go_stale_with_them():
    stale = {name for name, refresh in SIDE_FILES.values() if refresh}
    assert stale == {"selection.csv", "correlation.csv"}
