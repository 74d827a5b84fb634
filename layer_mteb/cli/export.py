"""``layer-mteb export``: one layer, as it was scored, written as a sentence-transformers model folder. With
``--run`` the model, revision and settings are the run's (only read), the layer ``--layer`` or a selector's pick."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from layer_mteb.analysis.selection.registry import check_selector
from layer_mteb.cli.console import RESUME
from layer_mteb.cli.options import (
    MODEL_HELP,
    TRUST_REMOTE_CODE,
    ReadoutChoice,
    ReferenceChoice,
    add_fields,
    add_setting_options,
    check_runs,
    said,
    settings_of,
)
from layer_mteb.common.config import PIPELINE_SETTINGS, SETTINGS, EncodeConfig, Setting, option
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import check_new_folder
from layer_mteb.common.prompts import Prompts, choose_prompts, model_folder
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.evaluation.plan import check_writable
from layer_mteb.evaluation.request import own_settings
from layer_mteb.model.depth import known_depth
from layer_mteb.model.names import check_loadable, packaged_name
from layer_mteb.model.pipeline import PROTOCOLS

if TYPE_CHECKING:
    import pandas as pd

    from layer_mteb.model.st_export import RunRecord

NAME = "export"
HELP = "write one layer, as it was scored, as a sentence-transformers model folder"
INTERRUPTED = RESUME
MEAN = "mean"  # the selection API's name for the score averaged over tasks


def _unset_said(setting: Setting) -> str:
    """What an encode option left unset is: the run's, else the model's own pipeline's where it decides it."""
    own = "the model's own pipeline's (--protocol model), else " if setting.name in PIPELINE_SETTINGS else ""
    return f"default: the run's with --run, else {own}{said(setting.default)}"


@dataclass(frozen=True, kw_only=True)
class Settings(ReadoutChoice, ReferenceChoice):
    """The options as given; ``config``: with ``--model``, the encode settings given over those ``--protocol``
    gives the model (its own pipeline's by default), checked; none with ``--run`` (the run's)."""

    model: str | None = option(f"{MODEL_HELP}; with --run: how to load the run's model (default: its name)")
    revision: str | None = option("hub revision (default: the main branch, or the run's)")
    layer: int | None = option("the layer: 0 (embeddings) to the number of blocks")
    run: str | None = option("a run folder: the model, revision and settings its scores.csv was scored with")
    by: str | None = option(
        "with --run, instead of --layer: the label-free selector that picks the layer, as `select --by` takes it "
        "(auto, prompt_entropy, depth=0.8, ...)"
    )
    task: str | None = option("with --by: export the layer picked for this task (default: for the mean)")
    output: str = option("the folder to write (new or empty)", required=True)
    overwrite: bool = option("replace a non-empty --output folder", False)
    protocol: str | None = option(
        "with --model: what the pooling, max length and normalisation not given are, as for `run`: model, the "
        "model's own sentence-transformers pipeline (other models: the paper's settings), or paper (default: model, "
        "so the folder is the layer as `run --model` scores it; with --run, the run's settings)",
        choices=PROTOCOLS,
    )
    trust_remote_code: bool = option(TRUST_REMOTE_CODE, False)
    config: EncodeConfig | None = None


def add_options(export: argparse.ArgumentParser) -> None:
    add_fields(export, Settings)
    unset = {setting.name: None for setting in SETTINGS}  # with --run the settings are the run's
    add_setting_options(export, unset, _unset_said)


def check(args: argparse.Namespace) -> Settings:
    """What the options say alone: one source, one way to name the layer, a new or empty output."""
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
    encode = {s.name: getattr(args, s.name) for s in SETTINGS if getattr(args, s.name) is not None}
    if args.run is not None:
        check_runs([args.run])
        if args.by is not None:
            check_selector(args.by)  # a mistyped --by in a fraction of a second, with the nearest names
        given = [f"--{name.replace('_', '-')}" for name in encode] + (["--protocol"] if args.protocol else [])
        if given:
            raise UserError(f"with --run the settings are the run's: drop {', '.join(given)}")
    if args.model is not None:
        check_loadable(args.model, args.revision)  # a hub id that cannot load: one line before torch loads
        depth = None if args.run else known_depth(args.model)  # a layer the model lacks: before the weights load
        if depth is not None and args.layer is not None and args.layer > depth:
            raise UserError(f"--layer {args.layer} is out of range: {args.model} has layers 0 (embeddings) to {depth}")
    check_writable(Path(args.output))
    check_new_folder(Path(args.output), args.overwrite)
    if args.run is not None:
        return settings_of(Settings, args)
    # the layer as `run --model` scores it: the protocol's settings, the model's own by default (a bad --max-length
    # is one line from EncodeConfig)
    own = own_settings([args.model], args.revision, args.protocol or "model").settings
    return settings_of(Settings, args, config=EncodeConfig(**{**own, **encode}))


def execute(settings: Settings) -> None:
    plan = export_plan(settings)
    check_loadable(plan.model, plan.revision)  # the run's model, where --model did not name one
    from layer_mteb.model.loading import load_model
    from layer_mteb.model.st_export import export_layer, exported_readout

    model = load_model(
        plan.model,
        plan.config,
        revision=plan.revision,
        trust_remote_code=settings.trust_remote_code,
        tokenizer=plan.tokenizer,
    )
    if plan.scored_revision is not None and model.revision != plan.scored_revision:
        raise UserError(
            f"{plan.model} is at revision {model.revision}, but {settings.run} scored revision "
            f"{plan.scored_revision}; pass --model the model the run scored"
        )
    own = choose_prompts(None, model_folder(model.model.name_or_path), model.name)
    prompts = plan.prompts if plan.run is not None else own
    output = export_layer(
        model, plan.layer, plan.config, settings.output, overwrite=settings.overwrite, run=plan.run, prompts=prompts
    )
    print(
        f"layer {plan.layer} of {model.name} (readout: {exported_readout(model, plan.config)}, pooling: "
        f"{plan.config.pooling}) written to {output}"
    )


@dataclass(frozen=True)
class _Plan:
    """What to load and export; ``scored_revision``: the revision the run scored (the loaded model must be it)."""

    model: str
    revision: str | None
    config: EncodeConfig
    layer: int
    run: RunRecord | None = None
    scored_revision: str | None = None
    prompts: Prompts | None = None  # the prompts the run scored with (a model alone: its own)
    tokenizer: dict[str, object] | None = None  # the arguments the run's tokenizer was made with (mteb's loader's)


def export_plan(settings: Settings) -> _Plan:
    """The options as given, or the run's model, settings and chosen layer."""
    from layer_mteb.model.st_export import RunRecord

    if settings.config is not None:
        return _Plan(str(settings.model), settings.revision, settings.config, int(settings.layer))
    from layer_mteb.common.scores import one_setting

    folder = RunFolder(settings.run)
    scores = folder.scores()  # read once: its one setting gives the model, the whole table the layer's scores
    scored = folder.setting(one_setting(scores), device="cpu")  # the device is the export's, not the run's
    name, revision, n_layers, config = scored.model, scored.revision, scored.n_layers, scored.config
    layer, summary = (settings.layer, None) if settings.by is None else _selection(settings, folder)
    if layer > n_layers:
        raise UserError(f"--layer {layer} is out of range: {name} has layers 0 (embeddings) to {n_layers}")
    record = RunRecord(str(settings.run), settings.by, summary, layer_scores(scores, layer))
    model = settings.model or packaged_name(name, revision) or name
    pinned = None if settings.model else revision
    log = folder.log()
    return _Plan(model, pinned, config, layer, record, revision, run_prompts(log), run_tokenizer(log))


def run_tokenizer(entries: list[dict]) -> dict[str, object] | None:
    """The arguments a run's tokenizer was made with (``run.json``'s instructions: those of mteb's loader, e5-mistral's
    ``add_eos_token``), so the exported folder's tokenizer makes the token ids the run scored; None: the model's own."""
    for entry in entries:
        recorded = entry.get("instructions")
        if isinstance(recorded, dict) and recorded.get("tokenizer_arguments"):
            return dict(recorded["tokenizer_arguments"])
    return None


def run_prompts(entries: list[dict]) -> Prompts | None:
    """The prompts (or instructions, :func:`instruction_prompts`) a run's ``run.json`` says it scored with."""
    if any(isinstance(entry.get("instructions"), dict) for entry in entries):
        return instruction_prompts(entries)
    recorded = next((entry["prompts"] for entry in entries if isinstance(entry.get("prompts"), dict)), None)
    return None if recorded is None else Prompts.from_record(recorded)


def instruction_prompts(entries: list[dict]) -> Prompts:
    """A run's instructions as sentence-transformers prompts (``<task>-query``, ``<task>-document``, ``<task>``),
    which mteb picks by task name as the run did; the template and unscored tasks have no prompt name."""
    mapping: dict[str, str] = {}
    source = ""
    for entry in entries:
        recorded = entry.get("instructions")
        if isinstance(recorded, dict):
            source = f"instructions of {recorded.get('model')}"
            for prompt_type, text in (recorded.get("texts") or {}).items():
                mapping[entry["task"] if prompt_type == "none" else f"{entry['task']}-{prompt_type}"] = str(text)
    return Prompts(tuple(sorted(mapping.items())), None, source)


def layer_scores(scores: pd.DataFrame, layer: int) -> list[tuple[str, float]]:
    """(task, main score) of ``layer`` in the run, a subset named after its task, then the mean over them."""
    rows = scores[scores["layer"] == layer]
    named = sorted(
        (task if subset in ("default", "") else f"{task} ({subset})", float(score))
        for task, subset, score in zip(rows["task"], rows["subset"].astype(str), rows["main_score"], strict=True)
    )
    return [*named, (MEAN, sum(s for _, s in named) / len(named))] if named else []


def _selection(settings: Settings, folder: RunFolder) -> tuple[int, str]:
    """The layer ``--by`` picks (for ``--task``, else the mean) and a line comparing it; writes no selection file."""
    from layer_mteb.analysis.selection.picks import select_layers
    from layer_mteb.metrics.agreement.source import SignalSource

    by, task = str(settings.by), settings.task
    source = settings_of(SignalSource, settings)  # --agreement-with, --model, --no-reference
    picks = select_layers(
        folder,
        by=by,
        per_task=task is not None,
        metric_readout=settings.metric_readout,
        arithmetic=settings.arithmetic,
        source=source,
        write=False,
    )
    picks = picks[picks["selector"] == by]
    if task is not None:
        picks = picks[picks["task"] == task]
        if picks.empty:
            raise UserError(f"--by {by} picked no layer for task {task!r} in {folder.path}")
    elif (picks["task"] == MEAN).any():
        picks = picks[picks["task"] == MEAN]
    layers = sorted(int(k) for k in picks["chosen_layer"].unique())
    if not layers:
        raise UserError(f"--by {by} picked no layer in {folder.path}: does its metrics.csv have that metric?")
    if len(layers) > 1:
        raise UserError(
            f"--by {by} picks different layers ({', '.join(map(str, layers))}) across "
            f"{'tasks' if task is None else 'text sources'}: add --task NAME to export one task's pick, or --layer"
        )
    return layers[0], _summary(picks.iloc[0], len(picks))


def _summary(pick: pd.Series, n_picks: int) -> str:
    scope = "the mean over tasks" if pick["task"] == MEAN else f"task {pick['task']}"
    if n_picks > 1:
        return f"It picks layer {int(pick['chosen_layer'])} for each of the {n_picks} tasks of the run."
    return (
        f"On {scope} it scores {pick['chosen_score']:.4f}; the last layer ({int(pick['last_layer'])}) "
        f"{pick['last_score']:.4f}, the best layer in hindsight ({int(pick['best_layer'])}) {pick['best_score']:.4f} "
        f"(regret {pick['regret']:.4f}, gain {pick['gain']:+.4f})."
    )
