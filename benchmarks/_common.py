"""Shared pieces of the benchmarks: options, offline tasks (optionally cut short), counters, timers, tables."""

from __future__ import annotations

import argparse
import logging
import os
import platform
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("LAYER_MTEB_DATA", REPO.parent / "shared" / "data"))


def common_options(parser: argparse.ArgumentParser) -> None:
    """Options every benchmark takes; the defaults are the full run, ``--quick`` shrinks them."""
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA), help="folder of local task data")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-batch-tokens", type=int, default=None, help="token budget per batch (default: none)")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--limit", type=int, default=None, help="keep the first N rows of each task split")
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads of torch and of the evaluators' BLAS/OpenMP"
    )
    parser.add_argument("--quick", action="store_true", help="a ~1 minute version of the run")


_LIMITS: list = []


def scored_run_options(parser: argparse.ArgumentParser) -> None:
    """Options of the benchmarks that time a pick on a committed run: the run, its tasks, the sample size."""
    parser.add_argument("--run", default="results/smollm2-135m", help="a run folder with scores.csv")
    parser.add_argument("--tasks", nargs="+", help="default: every task of scores.csv")
    parser.add_argument("--n", type=int, default=256)


def scored_run_and_tasks(args: argparse.Namespace):
    """The run of ``--run`` on the CPU (its model, settings and vector store) and ``--tasks``, else every task it
    scored."""
    from layer_mteb.common.run_folder import RunFolder

    folder = RunFolder(args.run)
    return folder.setting(device="cpu"), args.tasks or sorted(folder.scores()["task"].unique())


def encode_config(args: argparse.Namespace):
    """The :class:`~layer_mteb.EncodeConfig` of the common options."""
    from layer_mteb import EncodeConfig

    extra = {"max_batch_tokens": args.max_batch_tokens} if args.max_batch_tokens else {}
    return EncodeConfig(
        device=args.device, dtype=args.dtype, batch_size=args.batch_size, max_length=args.max_length, **extra
    )


def start(args: argparse.Namespace, quick_limit: int):
    """The start every single-model benchmark shares -> (task names, encode config, warmed-up model)."""
    from layer_mteb import load_model

    if args.quick:
        args.limit = args.limit or quick_limit
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    setup(args)
    config = encode_config(args)
    loaded = load_model(args.model, config)
    print(machine_line(args.device))
    warm_up(loaded)
    return names, config, loaded


def forward_batches(loaded, ids: Sequence[Sequence[int]], batches: Sequence[Sequence[int]]) -> int:
    """The bare model over ``batches`` of token ids (no hidden states kept, no readout, no pooling) -> padded tokens."""
    padded_tokens = 0
    with torch.inference_mode():
        for batch in batches:
            padded = loaded.tokenizer.pad({"input_ids": [ids[i] for i in batch]}, return_tensors="pt")
            padded_tokens += padded["input_ids"].numel()
            loaded.model(**padded.to(loaded.device), output_hidden_states=False, **loaded.forward_options)
    return padded_tokens


def warm_up(loaded) -> None:
    """One tiny forward first, so that no measured side pays first-call costs (allocator, kernels)."""
    with torch.inference_mode():
        loaded.model(**loaded.tokenizer(["warm up"], return_tensors="pt").to(loaded.device))


def setup(args: argparse.Namespace) -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
        # the evaluators' BLAS (logistic regression, k-means) spins its own threads; on shared cores that costs
        # more than torch's (a Banking77 logistic regression: 0.1 s on one thread, 1.8 s on two here)
        import sklearn.linear_model  # noqa: F401  (loads the BLAS/OpenMP libraries to limit)
        from threadpoolctl import threadpool_limits

        _LIMITS.append(threadpool_limits(args.threads))
    torch.manual_seed(0)
    warnings.filterwarnings("ignore", message=".*is superseded by.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    # mteb's logistic regression on raw decoder states often stops at its iteration cap; the warning is per fit
    from sklearn.exceptions import ConvergenceWarning

    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    for handler in [*logging.getLogger().handlers, logging.lastResort]:  # the paper's tasks are old on purpose
        if handler is not None:
            handler.addFilter(lambda record: "is superseded by" not in record.getMessage())


def machine_line(device: str) -> str:
    """One line saying where the numbers came from (they are only comparable within one run)."""
    where = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__}"
    if device.startswith("cuda") and torch.cuda.is_available():
        where += f", {torch.cuda.get_device_name(device)}"
    try:
        load = ", load average {:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())
    except OSError:
        load = ""
    blas = ""
    try:
        from threadpoolctl import threadpool_info

        blas = ", BLAS/OpenMP threads " + "/".join(sorted({str(i["num_threads"]) for i in threadpool_info()}))
    except ImportError:
        pass
    return f"machine: {where}{load}; torch threads {torch.get_num_threads()}{blas}"


def load_tasks(names: Sequence[str], data_dir: str | Path, limit: int | None = None) -> list:
    """Fresh mteb task objects for ``names`` on local data, loaded, each split cut to its first ``limit`` rows.

    Every measured run gets its own fresh objects, so that no run starts from the state another left.
    """
    from layer_mteb.tasks.catalog import load_task, select_tasks

    task_file, specs = select_tasks(",".join(names), Path(data_dir))
    tasks = []
    for spec in specs:
        task = load_task(spec, task_file.split, Path(data_dir))
        task.load_data()
        if limit is not None:
            _cut(task, limit)
        tasks.append(task)
    return tasks


def _cut(task, limit: int) -> None:
    def cut(dataset_dict):
        for split in list(dataset_dict):
            if len(dataset_dict[split]) > limit:
                dataset_dict[split] = dataset_dict[split].select(range(limit))

    if task.metadata.is_multilingual:
        for subset in task.dataset.values():
            cut(subset)
    else:
        cut(task.dataset)


class Counter:
    """Counts forward calls of a base model and passes through its blocks, with plain forward hooks.

    ``texts`` counts rows through the model, ``block_calls`` block invocations (one batch through one block),
    ``block_texts`` rows through blocks and ``block_tokens`` padded token positions through blocks (the compute).
    """

    def __init__(self, model: torch.nn.Module, blocks: Sequence[torch.nn.Module]):
        self.calls = self.texts = self.block_calls = self.block_texts = self.block_tokens = 0
        self._handles = [model.register_forward_pre_hook(self._model, with_kwargs=True)]
        self._handles += [b.register_forward_pre_hook(self._block, with_kwargs=True) for b in blocks]

    def _model(self, module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.calls += 1
        self.texts += int(ids.shape[0])

    def _block(self, module, args, kwargs) -> None:
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        self.block_calls += 1
        self.block_texts += int(hidden.shape[0])
        self.block_tokens += int(hidden.shape[0] * hidden.shape[1])

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()

    def as_dict(self) -> dict[str, int]:
        keys = ("calls", "texts", "block_calls", "block_texts", "block_tokens")
        return {k: getattr(self, k) for k in keys}


@contextmanager
def counting(loaded) -> Iterator[Counter]:
    counter = Counter(loaded.model, list(loaded.blocks))
    try:
        yield counter
    finally:
        counter.close()


class Timer:
    """Wall-clock seconds of a block (``cuda`` is synchronised so queued kernels are counted)."""

    def __init__(self, device: str = "cpu"):
        self.device = device
        self.seconds = 0.0

    def __enter__(self) -> Timer:
        self._sync()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self._sync()
        self.seconds += time.perf_counter() - self._start

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()


def table(rows: Sequence[dict], columns: Sequence[str]) -> str:
    """A Markdown table of ``rows`` (values already formatted or numbers)."""

    def fmt(value: object) -> str:
        if isinstance(value, float | np.floating):
            return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
        if isinstance(value, int | np.integer):
            return f"{value:,}"
        return str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(fmt(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def main_scores(frame) -> dict[tuple[str, int], float]:
    """(task, layer) -> main score, averaging subsets."""
    grouped = frame.groupby(["task", "layer"])["main_score"].mean()
    return {(task, int(layer)): float(score) for (task, layer), score in grouped.items()}
