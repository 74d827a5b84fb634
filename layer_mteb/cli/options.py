"""What several ``layer-mteb`` commands share: option groups declared once, the values made from them and the
up-front checks. Nothing here imports torch, transformers or mteb: options are checked before anything heavy loads."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

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
    process_device,  # noqa: F401 (`cost` places its device with it, from here)
)
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import SCORES_FILE, RunFolder
from layer_mteb.evaluation.plan import check_writable
from layer_mteb.evaluation.request import own_settings
from layer_mteb.metrics import METRIC_READOUTS
from layer_mteb.metrics.texts import TASK_TEXTS, check_texts, task_of_texts_option, text_sources
from layer_mteb.model.names import check_loadable, known_hidden_size, packaged_name, recorded_name
from layer_mteb.model.pipeline import PROTOCOLS
from layer_mteb.tasks.catalog import file_task
from layer_mteb.tasks.task_names import check_task_names
from layer_mteb.vectors.memory import check_one_vector_fits, parse_size

DATA_DEFAULT = "(default: $LAYER_MTEB_DATA, else ../shared/data beside the checkout when it exists)"
MODEL_HELP = "hub id, local folder, GGUF file, or packaged name (minilm-l6, ...)"
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


def settings_of(cls: type, args: Any, **given: Any) -> Any:
    """A settings dataclass ``cls`` from the options of the same names, ``given`` replacing or adding values."""
    names = [f.name for f in fields(cls) if f.init and (f.name in given or hasattr(args, f.name))]
    return cls(**{name: given[name] if name in given else getattr(args, name) for name in names})


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
    parser.add_argument("--batch-size", type=int, help=f"texts per forward pass ({BATCH_DEFAULTS})")
    parser.add_argument(
        "--max-batch-tokens", type=int, help=f"also cap each batch at this many padded tokens ({TOKEN_DEFAULTS})"
    )
    parser.add_argument("--device", help="cpu | cuda | cuda:N (default: cuda if available)")
    parser.add_argument(
        "--device-map",
        help="split one large model over devices: auto, balanced, sequential (accelerate), or a JSON file of module"
        " -> device (a GPU number, cpu, disk) (default: all on --device)",
    )
    parser.add_argument("--trust-remote-code", action="store_true", help="allow model code from the hub")


def add_model_or_run(parser: argparse.ArgumentParser) -> None:
    """``metrics`` and ``stress`` measure a model given by name, or the model of a run folder with its settings."""
    parser.add_argument("--model", help=f"{MODEL_HELP} (or --run)")
    parser.add_argument(
        "--run",
        help="a run folder: its scores.csv gives the model, revision and encode settings (--readout stays yours), "
        "and the output defaults to it; with --model too, --model says how to load the run's model (a local folder)",
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        help="what the pooling, max length and normalisation not given are, as for `run`: model, the model's own "
        "sentence-transformers pipeline (other models: the paper's settings), or paper, the paper's protocol "
        "(default: the setting of the run folder measured into, --run or an --output holding the model's scores; "
        "else model, as `run`)",
    )


def add_measure_options(parser: argparse.ArgumentParser, *, seed_help: str, gzip: str | None = None) -> None:
    """The options ``metrics`` and ``stress`` share after their own; ``gzip`` names a table ``--gzip`` compresses."""
    parser.add_argument("--alpha", type=float, default=1.0, help="Rényi order of the matrix entropies")
    parser.add_argument("--seed", type=int, default=0, help=seed_help)
    if gzip is not None:
        parser.add_argument("--gzip", action="store_true", help=f"write {gzip}.gz instead of {gzip}")
    parser.add_argument("--data-dir", help=f"folder of local data: WikiText2/, tasks {DATA_DEFAULT}")
    add_encode_options(parser)
    parser.add_argument("--output", help="run folder (default: runs/<model>)")


def add_metric_readout(parser: argparse.ArgumentParser) -> None:
    """``--metric-readout``: which readout's metrics pick among the scores."""
    parser.add_argument(
        "--metric-readout",
        choices=METRIC_READOUTS,
        default="auto",
        help="which metrics pick among the scores: auto (the paper's: raw-stream metrics where they exist), raw, "
        "final_norm, or same (the scores' readout)",
    )
    parser.add_argument(
        "--arithmetic",
        choices=ARITHMETICS,
        help="metrics of this arithmetic (metrics --arithmetic; default: the one the run holds, paper where both)",
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
    defaults = {s.name: s.default for s in SETTINGS}
    unset = {name: (own or {}).get(name, defaults[name]) for name in PIPELINE_SETTINGS if getattr(args, name) is None}
    return settings_of(EncodeConfig, args, device=args.device or AUTO, max_cache_memory=memory_limit, **unset)


def parse_lengths(text: str | None) -> tuple[int, ...] | None:
    """``--lengths 64,128`` -> (64, 128); None when not given (the stress test's own lengths)."""
    if not text:
        return None
    try:
        return tuple(int(n) for n in text.split(","))
    except ValueError:
        raise UserError(f"--lengths must be comma-separated token counts, got {text!r}") from None


# -------------------------------------------------------------------------------------------------- up-front checks
def check_runs(runs: list[str], output: str | None = None) -> None:
    """Each run folder exists and holds a score table; ``output`` (a command's own folder) is writable."""
    for run in runs:
        folder = Path(run)
        if not folder.is_dir():
            raise UserError(f"run folder {str(folder)!r} does not exist: pass a folder written by `layer-mteb run`")
        if not (folder / SCORES_FILE).is_file():
            raise UserError(f"{str(folder)!r} has no {SCORES_FILE}: pass a folder written by `layer-mteb run`")
    if output is not None:
        check_writable(Path(output))


def task_texts(sources: list[str]) -> list[str]:
    """The mteb tasks whose texts ``sources`` name (``task:FILE.yaml:TASK`` ones are checked by ``check_texts``)."""
    names = [task_of_texts_option(source) for source in sources if source.startswith(TASK_TEXTS)]
    return [name for name in names if file_task(name) is None]


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


@dataclass(frozen=True)
class MeasureSettings:
    """What the settings of ``metrics`` and ``stress`` share (:func:`add_measure_options`)."""

    target: Measured
    alpha: float
    seed: int


def check_measured(args: argparse.Namespace, several_texts: bool) -> Measured:
    """The model, texts and settings of ``metrics`` / ``stress``, given or the run's, checked: the output writable,
    the model and every text source there (``several_texts``: comma-separated)."""
    model, revision, texts, data_dir = args.model, getattr(args, "revision", None), args.texts, args.data_dir
    taken: dict[str, Any] = {}  # the run folder's encode settings
    if args.run is not None:
        model, revision, texts, data_dir, taken = _run_model(args)
    elif model is None:
        raise UserError("give the model: --model M, or --run RUN for a run's model and settings")
    texts = texts or "wikitext"
    output = output_folder(args.output, args.run, model)
    check_writable(output)
    check_loadable(model, revision)  # a hub id that cannot load: one line before the texts are read
    if args.run is None:
        taken = folder_setting(output, model, revision)  # a run folder measured into: its setting, as --run
    if taken:
        check_setting_given(args, taken, Path(args.run or output), model, revision)
    sources = text_sources(texts) if several_texts else [texts]
    check_task_names(task_texts(sources))  # every unknown task of a comma-separated --texts in one line
    for source in sources:
        check_texts(source, data_dir)
    own: dict[str, Any] = {}
    if not taken:  # a new folder: the protocol's settings, the model's own pipeline by default (as `run`)
        own = own_settings([model], revision, args.protocol or "model").settings
    config = replace(encode_config(args, [], own), **taken)
    return Measured(model, revision, texts, tuple(sources), data_dir, config, output)


def folder_setting(output: Path, model: str, revision: str | None) -> dict[str, Any]:
    """The encode settings (all but the readout) of the run folder ``output`` where it holds ``model``'s scores, so
    what is measured into it pairs with them; none for a new or empty folder. A folder of another model is one line:
    its ``select`` would pair the measurement with nothing."""
    held = RunFolder(output).held_setting() if output.is_dir() else None
    if held is None:
        return {}
    runs, setting = held
    name = recorded_name(model, revision)[0]
    if name not in {held_model for held_model, _ in runs}:
        listed = ", ".join(sorted({held_model for held_model, _ in runs}))
        raise UserError(
            f"{output} holds the scores of {listed}, not of {name}: measure {model} into its own run folder "
            "(--output), or give --run to measure the folder's model"
        )
    config = EncodeConfig.from_key(setting)
    return {option: getattr(config, option) for option in RUN_SETTINGS}


def check_setting_given(
    args: argparse.Namespace, taken: Mapping[str, Any], folder: Path, model: str, revision: str | None
) -> None:
    """The settings given beside a run folder's agree with it: an option or ``--protocol`` asking for another
    pooling, max length, normalisation, dtype or attention is one line before any model loads (the folder holds one
    setting, and metrics of another pair with none of its scores). An option that says the folder's value is fine."""
    options = {o: getattr(args, o) for o in RUN_SETTINGS if getattr(args, o) != ENCODE_DEFAULTS[o]}
    protocol: dict[str, Any] = {}
    if args.protocol is not None:  # the protocol's pooling, max length and normalisation, where no option says one
        paper = {s.name: s.default for s in SETTINGS if s.name in PIPELINE_SETTINGS}
        protocol = {**paper, **own_settings([model], revision, args.protocol).settings}
        protocol = {name: value for name, value in protocol.items() if name not in options}
    asked = {**options, **protocol}
    differ = [name for name, value in asked.items() if taken.get(name) != value]
    if not differ:
        return
    given = [_option_as_given(name, options[name]) for name in differ if name in options]
    given += [f"--protocol {args.protocol}"] if any(name in protocol for name in differ) else []
    held = ", ".join(f"{name}={taken.get(name)}" for name in differ)
    wanted = ", ".join(f"{name}={asked[name]}" for name in differ)
    raise UserError(
        f"{folder} holds scores with {held}; this asks {wanted}: drop {' and '.join(given)} (what is measured into a "
        "run folder takes its setting), or measure into another --output"
    )


def _option_as_given(name: str, value: Any) -> str:
    """``--pooling``, or ``--no-normalize`` for an on/off setting given off."""
    return f"--{'no-' if value is False else ''}{name.replace('_', '-')}"


def _run_model(args: argparse.Namespace) -> tuple[str, str | None, str, str | None, dict[str, Any]]:
    """``--run RUN``: the run's model (``--model`` says how to load it), revision, texts, data folder and encode
    settings but the readout; a different setting given beside ``--run`` is refused."""
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
    return model, run_revision, texts, data_dir, {option: getattr(run_config, option) for option in RUN_SETTINGS}


def add_no_reference(parser: argparse.ArgumentParser) -> None:
    """``--no-reference``: ``--by auto`` keeps to the depth rule where a base model's run lacks agreement curves."""
    parser.add_argument(
        "--no-reference",
        action="store_true",
        help="with --by auto: never compute agreement curves; a base model's run without them gets the depth rule "
        "(default: computed with the reference encoder where one loads)",
    )
