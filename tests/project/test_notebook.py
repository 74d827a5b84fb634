"""The reproduction notebook runs top to bottom against a hand-made results folder, so it cannot silently rot."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from _report_fixtures import write_paper_scores, write_results
from nbclient import NotebookClient

from layer_mteb.analysis.runs.release_layout import PYTHIA_SCORES_FILE

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "reproduce_table1_figure1.ipynb"


def test_notebook_regenerates_the_report(tmp_path, monkeypatch):
    write_results(tmp_path / "results")
    (tmp_path / "reference").mkdir()
    write_paper_scores(tmp_path / "reference" / PYTHIA_SCORES_FILE)
    monkeypatch.setenv("LAYER_MTEB_RELEASE", str(tmp_path / "reference"))
    monkeypatch.delenv("LAYER_MTEB_RESULTS", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # the kernel starts in tmp_path, so the notebook finds tmp_path/results

    report = tmp_path / "results" / "report"
    for name in ("table1.md", "table1.csv", "figure1.png", "figure1.pdf", "heatmap_toy_alpha.png", "selectors.md"):
        assert (report / name).stat().st_size > 0
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    markdown = "".join(out.get("data", {}).get("text/markdown", "") for out in outputs)
    assert "# Table 1" in markdown and "toy/one-layer" in markdown and "Label-free layer selection" in markdown
    assert sum("image/png" in out.get("data", {}) for out in outputs) == 5  # figure 1, 2 heatmaps, metrics, corr
