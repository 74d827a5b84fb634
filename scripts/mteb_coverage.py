"""How much of mteb runs through the one-pass sweep: every benchmark mteb knows resolved into a run's plan, and every
text task of mteb's own mock grid (and its aggregate mock) scored layer by layer against ``mteb.evaluate``.

    python scripts/mteb_coverage.py [--only benchmarks|mocks] [--layers 0,3,6]

``benchmarks``: each benchmark of ``mteb.get_benchmarks()`` planned as ``layer-mteb run --tasks NAME`` plans it (task
file resolution, then the run's units), with no data folder and nothing loaded (the hub taken as reachable; nothing is
fetched). A benchmark plans cleanly when every one of its text tasks is a unit with the benchmark's type, splits and
subsets and nothing loaded, and its non-text tasks are the ones the plan names as left out. ``mocks``: each text task
of ``mteb.mocks.MOCK_TASK_TEST_GRID`` (monolingual and multilingual) and ``MockAggregatedTask`` through
``layer_mteb.sweep`` with the packaged all-MiniLM-L6-v2, every asked layer equal to ``mteb.evaluate`` of
``LayerEncoder.from_model(model, layer=k)`` within 1e-6 (a few minutes on a CPU).
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import warnings
from pathlib import Path

#: the largest difference allowed between the sweep's score and mteb's own
TOLERANCE = 1e-6


def plan_benchmark(benchmark, data_dir: Path) -> tuple[list[str], list[str]]:
    """(problems, non-text tasks left out) of planning ``benchmark`` as ``run --tasks NAME`` does."""
    from layer_mteb.common.errors import UserError
    from layer_mteb.evaluation.plan import is_text_task, task_units
    from layer_mteb.evaluation.request import RunRequest

    text = {task.metadata.name: task for task in benchmark.tasks if is_text_task(task)}
    others = [task.metadata.name for task in benchmark.tasks if not is_text_task(task)]
    request = RunRequest("minilm-l6", tasks=benchmark.name, data_dir=data_dir, progress=False)
    try:
        units = task_units(request.tasks, request.split, request.data_dir)
    except UserError as err:
        return ([] if not text else [str(err)]), others
    problems = []
    planned = {task.metadata.name: (task, origin) for task, origin, _ in units}
    if list(planned) != list(text):
        problems.append(f"planned {sorted(planned)} != text tasks {sorted(text)}")
    for name, (task, origin) in planned.items():
        wanted = text.get(name)
        if wanted is None:
            continue
        if task.data_loaded or origin != "hub":
            problems.append(f"{name}: data loaded or not from the hub ({origin})")
        if (task.metadata.type, list(task.eval_splits), list(task.hf_subsets)) != (
            wanted.metadata.type,
            list(wanted.eval_splits),
            list(wanted.hf_subsets),
        ):
            problems.append(f"{name}: planned {task.eval_splits} {task.hf_subsets}, benchmark {wanted.eval_splits}")
    return problems, others


def count_benchmarks() -> None:
    import mteb

    benchmarks = mteb.get_benchmarks()
    clean = no_text = 0
    with tempfile.TemporaryDirectory() as empty:
        for benchmark in benchmarks:
            problems, others = plan_benchmark(benchmark, Path(empty))
            n_text = len(benchmark.tasks) - len(others)
            if problems:
                print(f"FAILS  {benchmark.name}: {'; '.join(problems)[:300]}")
            elif n_text == 0:
                no_text += 1
                print(f"no text {benchmark.name}: {len(others)} non-text tasks, refused in one line")
            else:
                clean += 1
                left = f", {len(others)} non-text left out" if others else ""
                print(f"clean  {benchmark.name}: {n_text} text tasks{left}")
    print(
        f"benchmarks whose text tasks plan cleanly: {clean} of {len(benchmarks)} "
        f"(of the {len(benchmarks) - no_text} that hold a text task; {no_text} hold none)"
    )


def mock_tasks() -> list:
    """The text tasks of mteb's mock grid, each class once, and the aggregate mock."""
    from mteb.mocks import MOCK_TASK_TEST_GRID
    from mteb.mocks.mock_tasks import MockAggregatedTask

    from layer_mteb.evaluation.plan import is_text_task

    classes = {type(task): None for task in MOCK_TASK_TEST_GRID if is_text_task(task)}
    return [*classes, MockAggregatedTask]


def mteb_scores(model, task_class, layer: int, config) -> dict[tuple[str, str, str], float]:
    """{(task, split, subset): main score} of ``mteb.evaluate`` of one layer's own encoder on a fresh task object."""
    import mteb

    from layer_mteb.evaluation.encoder import LayerEncoder

    encoder = LayerEncoder.from_model(model, layer=layer, config=config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = mteb.evaluate(encoder, task_class(), cache=None, show_progress_bar=False)
    return {
        (task_result.task_name, split, scores["hf_subset"]): scores["main_score"]
        for task_result in result.task_results
        for split, subsets in task_result.scores.items()
        for scores in subsets
    }


def differences(model, task_class, layers: list[int], config, **run) -> dict[tuple, float]:
    """Per (layer, task, split, subset) mteb scores: |the sweep's score - mteb's| (inf where the sweep has none)."""
    from layer_mteb import sweep

    frame = sweep(model, [task_class()], layers=layers, config=config, progress=False, **run)
    found = {}
    for layer in layers:
        rows = frame[frame["layer"] == layer]
        ours = {(r.task, r.split, r.subset): r.main_score for r in rows.itertuples()}
        for key, score in mteb_scores(model, task_class, layer, config).items():
            found[(layer, *key)] = abs(ours[key] - score) if key in ours else float("inf")
    return found


def count_mocks(layers: list[int]) -> None:
    from layer_mteb.common.config import EncodeConfig
    from layer_mteb.model.loading import load_model

    config = EncodeConfig()
    model = load_model("minilm-l6", config)
    classes = mock_tasks()
    matched = 0
    for task_class in classes:
        worst = max(differences(model, task_class, layers, config, vector_cache=False).values(), default=0.0)
        matched += worst <= TOLERANCE
        print(f"{'match' if worst <= TOLERANCE else 'DIFFERS'}  {task_class.__name__}: largest difference {worst:.2e}")
    print(f"mock tasks matched at layers {layers}: {matched} of {len(classes)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["benchmarks", "mocks"], default=None)
    parser.add_argument("--layers", default="0,3,6", help="layers of all-MiniLM-L6-v2 for the mock tasks")
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "0"  # planning only: the hub counts as reachable, and nothing is loaded from it
    logging.basicConfig(level=logging.ERROR)
    warnings.simplefilter("ignore")
    if args.only in (None, "benchmarks"):
        count_benchmarks()
    if args.only in (None, "mocks"):
        count_mocks([int(layer) for layer in args.layers.split(",")])


if __name__ == "__main__":
    main()
