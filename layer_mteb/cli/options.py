"""What several ``layer-mteb`` commands share: option groups declared once, the values made from them and the
up-front checks. Nothing here imports torch, transformers or mteb: options are checked before anything heavy loads."""

from __future__ import annotations

import argparse
import inspect
import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from layer_mteb.common.config import (
    ARITHMETICS,
    AUTO,
    CPU_BATCH_SIZE,
    GPU_BATCH_SIZE,
    GPU_BATCH_TOKENS,
    GPU_STATE_BYTES,
    PIPELINE_SETTINGS,
    SETTINGS,
    SETTINGS_COLUMNS,
    EncodeConfig,
    Setting,
    option,
)
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import SCORES_FILE, RunFolder
from layer_mteb.evaluation.plan import check_writable
from layer_mteb.evaluation.request import own_settings
from layer_mteb.metrics import METRIC_READOUTS
from layer_mteb.metrics.metric_settings import MetricSettings, help_of
from layer_mteb.metrics.texts import TASK_TEXTS, check_texts, task_of_texts_option, text_sources
from layer_mteb.model.names import MODEL_HELP, check_loadable, known_hidden_size, packaged_name, recorded_name
from layer_mteb.model.pipeline import PROTOCOLS
from layer_mteb.tasks.catalog import DATA_DEFAULT, file_task
from layer_mteb.tasks.task_names import check_task_names
from layer_mteb.vectors.memory import check_one_vector_fits, parse_size

TRUST_REMOTE_CODE = "allow model code from the hub"
BATCH_DEFAULTS = f"default: {CPU_BATCH_SIZE} on a CPU, up to {GPU_BATCH_SIZE} on a GPU"
TOKEN_DEFAULTS = (
    f"default: no cap on a CPU; on a GPU, as many as one batch's hidden states of every layer fit in "
    f"{GPU_STATE_BYTES // 2**30} GiB, at most {GPU_BATCH_TOKENS:,}"
)
RUNS = "runs"  # default parent of run folders; results/ holds only the committed reproduction
#: the encode options' defaults: a pipeline's settings unset (None), filled by ``run`` from the model's own pipeline,
#: by other commands from EncodeConfig; ``metrics --run`` / ``stress --run`` tell from them what the user gave
ENCODE_DEFAULTS: dict[str, Any] = {s.name: None if s.name in PIPELINE_SETTINGS else s.default for s in SETTINGS}
#: the settings ``metrics --run`` / ``stress --run`` take from the run (the readout stays the options')
RUN_SETTINGS = tuple(name for name in SETTINGS_COLUMNS if name != "readout")
#: how an unset pooling / max length / normalisation is said in the options' help
OWN_DEFAULT = (
    "default: with `run`, the model's own sentence-transformers pipeline where it has one (--protocol model), else %s"
)
#: and an unset dtype
OWN_DTYPE = "default: with `run`, the dtype the model's mteb registry entry loads it in (--protocol model), else %s"


# ------------------------------------------------------------------------------------- options declared as fields
def add_fields(parser: argparse.ArgumentParser, settings: type) -> None:
    """One option per field of the dataclass ``settings`` declared with :func:`option` (a field with a help): its
    own in declaration order, then its bases' (the option groups it takes)."""
    hints, own = get_type_hints(settings), inspect.get_annotations(settings)
    for declared in sorted(fields(settings), key=lambda f: f.name not in own):  # its own first, then its bases'
        if "help" not in declared.metadata:
            continue
        keywords = {**_parsed_as(hints[declared.name], declared.default), **declared.metadata.get("argparse", {})}
        flags = keywords.pop("flags", (f"--{declared.name.replace('_', '-')}",))
        if flags[0].startswith("-"):  # a positional argument's name is its field's already
            keywords["dest"] = declared.name
        default = None if declared.default is MISSING else declared.default  # a required field: argparse's None
        parser.add_argument(*flags, default=default, help=declared.metadata["help"], **keywords)


def _parsed_as(hint: Any, default: Any) -> dict[str, Any]:
    """How argparse reads a value of the annotation ``hint``: on/off, one of a ``Literal``'s values, a list of
    repeated options, or a number."""
    if get_origin(hint) in (Union, types.UnionType):  # X | None: the X
        hint = next(kind for kind in get_args(hint) if kind is not type(None))
    if hint is bool:
        return {"action": "store_true"} if default is False else {"action": argparse.BooleanOptionalAction}
    if get_origin(hint) is Literal:
        return {"choices": get_args(hint)}
    if get_origin(hint) is list:
        return {"action": "append"}
    return {"type": hint} if hint in (int, float, Path) else {}  # else the text as given (str, Any)


def settings_of(cls: type, args: Any, **given: Any) -> Any:
    """A settings dataclass ``cls`` from the options of the same names, ``given`` (fields of ``cls``) replacing or
    adding values."""
    return cls(**{f.name: getattr(args, f.name) for f in fields(cls) if f.init and hasattr(args, f.name)} | given)


def as_keywords(settings: Any, **renamed: str) -> dict[str, Any]:
    """A settings dataclass as the keyword arguments of the function it feeds, ``renamed`` mapping field -> name."""
    return {renamed.get(name, name): value for name, value in vars(settings).items()}


# ------------------------------------------------------------------------------------------------------ option groups
def add_setting_options(
    parser: argparse.ArgumentParser, defaults: Mapping[str, Any], unset: Callable[[Setting], str]
) -> None:
    """One option per encode setting (its EncodeConfig field's choices, type and help); ``unset`` says in the help
    what one left unset becomes."""
    for setting in SETTINGS:
        default = defaults[setting.name]
        typed = {"type": setting.kind, "choices": setting.choices}
        kind = {"action": argparse.BooleanOptionalAction} if setting.kind is bool else typed
        said = setting.help if default is not None else f"{setting.help} ({unset(setting)})"
        parser.add_argument(setting.option, default=default, help=said, **kind)


def said(value: object) -> str:
    """A setting's default as the help says it."""
    return "the model's own" if value is None else "off" if value is False else str(value)


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where and in what batches the work runs (the :class:`EncodeConfig` fields that change no vector): the options
    of every command that runs a model."""

    batch_size: int | None = option(f"texts per forward pass ({BATCH_DEFAULTS})")
    max_batch_tokens: int | None = option(f"also cap each batch at this many padded tokens ({TOKEN_DEFAULTS})")
    device: str | None = option("cpu | cuda | cuda:N (default: cuda if available)")
    device_map: str | None = option(
        "split one large model over devices: auto, balanced, sequential (accelerate), or a JSON file of module -> "
        "device (a GPU number, cpu, disk) (default: all on --device)"
    )


def add_encode_options(parser: argparse.ArgumentParser) -> None:
    """How texts become vectors (``EncodeConfig``), the same for ``run``, ``metrics`` and ``stress``."""
    add_setting_options(
        parser,
        ENCODE_DEFAULTS,
        lambda s: (
            (OWN_DTYPE if s.name == "dtype" else OWN_DEFAULT) % said(s.default)
            if s.name in PIPELINE_SETTINGS
            else f"default: {said(s.default)}"
        ),
    )
    add_fields(parser, Placement)
    parser.add_argument("--trust-remote-code", action="store_true", help=TRUST_REMOTE_CODE)


@dataclass(frozen=True, kw_only=True)
class ReadoutChoice:
    """Which metrics pick among the scores: the options of every command that picks by metrics."""

    metric_readout: str = option(
        "which metrics pick among the scores: auto (the paper's: raw-stream metrics where they exist), raw, "
        "final_norm, or same (the scores' readout)",
        "auto",
        choices=METRIC_READOUTS,
    )
    arithmetic: str | None = option(
        "metrics of this arithmetic (metrics --arithmetic; default: the one the run holds, paper where both)",
        choices=ARITHMETICS,
    )


@dataclass(frozen=True, kw_only=True)
class ReferenceChoice:
    """What the agreement curves a pick needs and the run lacks are computed against: the options of every command
    that may pick by agreement (``--by agreement``, ``--by auto``)."""

    reference: str | None = option(
        "with --by agreement or auto: the trusted sentence encoder the curves a run lacks are computed against "
        "(packaged name, folder or hub id; default: mpnet-base when installed, else minilm-l6, else all-mpnet-base-v2 "
        "from the hub, never the model itself), or a lexical reference fitted on the sampled texts alone, when no "
        "other model may be used: tfidf, tfidf-lsa or bm25",
        flags=("--agreement-with",),
    )
    no_reference: bool = option(
        "with --by auto: never compute agreement curves; a base model's run without them gets the depth rule "
        "(default: computed with the reference encoder where one loads)",
        False,
    )


def output_folder(output: str | None, run: str | None, model: str | None) -> Path:
    """``--output``, else the ``--run`` folder, else ``runs/<model's name>`` (never the committed ``results/``)."""
    if output is None and run:
        return Path(run)
    return Path(output or Path(RUNS) / Path(str(model)).name.replace("/", "__"))


def encode_config(args: argparse.Namespace, models: list[str], own: dict[str, Any] | None = None) -> EncodeConfig:
    """The encode options as a checked :class:`EncodeConfig` (device :data:`~layer_mteb.common.config.AUTO` until
    torch may load); an unset pipeline setting is ``own``'s, else the default. A memory limit is checked against
    the models whose width is known without loading them."""
    memory_limit = parse_size(args.max_cache_memory) if getattr(args, "max_cache_memory", None) else None
    for model in models if memory_limit is not None else []:
        hidden = known_hidden_size(model)
        if hidden is not None:
            check_one_vector_fits(memory_limit, hidden, model)
    unset = _unset_settings(args, own or {})
    return settings_of(EncodeConfig, args, device=args.device or AUTO, max_cache_memory=memory_limit, **unset)


def _unset_settings(args: argparse.Namespace, own: Mapping[str, Any]) -> dict[str, Any]:
    """The pipeline settings no option gives (in :data:`SETTINGS` order, as messages list them): ``own``'s, else
    the default."""
    unset = [s for s in SETTINGS if s.name in PIPELINE_SETTINGS and getattr(args, s.name) is None]
    return {s.name: own.get(s.name, s.default) for s in unset}


def parse_lengths(text: str | None) -> tuple[int, ...] | None:
    """``--lengths 64,128`` -> (64, 128); None when not given (the stress test's own lengths)."""
    if not text:
        return None
    try:
        return tuple(int(n) for n in text.split(","))
    except ValueError:
        raise UserError(f"--lengths must be comma-separated token counts, got {text!r}") from None


# -------------------------------------------------------------------------------------------------- up-front checks
def check_runs(runs: list[str], output: str | Path | None = None) -> None:
    """Each run folder exists and holds a score table; ``output`` (a command's own folder) is writable."""
    for run in runs:
        folder = Path(run)
        if not folder.is_dir():
            raise UserError(f"run folder {str(folder)!r} does not exist: pass a folder written by `layer-mteb run`")
        if not (folder / SCORES_FILE).is_file():
            raise UserError(f"{str(folder)!r} has no {SCORES_FILE}: pass a folder written by `layer-mteb run`")
    if output is not None:
        check_writable(Path(output))


def check_text_sources(texts: str, data_dir: str | None, several: bool = True) -> list[str]:
    """The text sources ``texts`` names (``several``: comma-separated), each there: the unknown mteb tasks they name
    all in one line (``task:FILE.yaml:TASK`` ones are checked by ``check_texts``), then each source's texts."""
    sources = text_sources(texts) if several else [texts]
    names = [task_of_texts_option(source) for source in sources if source.startswith(TASK_TEXTS)]
    check_task_names([name for name in names if file_task(name) is None])
    for source in sources:
        check_texts(source, data_dir)
    return sources


# ------------------------------------------------------------------------------------- --model or --run, measured
@dataclass(frozen=True)
class Measured:
    """What ``metrics`` and ``stress`` measure: ``model`` at ``revision`` on ``sources``, into ``output``."""

    model: str
    revision: str | None
    texts: str
    sources: tuple[str, ...]
    data_dir: str | None
    config: EncodeConfig
    output: Path


@dataclass(frozen=True, kw_only=True)
class MeasureSettings:
    """What the options of ``metrics`` and ``stress`` share (:func:`add_measure_options`); ``target``, the model,
    texts and settings they name, checked (:func:`check_measured`). Each command declares its own ``--seed``."""

    model: str | None = option(f"{MODEL_HELP} (or --run)")
    run: str | None = option(
        "a run folder: its scores.csv gives the model, revision and encode settings (--readout stays yours), and the "
        "output defaults to it; with --model too, --model says how to load the run's model (a local folder)"
    )
    protocol: str | None = option(
        "what the pooling, max length and normalisation not given are, as for `run`: model, the model's own "
        "sentence-transformers pipeline (other models: the paper's settings), or paper, the paper's protocol "
        "(default: the setting of the run folder measured into, --run or an --output holding the model's scores; "
        "else model, as `run`)",
        choices=PROTOCOLS,
    )
    alpha: float = option(help_of("alpha"), MetricSettings.alpha)
    data_dir: str | None = option(f"folder of local data: WikiText2/, tasks {DATA_DEFAULT}")
    output: str | None = option("run folder (default: runs/<model>)")
    trust_remote_code: bool = False  # an encode option (add_encode_options)
    target: Measured  # made by check_measured from the options above


def add_measure_options(parser: argparse.ArgumentParser, settings: type[MeasureSettings]) -> None:
    """The options of ``metrics`` or ``stress`` (``settings``, its own first), then the encode options."""
    add_fields(parser, settings)
    add_encode_options(parser)


def check_measured(args: argparse.Namespace, several_texts: bool) -> Measured:
    """The model, texts and settings of ``metrics`` / ``stress``, given or the run's, checked: the output writable,
    the model and every text source there (``several_texts``: comma-separated)."""
    model, revision, texts, data_dir = args.model, getattr(args, "revision", None), args.texts, args.data_dir
    held: EncodeConfig | None = None  # the setting of the run folder measured into, read once
    if args.run is not None:
        model, revision, texts, data_dir, held = _run_model(args)
    elif model is None:
        raise UserError("give the model: --model M, or --run RUN for a run's model and settings")
    texts = texts or "wikitext"
    output = output_folder(args.output, args.run, model)
    check_writable(output)
    check_loadable(model, revision)  # a hub id that cannot load: one line before the texts are read
    if args.run is None:
        held = folder_setting(output, model, revision)  # a run folder measured into: its setting, as --run
    taken = {name: getattr(held, name) for name in RUN_SETTINGS} if held else {}  # all but the readout
    if taken:
        check_setting_given(args, taken, Path(args.run or output), model, revision)
    sources = check_text_sources(texts, data_dir, several_texts)
    # a new folder: the protocol's settings, the model's own pipeline by default (as `run`)
    own = {} if taken else own_settings([model], revision, args.protocol or "model").settings
    config = replace(encode_config(args, [], own), **taken)
    return Measured(model, revision, texts, tuple(sources), data_dir, config, output)


def folder_setting(output: Path, model: str, revision: str | None) -> EncodeConfig | None:
    """The encode setting of the run folder ``output`` where it holds ``model``'s scores, so what is measured into it
    pairs with them; None for a new or empty folder. A folder of another model is one line:
    its ``select`` would pair the measurement with nothing."""
    held = RunFolder(output).held_setting() if output.is_dir() else None
    if held is None:
        return None
    runs, setting = held
    name = recorded_name(model, revision)[0]
    if name not in {held_model for held_model, _ in runs}:
        listed = ", ".join(sorted({held_model for held_model, _ in runs}))
        raise UserError(
            f"{output} holds the scores of {listed}, not of {name}: measure {model} into its own run folder "
            "(--output), or give --run to measure the folder's model"
        )
    return EncodeConfig.from_key(setting)


def check_setting_given(
    args: argparse.Namespace, taken: Mapping[str, Any], folder: Path, model: str, revision: str | None
) -> None:
    """The settings given beside a run folder's agree with it: an option or ``--protocol`` asking for another
    pooling, max length, normalisation, dtype or attention is one line before any model loads (the folder holds one
    setting, and metrics of another pair with none of its scores). An option that says the folder's value is fine."""
    options = {o: getattr(args, o) for o in RUN_SETTINGS if getattr(args, o) != ENCODE_DEFAULTS[o]}
    # the protocol's pooling, max length, normalisation and dtype, where no option says one
    protocol = _unset_settings(args, own_settings([model], revision, args.protocol).settings) if args.protocol else {}
    asked = {**options, **protocol}
    differ = [name for name, value in asked.items() if taken.get(name) != value]
    if not differ:
        return
    # as given: --pooling, or --no-normalize for an on/off setting given off
    given = [
        f"--{'no-' if options[name] is False else ''}{name.replace('_', '-')}" for name in differ if name in options
    ]
    given += [f"--protocol {args.protocol}"] if any(name in protocol for name in differ) else []
    held = ", ".join(f"{name}={taken.get(name)}" for name in differ)
    wanted = ", ".join(f"{name}={asked[name]}" for name in differ)
    raise UserError(
        f"{folder} holds scores with {held}; this asks {wanted}: drop {' and '.join(given)} (what is measured into a "
        "run folder takes its setting), or measure into another --output"
    )


def _run_model(args: argparse.Namespace) -> tuple[str, str | None, str, str | None, EncodeConfig]:
    """``--run RUN``: the run's model (``--model`` says how to load it), revision, texts, data folder and encode
    setting; a different setting given beside ``--run`` is refused."""
    check_runs([args.run])
    folder = RunFolder(args.run)
    scores = folder.one_setting()
    row = scores.iloc[-1]
    name, revision = str(row["model"]), str(row["revision"])
    if getattr(args, "revision", None) is not None:
        raise UserError("with --run the model's revision is the run's: drop --revision")
    run_config = EncodeConfig.from_key(row)
    recorded = folder.recorded_tasks()  # a custom task's texts are found through the file declaring it
    texts = args.texts or ",".join(f"{TASK_TEXTS}{task}" for task in sorted(set(scores["task"].astype(str))))
    texts = ",".join(
        f"{TASK_TEXTS}{recorded.task_files[task_of_texts_option(s)]}"
        if s.startswith(TASK_TEXTS) and task_of_texts_option(s) in recorded.task_files
        else s
        for s in text_sources(texts)
    )
    data_dir = args.data_dir
    if data_dir is None and recorded.data_dir is not None:  # the run's data folder, for --texts task:<Task>
        data_dir = str(recorded.data_dir)
    model, run_revision = args.model, None
    if model is None:
        if name.startswith("local/"):
            raise UserError(
                f"{args.run} scored a local model ({name}): add --model FOLDER, the folder it was loaded from"
            )
        model = packaged_name(name, revision) or name
        if model == name and args.command == "metrics":
            run_revision = revision  # a hub model at the commit the run scored
    return model, run_revision, texts, data_dir, run_config
