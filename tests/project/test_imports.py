"""``import layer_mteb`` and ``layer-mteb --help`` stay light: mteb, transformers' models, torch and seaborn load
only when a command or a public name needs them. Checked in a fresh interpreter, where nothing is imported yet."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

HEAVY = ("mteb", "seaborn", "transformers.models", "torch")


def _imported_after(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_package_imports_nothing_heavy():
    loaded = _imported_after("import layer_mteb")
    assert [m for m in HEAVY if m in loaded] == []


HELPS = ["", "run", "metrics", "report", "select", "correlate", "merge", "label-budget", "reproduce"]


@pytest.fixture(scope="module")
def loaded_after_each_help() -> dict[str, list[str]]:
    """The modules loaded once ``layer-mteb [command] --help`` has run, for every command in turn in one fresh
    interpreter: they accumulate, so a help that loads something heavy fails, and so does every one after it."""
    code = "import json, sys\nfrom layer_mteb.cli import main\nseen = []\n"
    code += f"for argv in {[[c, '--help'] if c else ['--help'] for c in HELPS]!r}:\n"
    code += "    try:\n        main(argv)\n    except SystemExit:\n        pass\n    seen.append(sorted(sys.modules))\n"
    code += "print(json.dumps(seen))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return dict(zip(HELPS, json.loads(done.stdout.splitlines()[-1]), strict=True))


@pytest.mark.parametrize("command", HELPS)
def test_help_imports_nothing_heavy(command, loaded_after_each_help):
    loaded = loaded_after_each_help[command]
    assert [m for m in HEAVY if m in loaded] == []


def test_the_version_is_written_once_in_pyproject():
    import tomllib
    from conftest import REPO

    import layer_mteb

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert layer_mteb.__version__ == pyproject["project"]["version"]


def test_public_names_load_on_use_and_sweep_stays_the_function():
    import layer_mteb
    import layer_mteb.evaluation.sweep  # the module lives in its stage; the package's public name is the function
    from layer_mteb.evaluation.sweep import sweep

    assert layer_mteb.sweep is sweep
    for name in layer_mteb.__all__:
        home = importlib.import_module(f"layer_mteb.{layer_mteb._HOMES[name]}")
        assert getattr(layer_mteb, name) is getattr(home, name)
    with pytest.raises(AttributeError):
        layer_mteb.no_such_name  # noqa: B018


@pytest.mark.parametrize("command", ["run", "metrics", "report", "select", "correlate", "label-budget", "reproduce"])
def test_every_optional_option_says_its_default(command, capsys):
    from layer_mteb.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    entries: list[str] = []
    for line in capsys.readouterr().out.split("options:")[1].splitlines():
        if line.startswith("  -"):
            entries.append(line)
        elif entries:
            entries[-1] += " " + line.strip()
    required = {"--model", "--run"}
    optional = [e for e in entries if e.split()[0] not in required and not e.startswith("  -h")]
    assert len(optional) >= 2
    for entry in optional:
        assert "default" in entry, entry
