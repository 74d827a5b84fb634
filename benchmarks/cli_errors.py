"""How long does ``layer-mteb`` take to reject each bad input, timed from the shell?

Each bad input runs as its own ``python -m layer_mteb.cli`` process (a fresh interpreter, as a user types it), three
times; the table gives the median wall time, the exit code and how many lines went to stderr (the goal: under 2 s,
exit 2, one line). ``HF_HUB_OFFLINE`` is unset, as on a user's machine, so a hub probe would show in the time.
``--tree DIR`` times another checkout of the package (e.g. the one before the arguments were checked up front).
Usage: python benchmarks/cli_errors.py [--tree DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: (what is wrong, arguments); ``{tmp}`` is a scratch folder holding a file ``file`` and a broken ``broken.yaml``
CASES = [
    ("mistyped option", "run --model minilm-l6 --taks STS12"),
    ("two unknown tasks", "run --model minilm-l6 --tasks STS1,BIOSES --output {tmp}/out"),
    ("missing model folder", "run --model ./no/such/model --tasks STS12 --output {tmp}/out"),
    ("missing data folder", "run --model minilm-l6 --tasks STS12 --data-dir {tmp}/none --output {tmp}/out"),
    ("broken tasks.yaml", "run --model minilm-l6 --tasks {tmp}/broken.yaml --output {tmp}/out"),
    ("output is a file", "run --model minilm-l6 --tasks STS12 --output {tmp}/file"),
    ("malformed --layers", "run --model minilm-l6 --tasks STS12 --layers 1-3 --output {tmp}/out"),
    ("--max-cache-memory 1KB", "run --model minilm-l6 --tasks STS12 --max-cache-memory 1KB --output {tmp}/out"),
    ("metrics: missing --texts file", "metrics --model minilm-l6 --texts {tmp}/none.txt --output {tmp}/out"),
    ("select: missing run folder", "select --run {tmp}/none"),
]


def time_case(argv: list[str], env: dict[str, str], cwd: Path, repeat: int) -> tuple[float, int, list[str]]:
    """(median seconds, exit code, stderr lines) of ``repeat`` runs."""
    seconds, done = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "layer_mteb.cli", *argv], capture_output=True, text=True, env=env, cwd=cwd
        )
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), done.returncode, done.stderr.strip().splitlines()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(REPO), help="checkout whose layer_mteb is timed (default: this one)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per input; the median is shown")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env["PYTHONPATH"] = str(Path(args.tree).resolve())
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPU cores, load average {os.getloadavg()}")
    print(f"tree: {args.tree}; median of {args.repeat} runs\n")
    print("| input | seconds | exit | stderr lines | nothing written | stderr |")
    print("|---|---|---|---|---|---|")
    for label, line in CASES:
        with tempfile.TemporaryDirectory() as scratch:
            tmp = Path(scratch)
            (tmp / "file").write_text("mine\n")
            (tmp / "broken.yaml").write_text("tasks:\n  STS: [STS12\n")
            before = sorted(tmp.rglob("*"))
            seconds, code, err = time_case(line.format(tmp=tmp).split(), env, tmp, args.repeat)
            clean = "yes" if sorted(tmp.rglob("*")) == before else "no"
            shown = err[-1].replace(scratch, "…").replace("|", "\\|") if err else ""
            print(f"| {label} | {seconds:.2f} | {code} | {len(err)} | {clean} | {shown[:110]} |")
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
