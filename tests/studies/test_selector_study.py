"""The paper's selector study on the authors' release (leave one model out never reads the held-out scores; the
paper's rule on Pythia-410m as released), where its sections go in ``summary.md``, and the package never needing
the studies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from layer_mteb.analysis.rules import PAPER_RULE
from layer_mteb.analysis.runs.importing import import_metrics_table, release_scores
from layer_mteb.analysis.runs.release_layout import RELEASE_SCORES_FILE, release_folder
from layer_mteb.analysis.selection import registry, selectors
from layer_mteb.paper.tables import TASK_SETS
from studies import engine as study
from studies.selector_study import FIRST_HEADING, with_study

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = release_folder()
needs_release = pytest.mark.skipif(
    not (REFERENCE / RELEASE_SCORES_FILE).is_file(), reason="the authors' release is not on this machine"
)


@needs_release
def test_leave_one_model_out_never_reads_the_held_out_scores():
    names = ["Pythia/14m", "Pythia/70m", "Pythia/160m"]
    scores = release_scores(REFERENCE / RELEASE_SCORES_FILE, names)
    metrics = import_metrics_table(REFERENCE / "official_layer_metrics.csv.gz", models={name: name for name in names})
    candidates = [registry.by_name(n) for n in ("last_layer", "depth=0.5", "depth=0.8", PAPER_RULE)]
    models = study.study_models(scores, metrics)
    before = study.leave_one_model_out(models, candidates).set_index("held_out")
    held = models[0]
    upside_down = held.scores.iloc[::-1].set_axis(held.scores.index)  # the held-out model's scores, reversed
    changed = [selectors.ModelData(held.name, held.n_layers, upside_down, held.metrics), *models[1:]]
    after = study.leave_one_model_out(changed, candidates).set_index("held_out")
    assert after.loc[held.name, "chosen_selector"] == before.loc[held.name, "chosen_selector"]
    assert after.loc[held.name, "regret"] != pytest.approx(before.loc[held.name, "regret"])  # scored after the pick


@needs_release
def test_the_paper_rule_on_pythia_410m_matches_the_released_facts():
    names = ["Pythia/410m"]
    scores = release_scores(REFERENCE / RELEASE_SCORES_FILE, names)
    metrics = import_metrics_table(REFERENCE / "official_layer_metrics.csv.gz", models={"Pythia/410m": "Pythia/410m"})
    [model] = study.study_models(scores, metrics)
    summary = study.model_leaderboard([model], [registry.by_name(PAPER_RULE)]).iloc[0]
    assert summary["n_tasks"] == 24
    assert (round(summary["chosen_score"], 2), round(summary["last_score"], 2)) == (45.99, 43.18)
    assert round(summary["best_score"], 2) == 49.37


def test_the_study_s_sections_go_before_the_task_sets_once_however_often_it_runs():
    paper = f"## Table 1\n\nrows\n\n{TASK_SETS}\n\n- sets\n"
    sections = f"{FIRST_HEADING}\n\nlomo\n\n## Selector leaderboard\n\nboard"
    once = with_study(paper, sections)
    assert once == f"## Table 1\n\nrows\n\n{sections}\n\n{TASK_SETS}\n\n- sets\n"
    assert with_study(once, sections) == once
    with pytest.raises(ValueError, match="run `layer-mteb reproduce` first"):
        with_study("## Table 1\n", "sections")


def test_the_package_never_imports_the_studies():
    """What a user's command runs lives in the package; the studies use it, never the other way round."""
    importing = re.compile(r"^\s*(from|import)\s+studies\b", re.MULTILINE)
    assert [p for p in (ROOT / "layer_mteb").rglob("*.py") if importing.search(p.read_text())] == []
