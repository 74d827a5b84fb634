"""Argument mistakes are found before torch, transformers or mteb load and before the hub is probed: each is exit 2,
exactly one line on stderr and nothing written, in a fresh interpreter where nothing is imported yet; the hub is
probed only when a model or task data may come from it. (How fast: benchmarks/cli_errors.py, not a test.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from _fresh_process import fresh_mains
from conftest import REPO

from layer_mteb.cli.main import build_parser, check
from layer_mteb.common.errors import UserError
from layer_mteb.tasks.catalog import read_task_file
from layer_mteb.tasks.task_names import NAMES_FILE, installed_mteb, mteb_task_names, shipped_names

PAPER_TASKS = [spec.name for spec in read_task_file().tasks]  # the 32 tasks of tasks.yaml

CASES = {
    "mistyped option": (["run", "--model", "minilm-l6", "--taks", "STS12"], "unrecognized arguments: --taks"),
    "two unknown tasks": (
        ["run", "--model", "minilm-l6", "--tasks", "STS1,BIOSES"],
        "2 unknown mteb tasks: 'STS1' (did you mean STS17, STS16, STS15?), 'BIOSES' (did you mean BIOSSES",
    ),
    "a mistyped benchmark": (
        ["run", "--model", "minilm-l6", "--tasks", "MTEB(eng, v3)"],
        "unknown mteb task 'MTEB(eng, v3)' (did you mean the benchmark MTEB(eng, v2)?)",
    ),
    "missing model folder": (["run", "--model", "./no/such/model", "--tasks", "STS12"], "does not exist"),
    "not a model name": (["run", "--model", "minilm", "--tasks", "STS12"], "is not a packaged name"),
    "missing data folder": (["run", "--model", "minilm-l6", "--data-dir", "{tmp}/none"], "does not exist"),
    "broken task file": (
        ["run", "--model", "minilm-l6", "--tasks", "{tmp}/broken.yaml"],
        "while parsing a flow sequence started at line 2, column 8: expected ',' or ']'",
    ),
    "malformed layers": (["run", "--model", "minilm-l6", "--tasks", "STS12", "--layers", "1-3"], "--layers"),
    "a layer the packaged model lacks": (
        ["run", "--model", "minilm-l6", "--tasks", "demo", "--layers", "99"],
        "layer 99 is out of range: minilm-l6 has hidden states 0..6 (or -7..-1)",
    ),
    "export a layer the packaged model lacks": (
        ["export", "--model", "minilm-l6", "--layer", "7", "--output", "{tmp}/out"],
        "--layer 7 is out of range: minilm-l6 has layers 0 (embeddings) to 6",
    ),
    "budget below one vector": (
        ["run", "--model", "minilm-l6", "--tasks", "STS12", "--max-cache-memory", "1KB"],
        "--max-cache-memory 1KB is smaller than one pooled vector of minilm-l6 (384 floats, 1.6KB)",
    ),
    "output is a file": (["run", "--model", "minilm-l6", "--tasks", "STS12", "--output", "{tmp}/file"], "is a file"),
    "output inside a file": (
        ["run", "--model", "minilm-l6", "--tasks", "STS12", "--output", "{tmp}/file/run"],
        "which is a file",
    ),
    "metrics texts missing": (["metrics", "--model", "minilm-l6", "--texts", "{tmp}/none.txt"], "existing text file"),
    "metrics texts of an unknown task": (
        ["metrics", "--model", "minilm-l6", "--texts", "task:STSBenchmarc"],
        "unknown mteb task 'STSBenchmarc' (did you mean STSBenchmark",
    ),
    "metrics texts of two unknown tasks": (
        ["metrics", "--model", "minilm-l6", "--texts", "wikitext,task:STS1,task:BIOSES"],
        "2 unknown mteb tasks: 'STS1' (did you mean",
    ),
    "metrics texts of a task without a name": (
        ["metrics", "--model", "minilm-l6", "--texts", "wikitext,task:"],
        "--texts task: needs a task name",
    ),
    "metrics texts with an empty source": (
        ["metrics", "--model", "minilm-l6", "--texts", "task:STS12,,wikitext"],
        "has an empty source between commas",
    ),
    # every paper task as one --texts list is longer than a file name may be: still read as a list
    "metrics texts of 32 tasks, one mistyped": (
        [
            "metrics",
            "--model",
            "minilm-l6",
            "--texts",
            ",".join([*(f"task:{t}" for t in PAPER_TASKS), "task:STS1"]),
        ],
        "unknown mteb task 'STS1'",
    ),
    "a path longer than a file name": (["select", "--run", "r" * 300], "(300 characters)"),
    "stress lengths": (["stress", "--model", "minilm-l6", "--lengths", "64,long"], "--lengths"),
    "select without a run": (["select", "--run", "{tmp}/none"], "does not exist"),
    "report of a folder without scores": (["report", "--run", "{tmp}"], "has no scores.csv"),
    "label budget without a run": (["label-budget", "--run", "{tmp}/none"], "does not exist"),
    "label budget with no worker": (
        ["label-budget", "--run", "{tmp}/run", "--output", "{tmp}/out", "--eval-workers", "0"],
        "--eval-workers must be a positive integer",
    ),
    "label budget written into a file": (["label-budget", "--run", "{tmp}/run", "--output", "{tmp}/file"], "is a file"),
    # where the release is found, a reproduce with no run of this project's used to end in a pandas traceback
    "reproduce without a run": (
        ["reproduce", "--release", "{tmp}/release", "--output", "{tmp}/out"],
        "give at least one of this project's run folders with --run RUN",
    ),
    "reproduce without the release": (
        ["reproduce", "--release", "{tmp}/clone", "--run", "{tmp}/run", "--output", "{tmp}/out"],
        "no authors' release at {tmp}/clone: get the authors' release with `git clone",
    ),
    "reproduce from a folder that is no release": (
        ["reproduce", "--release", "{tmp}", "--run", "{tmp}/run", "--output", "{tmp}/out"],
        "holds no <family>/<size>/<revision>/mteb or metrics folder of the release",
    ),
    "reproduce of a folder without scores": (
        ["reproduce", "--release", "{tmp}/release", "--run", "{tmp}", "--output", "{tmp}/out"],
        "has no scores.csv",
    ),
    "export a negative layer": (
        ["export", "--model", "minilm-l6", "--layer", "-1", "--output", "{tmp}/out"],
        "--layer -1 is out of range",
    ),
    "export into a folder that is not empty": (
        ["export", "--model", "minilm-l6", "--layer", "3", "--output", "{tmp}"],
        "exists and is not empty; choose another folder or add --overwrite",
    ),
    "a mistyped suite": (["run", "--model", "minilm-l6", "--tasks", "ofline"], "(did you mean the suite offline?)"),
    "a mistyped suite of a task file": (
        ["run", "--model", "minilm-l6", "--tasks", f"{REPO / 'tasks.yaml'}:paper32-fats"],
        "unknown suite 'paper32-fats' (did you mean paper32-fast?)",
    ),
    "a mistyped selector": (["select", "--run", "{tmp}/run", "--by", "agreemnt"], "(did you mean agreement?)"),
    "a selector mistyped in one word of its name": (
        ["select", "--run", "{tmp}/run", "--by", "entorpy"],
        "unknown metric or selector 'entorpy' (did you mean prompt_entropy, dataset_entropy?): use depth=0.1",
    ),
    "a mistyped export selector": (
        ["export", "--run", "{tmp}/run", "--by", "autto", "--output", "{tmp}/out"],
        "(did you mean auto?)",
    ),
    "cost with batches of no text": (
        ["cost", "--run", "{tmp}/run", "--batch-size", "0"],
        "--batch-size must be a positive integer, got 0",
    ),
    "cost with batches of no token": (
        ["cost", "--run", "{tmp}/run", "--max-batch-tokens", "0"],
        "--max-batch-tokens must be a positive integer, got 0",
    ),
    "metrics of neither a model nor a run": (["metrics", "--texts", "wikitext"], "--model M, or --run RUN"),
    "export a pick without a run": (
        ["export", "--model", "minilm-l6", "--by", "auto", "--output", "{tmp}/out"],
        "--by auto picks a layer from a run's scores: add --run RUN",
    ),
}


#: every case's ``layer-mteb argv`` in turn, in one new interpreter: each in its own folder, its stderr (the file
#: descriptor, so nothing written any other way is missed) kept apart, and the heavy modules loaded by then. They
#: accumulate, so a case that loads one fails, and so does every case after it.


@pytest.fixture(scope="module")
def fresh_main(tmp_path_factory) -> dict[str, tuple[Path, list[str], tuple[int, list[str], list[str]]]]:
    """Each case's folder, the names in it before, and what ``layer-mteb argv`` did there: all cases in one new
    interpreter (one start instead of one per case)."""
    cases = {}
    for case, (args, _) in CASES.items():
        tmp = tmp_path_factory.mktemp("case")
        (tmp / "file").write_text("mine\n")
        (tmp / "broken.yaml").write_text("tasks:\n  STS: [STS12\n")
        (tmp / "run").mkdir()
        (tmp / "run" / "scores.csv").write_text("model,layer,n_layers,task,main_score\n")
        (tmp / "release").mkdir()
        (tmp / "release" / "official_layer_scores.csv").write_text("model,layer,task,main_score\n")
        (tmp / "release" / "Pythia" / "14m" / "main" / "mteb").mkdir(parents=True)  # the release's layout
        cases[case] = (tmp, sorted(p.name for p in tmp.rglob("*")), [a.format(tmp=tmp) for a in args])
    results = fresh_mains([(argv, tmp) for tmp, _, argv in cases.values()])
    pairs = zip(cases.items(), results, strict=True)
    return {case: (tmp, before, result) for (case, (tmp, before, _)), result in pairs}


@pytest.mark.parametrize("case", list(CASES))
def test_a_mistake_is_one_line_before_anything_heavy_loads_and_writes_nothing(case, fresh_main):
    tmp_path, before, (code, err, heavy) = fresh_main[case]
    _, message = CASES[case]
    assert code == 2
    assert len(err) == 1 and err[0].startswith("layer-mteb: error:") and message.format(tmp=tmp_path) in err[0], err
    assert heavy == []
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no runs/, no output folder, no mteb/


def test_the_shipped_task_names_are_the_installed_mteb_s():
    """The list the command line checks names against is mteb's own registry (regenerate it with
    scripts/mteb_task_names.py after an mteb upgrade; until then mteb itself is asked)."""
    import mteb

    assert (
        NAMES_FILE.read_text().splitlines()[0]
        == f"# task names of mteb {installed_mteb()}"
        == (f"# task names of mteb {mteb.__version__}")
    )
    assert sorted(shipped_names()) == mteb_task_names()


def _args(*argv: str):
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    ("by", "said"),
    [("agreement", "agreement curves are saved"), ("auto", "agreement curves are saved"), ("depth=0.5", "nothing")],
)
def test_ctrl_c_says_what_select_has_saved(by, said, tmp_path):
    """``--by agreement`` writes each task's curves as it finishes, so Ctrl-C says they are kept (so may ``auto``,
    for a base model); a pick that computes nothing has saved nothing."""
    (tmp_path / "scores.csv").write_text("model,layer\n")
    args = _args("select", "--run", str(tmp_path), "--by", by)
    assert said in check(args).interrupted


def test_a_studied_selector_is_refused_by_select_in_one_line_naming_the_python_call(tmp_path):
    """The intrinsic-dimension selectors (which read the same stored curves) are studied, not offered: ``--by``
    refuses them in one line saying how Python applies them."""
    (tmp_path / "scores.csv").write_text("model,layer\n")
    with pytest.raises(UserError, match=r"select_layers\(run, by='id_min'\)"):
        check(_args("select", "--run", str(tmp_path), "--by", "id_min"))


def test_the_encode_defaults_metrics_run_compares_with_are_the_parsers():
    """``metrics --run`` tells a given setting from a default by :data:`ENCODE_DEFAULTS`; the parser's are the same."""
    from layer_mteb.cli.main import build_parser
    from layer_mteb.cli.options import ENCODE_DEFAULTS

    for command in (["metrics", "--run", "runs/x"], ["run", "--model", "minilm-l6", "--tasks", "demo"]):
        parsed = build_parser().parse_args(command)
        assert {option: getattr(parsed, option) for option in ENCODE_DEFAULTS} == ENCODE_DEFAULTS


def test_every_encode_setting_is_an_option_of_every_encoding_command_and_refused_beside_a_run(tmp_path):
    """A setting is declared once, as its EncodeConfig field: run, metrics, stress and export take it under its own
    name (choices and type from the field), and export refuses it beside --run, where the settings are the run's."""
    from layer_mteb.common.config import SETTINGS

    (tmp_path / "scores.csv").write_text("model,layer\n")
    heads = {
        "run": ["run", "--model", "minilm-l6"],
        "metrics": ["metrics", "--model", "minilm-l6"],
        "stress": ["stress", "--model", "minilm-l6"],
        "export": ["export", "--model", "minilm-l6", "--layer", "1", "--output", str(tmp_path / "out")],
    }
    for setting in SETTINGS:
        given = [setting.option] if setting.kind is bool else [setting.option, str((setting.choices or [7])[-1])]
        value = True if setting.kind is bool else setting.read(given[1])
        for command, head in heads.items():
            assert getattr(_args(*head, *given), setting.name) == value, (command, setting.name)
        beside_run = ["export", "--run", str(tmp_path), "--layer", "1", "--output", str(tmp_path / "out"), *given]
        with pytest.raises(UserError, match=f"with --run the settings are the run's: drop {setting.option}$"):
            check(_args(*beside_run))
