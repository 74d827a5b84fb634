"""Every mistake a user can make gives exit code 2, one line on stderr, and no output written."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
import torch
from conftest import save_tiny_model, tiny_model

from layer_mteb.cli import main


@pytest.fixture(scope="module")
def models(tmp_path_factory, bert_tokenizer):
    """Model folders: a good tiny one, one with corrupt weights, one with NaN weights, a T5, an empty folder."""
    from transformers import T5Config, T5Model

    root = tmp_path_factory.mktemp("bad-models")
    save_tiny_model("gpt_neox", bert_tokenizer, root / "good")
    corrupt = save_tiny_model("gpt_neox", bert_tokenizer, root / "corrupt")
    (corrupt / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    nan = root / "nan"
    broken = tiny_model("gpt_neox", bert_tokenizer).model
    with torch.no_grad():
        broken.embed_in.weight.fill_(float("nan"))
    broken.save_pretrained(nan)
    bert_tokenizer.save_pretrained(nan)
    t5 = root / "t5"
    T5Model(T5Config(num_layers=1, d_model=8, d_ff=8, num_heads=1, d_kv=8, vocab_size=10)).save_pretrained(t5)
    (root / "empty").mkdir()
    (root / "fake.gguf").write_bytes(b"not a gguf file")
    return root


def task_files(root):
    files = {
        "empty.yaml": "",
        "schema.yaml": "tasks: [STS12]\n",
        "broken.yaml": "tasks: [",
        "noname.yaml": "tasks:\n  STS:\n    - {nam: STS12}\n",
        "twice.yaml": "tasks:\n  STS: [STS12]\n  STS: [BIOSSES]\n",
        "typo.yaml": "tasks:\n  STS: [STS12, STS1]\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)


def data_folders(root):
    (root / "nosplit" / "STS12").mkdir(parents=True)
    (root / "nosplit" / "STS12" / "train.jsonl").write_text('{"sentence1": "a", "sentence2": "b", "score": 1}\n')
    (root / "columns" / "STS12").mkdir(parents=True)
    (root / "columns" / "STS12" / "test.jsonl").write_text('{"text": "a", "score": 1}\n')
    (root / "notrain" / "Banking77Classification").mkdir(parents=True)
    (root / "notrain" / "Banking77Classification" / "test.jsonl").write_text('{"text": "a", "label": "x"}\n')
    (root / "emptysplit" / "STS12").mkdir(parents=True)
    (root / "emptysplit" / "STS12" / "test.jsonl").write_text("\n")
    (root / "badjson" / "STS12").mkdir(parents=True)
    (root / "badjson" / "STS12" / "test.jsonl").write_text('{"sentence1": "a", "sentence2"\n')
    (root / "a-file").write_text("not a folder")


CASES = {
    # model
    "unknown model name": (["--model", "just-a-name"], "packaged name"),
    "missing model folder": (["--model", "./no/such/folder"], "does not exist"),
    "missing gguf file": (["--model", "nothing.gguf"], "does not exist"),
    "folder without config": (["--model", "{models}/empty"], "cannot load model"),
    "corrupt weights": (["--model", "{models}/corrupt"], "cannot load model"),
    "unsupported architecture": (["--model", "{models}/t5"], "architecture 't5'"),
    "gguf that is not gguf": (["--model", "{models}/fake.gguf"], "cannot read GGUF"),
    "NaN from the model": (["--model", "{models}/nan"], "NaN/inf"),
    # tasks
    "unknown task": (["--tasks", "STSBenchmarc"], "did you mean STSBenchmark"),
    "two unknown tasks": (["--tasks", "STS1,BIOSES"], "2 unknown mteb tasks: 'STS1' (did you mean STS17"),
    "unknown task in a suite file": (["--tasks", "{tmp}/typo.yaml"], "unknown mteb task 'STS1' (did you mean"),
    "empty task list": (["--tasks", " , "], "--tasks is empty"),
    "unknown suite": (["--tasks", "nosuchsuite"], "unknown mteb task"),
    "unknown suite of a file": (["--tasks", "{tmp}/schema.yaml:x"], "non-empty 'tasks:'"),
    "empty tasks.yaml": (["--tasks", "{tmp}/empty.yaml"], "non-empty 'tasks:'"),
    "tasks.yaml wrong schema": (["--tasks", "{tmp}/schema.yaml"], "mapping"),
    "tasks.yaml unparsable": (["--tasks", "{tmp}/broken.yaml"], "at line 1, column 9"),
    "tasks.yaml with a key twice": (["--tasks", "{tmp}/twice.yaml"], "duplicate key 'STS' at line 3 (first at line 2)"),
    "tasks.yaml entry without name": (["--tasks", "{tmp}/noname.yaml"], "noname.yaml, line 3, column 7: every task"),
    "missing tasks.yaml": (["--tasks", "{tmp}/missing.yaml"], "cannot read task file"),
    # layers
    "layer too deep": (["--layers", "9"], "out of range"),
    "layer too negative": (["--layers", "-9"], "out of range"),
    "layers not numbers": (["--layers", "a,b"], "not 'all'"),
    "layer slice selecting nothing": (["--layers", "5:9"], "selects no layer"),
    # data
    "missing data folder": (["--data-dir", "/no/such/dir"], "does not exist"),
    "offline suite without data": (["--tasks", "offline", "--data-dir", ""], "needs a data folder"),
    "local task without test split": (["--tasks", "STS12", "--data-dir", "{tmp}/nosplit"], "no test.jsonl"),
    "local task with wrong columns": (["--tasks", "STS12", "--data-dir", "{tmp}/columns"], "missing column"),
    "local classification without train": (
        ["--tasks", "Banking77Classification", "--data-dir", "{tmp}/notrain"],
        "no train.jsonl",
    ),
    "local task with empty split": (["--tasks", "STS12", "--data-dir", "{tmp}/emptysplit"], "is empty"),
    "local task with a broken line": (["--tasks", "STS12", "--data-dir", "{tmp}/badjson"], "not valid JSON"),
    # settings
    "zero max length": (["--max-length", "0"], "--max-length"),
    "zero batch size": (["--batch-size", "0"], "--batch-size"),
    "max length below the special tokens": (["--max-length", "1"], "no room for this tokenizer's special"),
    "cuda without a GPU": (["--device", "cuda"], "no CUDA GPU"),
    "unknown readout": (["--readout", "middle"], "invalid choice"),
    "unknown pooling": (["--pooling", "max"], "invalid choice"),
    "unknown dtype": (["--dtype", "int8"], "invalid choice"),
    "non-integer max length": (["--max-length", "ten"], "invalid int"),
    "budget below one layer of the task": (["--max-cache-memory", "1KB"], "smallest limit that works"),
    "budget below one vector of the model": (["--max-cache-memory", "100B"], "smaller than one pooled vector"),
    "budget that is no size": (["--max-cache-memory", "lots"], "is not a size"),
    "shard out of range": (["--shard", "4/4"], "--shard"),
    "zero eval workers": (["--eval-workers", "0"], "--eval-workers"),
    # output
    "output under a file": (["--output", "{tmp}/a-file/run"], "which is a file"),
    "output that is a file": (["--output", "{tmp}/a-file"], "'{tmp}/a-file' is a file"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exits_2_with_one_line_and_writes_nothing(case, models, demo_data_dir, tmp_path, capsys, monkeypatch):
    task_files(tmp_path)
    data_folders(tmp_path)
    monkeypatch.delenv("LAYER_MTEB_DATA", raising=False)
    monkeypatch.setattr("layer_mteb.tasks.catalog.SIBLING_DATA_DIR", tmp_path / "no-shared-data")
    args, message = CASES[case]
    args = [a.format(models=models, tmp=tmp_path) for a in args]
    message = message.format(tmp=tmp_path)
    out = tmp_path / "out"
    model = [] if "--model" in args else ["--model", str(models / "good")]  # --model adds a model: replace it
    argv = [
        "run",
        *model,
        "--tasks",
        "STS17",
        "--data-dir",
        str(demo_data_dir),
        "--output",
        str(out),
        "--no-vector-cache",
        *args,
    ]
    assert main(argv) == 2 if "invalid" not in message else _argparse_exit(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists() or not (out / "scores.csv").exists()
    assert not out.exists() or case == "NaN from the model"


def _argparse_exit(argv) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code


def test_gguf_without_the_gguf_package_names_the_install(models, monkeypatch, capsys, demo_data_dir, tmp_path):
    monkeypatch.setitem(sys.modules, "gguf", None)  # as if `pip install gguf` had not been run
    code = main(
        [
            "run",
            "--model",
            str(models / "fake.gguf"),
            "--tasks",
            "STS17",
            "--data-dir",
            str(demo_data_dir),
            "--output",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("layer-mteb: error:") and "pip install gguf" in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # a new interpreter (torch imported again) writing into a real tmpfs
def test_no_space_left_is_one_line(models, demo_data_dir, tmp_path):
    """A real full filesystem: a 64 KiB tmpfs as output folder (skipped where mounting is not allowed)."""
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        (small / "filler").write_bytes(b"\0" * 60_000)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "layer_mteb.cli",
                "run",
                "--model",
                str(models / "good"),
                "--tasks",
                "STS17",
                "--data-dir",
                str(demo_data_dir),
                "--output",
                str(small / "run"),
                "--no-vector-cache",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        subprocess.run(["umount", str(small)], check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert "no space left on device" in lines[-1]


def test_empty_and_blank_texts_are_encoded_not_errors(models, tmp_path, capsys):
    folder = tmp_path / "data" / "STS12"
    folder.mkdir(parents=True)
    rows = [
        {"sentence1": "", "sentence2": "a cat", "score": 1.0},
        {"sentence1": "   ", "sentence2": "", "score": 2.0},
        {"sentence1": "dogs run", "sentence2": "a dog runs", "score": 4.0},
    ]
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(
        [
            "run",
            "--model",
            str(models / "good"),
            "--tasks",
            "STS12",
            "--data-dir",
            str(tmp_path / "data"),
            "--output",
            str(tmp_path / "out"),
            "--no-vector-cache",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert "error" not in err.lower() and "nan" not in err.lower(), err
    scores = pd.read_csv(tmp_path / "out" / "scores.csv")
    assert scores["task"].tolist() == ["STS12"] * 3 and scores["layer"].tolist() == [0, 1, 2]
    assert scores["main_score"].between(-1, 1).all()  # every layer scored over all three pairs, none NaN
