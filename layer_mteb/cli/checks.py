"""Every mistake the arguments and the file system reveal, found before torch, transformers or mteb load and before
the hub is probed: unknown tasks (all of them at once), custom tasks' files (missing, empty, wrong columns or
values), missing models, texts, data and run folders, output paths that are files or read-only, malformed layer
lists, shards and sizes, a memory budget below one vector. Nothing is
written and nothing is logged here, so a mistake costs a fraction of a second and prints one line. The same checks
run again, exactly, where the library does the work: this module only moves them first."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from layer_mteb.analysis.runs.choices import RELEASE_SCORES_FILE, reference_folder
from layer_mteb.analysis.selection.selector_names import check_selector
from layer_mteb.cli.arguments import ENCODE_DEFAULTS, EXPORT_SETTINGS, output_folder, parse_lengths, parse_shard
from layer_mteb.cli.console import CURVES_SAVED
from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import check_new_folder
from layer_mteb.common.run_folder import SCORES_FILE, RunFolder
from layer_mteb.evaluation.plan import check_writable
from layer_mteb.evaluation.request import check_output, resolve_run
from layer_mteb.evaluation.workers import check_eval_workers
from layer_mteb.metrics.agreement.intrinsic_dimension import ID_RULES
from layer_mteb.metrics.texts import TASK_TEXTS, check_texts, text_sources, texts_task
from layer_mteb.model.names import known_hidden_size, may_need_hub, model_kind
from layer_mteb.tasks.catalog import data_dir_from_env, file_task
from layer_mteb.tasks.names import check_task_names
from layer_mteb.vectors.budget import check_one_vector_fits, parse_size


def check_arguments(args: argparse.Namespace) -> None:
    """The checks of ``args.command`` (commands without any have nothing to check up front)."""
    check = _CHECKS.get(args.command)
    if check is not None:
        check(args)


def hub_needed(args: argparse.Namespace) -> bool:
    """Whether the command may fetch from the hub: a hub model id, or a task or texts with no local copy. Only then
    is the hub probed; packaged models, local folders and local data never wait on it."""
    models = args.model if isinstance(args.model, list) else [args.model]
    if any(may_need_hub(model) for model in models):
        return True
    if args.command == "run":  # the request's tasks and data folder; custom tasks are read from their own files
        data = args.request.data_dir
        names = [spec.name for spec in args.request.tasks if spec.custom is None]
    else:
        data = data_dir_from_env(args.data_dir)
        names = _task_texts(_sources(args))
    return any(data is None or not (data / name).is_dir() for name in names)


def _check_run(args: argparse.Namespace) -> None:
    """``run``'s arguments resolved into the request the sweep takes as it is (``args.request``)."""
    args.request = resolve_run(
        args.model,
        args.tasks,
        layers=args.layers,
        data_dir=args.data_dir,
        output=output_folder(args),
        revision=args.revision.split(",") if args.revision else None,
        shard=parse_shard(args.shard),
        eval_workers=args.eval_workers,
        task_metrics=args.task_metrics,
        skip_unavailable=args.skip_unavailable,
        trust_remote_code=args.trust_remote_code,
    )
    config = _check_encoding(args, args.model)
    request = args.request
    check_output(request.output, request.models, request.revisions, config)  # no second model or setting mixed in


def _check_metrics(args: argparse.Namespace) -> None:
    if args.run is not None:
        _take_run_model(args)
    elif args.model is None:
        raise UserError("give the model: --model M, or --run RUN for a run's model and settings")
    if args.texts is None:
        args.texts = "wikitext"
    check_writable(output_folder(args))
    model_kind(args.model)
    sources = _sources(args)
    check_task_names(_task_texts(sources))  # every unknown task of a comma-separated --texts in one line
    for source in sources:
        check_texts(source, args.data_dir)
    if args.command == "stress":
        parse_lengths(args.lengths)
    _check_encoding(args, [args.model])


#: the encode options ``metrics --run`` / ``stress --run`` take from the run (the readout of metrics is their own)


def _take_run_model(args: argparse.Namespace) -> None:
    """``--run RUN``: the run's model (its packaged short name, or ``--model`` to say how to load it), revision and
    encode settings go into ``args``, as if given; a different setting given beside ``--run`` is refused."""
    from layer_mteb.model.names import packaged_name

    _check_runs(argparse.Namespace(command=args.command, run=args.run))
    scores = RunFolder(args.run).one_setting()
    row = scores.iloc[-1]
    name, revision = str(row["model"]), str(row["revision"])
    given = [f"--{o.replace('_', '-')}" for o, default in ENCODE_DEFAULTS.items() if getattr(args, o) != default]
    if getattr(args, "revision", None) is not None:
        given.append("--revision")
    if given:
        raise UserError(f"with --run the model's settings are the run's: drop {', '.join(given)}")
    config = EncodeConfig.from_key(row)
    declared = RunFolder(args.run).declared_tasks()  # a custom task's texts are found through the file declaring it
    if args.texts is None:
        args.texts = ",".join(f"{TASK_TEXTS}{task}" for task in sorted(set(scores["task"].astype(str))))
    args.texts = ",".join(
        f"{TASK_TEXTS}{declared[texts_task(s)]}" if s.startswith(TASK_TEXTS) and texts_task(s) in declared else s
        for s in text_sources(args.texts)
    )
    if args.data_dir is None:  # the data folder the run read its tasks from, for --texts task:<Task>
        recorded = RunFolder(args.run).recorded_data_dir()
        args.data_dir = None if recorded is None else str(recorded)
    for option in ENCODE_DEFAULTS:
        setattr(args, option, getattr(config, option))
    if args.model is None:
        if name.startswith("local/"):
            raise UserError(
                f"{args.run} scored a local model ({name}): add --model FOLDER, the folder it was loaded from"
            )
        args.model = packaged_name(name, revision) or name
        if args.model == name and args.command == "metrics":
            args.revision = revision  # a hub model at the commit the run scored


def _check_encoding(args: argparse.Namespace, models: list[str]) -> EncodeConfig:
    """The encode options as :class:`EncodeConfig` checks them (on CPU: whether CUDA exists is torch's to say, later),
    and a memory budget against the models whose width is known without loading them."""
    config = EncodeConfig(
        readout=args.readout,
        pooling=args.pooling,
        max_length=args.max_length,
        dtype=args.dtype,
        batch_size=args.batch_size,
        max_batch_tokens=args.max_batch_tokens,
        attention=args.attention,
        normalize=args.normalize,
    )
    if getattr(args, "max_cache_memory", None):
        budget = parse_size(args.max_cache_memory)
        for model in models:
            hidden = known_hidden_size(model)
            if hidden is not None:
                check_one_vector_fits(budget, hidden, model)
    return config


def _check_runs(args: argparse.Namespace) -> None:
    runs = args.run if isinstance(args.run, list) else [args.run]
    for run in [*runs, *getattr(args, "random_run", [])]:
        folder = Path(run)
        if not folder.is_dir():
            raise UserError(f"run folder {str(folder)!r} does not exist: pass a folder written by `layer-mteb run`")
        if not (folder / SCORES_FILE).is_file():
            raise UserError(f"{str(folder)!r} has no {SCORES_FILE}: pass a folder written by `layer-mteb run`")
    if args.command in ("report", "label-budget", "reproduce"):
        check_writable(Path(args.output))
    if args.command == "label-budget":
        check_eval_workers(args.eval_workers)
    if args.command == "cost":
        _check_cost(args, runs[0])
    if args.command in ("select", "export") and args.by is not None:
        check_selector(args.by)  # a mistyped --by in a fraction of a second, with the nearest names
    if args.command == "select" and args.labels is None and args.by in ("agreement", *ID_RULES):
        args.interrupted = CURVES_SAVED  # each task's curves are written as it finishes; a rerun reads them back


def _check_reproduce(args: argparse.Namespace) -> None:
    """``--release`` (a clone of the authors' repository) must hold their results; the deprecated ``--reference``
    (extracted tables) still works for one release, saying so."""
    from layer_mteb.analysis.runs.release_layout import results_folder

    extracted = args.reference is not None and args.release is None
    if extracted:
        args.reference = Path(args.reference)
        if not (args.reference / RELEASE_SCORES_FILE).is_file():
            raise UserError(
                f"no {RELEASE_SCORES_FILE} in {args.reference}; pass --release with a clone of the authors' repository"
            )
    else:
        args.release = results_folder(args.release or reference_folder() / "release")
    _check_runs(args)
    if extracted:
        print(
            "layer-mteb: --reference (tables extracted from the release) is deprecated and goes in the next "
            "release; pass --release with a clone of the authors' repository",
            file=sys.stderr,
        )


def _check_cost(args: argparse.Namespace, run: str) -> None:
    """``cost``: the run folder is writable, the model and texts exist, the sizes are positive."""
    check_writable(Path(run))
    if args.model is not None:
        model_kind(args.model)
    if args.texts is not None:
        sources = text_sources(args.texts)
        check_task_names(_task_texts(sources))
        for source in sources:
            check_texts(source, args.data_dir)
    for option, value in (("--n-texts", args.n_texts), ("--batch-size", args.batch_size)):
        if value < 1:
            raise UserError(f"{option} must be a positive integer, got {value}")
    if args.max_batch_tokens is not None and args.max_batch_tokens < 1:
        raise UserError(f"--max-batch-tokens must be a positive integer, got {args.max_batch_tokens}")


def _check_import(args: argparse.Namespace) -> None:
    if not Path(args.folder).is_dir():
        raise UserError(f"results folder {args.folder!r} does not exist")
    check_writable(Path(args.output))


def _check_export(args: argparse.Namespace) -> None:
    """What ``export``'s options say alone: one source and one way to name the layer, an output that is new or
    empty; the layer's range is known once the run's table or the model is read."""
    if args.run is None and args.model is None:
        raise UserError("give --model M (with --layer K) or --run RUN (with --by SELECTOR or --layer K)")
    if (args.layer is None) == (args.by is None):
        raise UserError("give the layer as --layer K or pick it with --by SELECTOR (with --run), not both or neither")
    if args.by is not None and args.run is None:
        raise UserError(f"--by {args.by} picks a layer from a run's scores: add --run RUN")
    if args.task is not None and args.by is None:
        raise UserError("--task names whose pick --by exports: add --by SELECTOR")
    if args.layer is not None and args.layer < 0:
        raise UserError(f"--layer {args.layer} is out of range: layers count from 0 (the embeddings)")
    if args.run is not None:
        _check_runs(args)
        given = [f"--{name.replace('_', '-')}" for name in EXPORT_SETTINGS if getattr(args, name) is not None]
        if given:
            raise UserError(f"with --run the settings are the run's: drop {', '.join(given)}")
    if args.model is not None:
        model_kind(args.model)
    check_writable(Path(args.output))
    check_new_folder(Path(args.output), args.overwrite)
    if args.max_length is not None and args.max_length < 1:
        raise UserError(f"--max-length must be a positive integer, got {args.max_length}")


_CHECKS = {
    "run": _check_run,
    "metrics": _check_metrics,
    "stress": _check_metrics,
    "report": _check_runs,
    "select": _check_runs,
    "correlate": _check_runs,
    "import": _check_import,
    "label-budget": _check_runs,
    "reproduce": _check_reproduce,
    "export": _check_export,
    "cost": _check_runs,
}


def _sources(args: argparse.Namespace) -> list[str]:
    """The texts a `metrics` or `stress` command reads: `metrics` takes several, comma-separated."""
    return text_sources(args.texts) if args.command == "metrics" else [args.texts]


def _task_texts(sources: list[str]) -> list[str]:
    """The mteb tasks whose texts ``sources`` name (``task:FILE.yaml:TASK`` ones are checked by ``check_texts``)."""
    names = [texts_task(source) for source in sources if source.startswith(TASK_TEXTS)]
    return [name for name in names if file_task(name) is None]
