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
from layer_mteb.common.hub import offline_unless_reachable
from layer_mteb.common.run_folder import SCORES_FILE, RunFolder
from layer_mteb.evaluation.plan import check_writable
from layer_mteb.evaluation.request import hub_needed
from layer_mteb.metrics import METRIC_READOUTS
from layer_mteb.metrics.texts import TASK_TEXTS, check_texts, task_of_texts_option, text_sources
from layer_mteb.model.names import known_hidden_size, model_kind, packaged_name
from layer_mteb.tasks.catalog import data_dir_from_env, file_task
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
        lambda s: OWN_DEFAULT % said(s.default) if s.name in PIPELINE_SETTINGS else f"default: {said(s.default)}",
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


def probe_hub_if(needed: bool) -> None:
    """Probe the hub only when something may come from it, before mteb and datasets read ``HF_HUB_OFFLINE``."""
    if needed:
        offline_unless_reachable()


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

    def hub_needed(self) -> bool:
        return hub_needed([self.model], data_dir_from_env(self.data_dir), task_texts(list(self.sources)))


@dataclass(frozen=True)
class MeasureSettings:
    """What the settings of ``metrics`` and ``stress`` share (:func:`add_measure_options`)."""

    target: Measured
    alpha: float
    seed: int

    def hub_needed(self) -> bool:
        return self.target.hub_needed()


def check_measured(args: argparse.Namespace, several_texts: bool) -> Measured:
    """The model, texts and settings of ``metrics`` / ``stress``, given or the run's, checked: the output writable,
    the model and every text source there (``several_texts``: comma-separated)."""
    model, revision, texts, data_dir = args.model, getattr(args, "revision", None), args.texts, args.data_dir
    taken: dict[str, Any] = {}  # the run's encode settings
    if args.run is not None:
        model, revision, texts, data_dir, taken = _run_model(args)
    elif model is None:
        raise UserError("give the model: --model M, or --run RUN for a run's model and settings")
    texts = texts or "wikitext"
    output = output_folder(args.output, args.run, model)
    check_writable(output)
    model_kind(model)
    sources = text_sources(texts) if several_texts else [texts]
    check_task_names(task_texts(sources))  # every unknown task of a comma-separated --texts in one line
    for source in sources:
        check_texts(source, data_dir)
    config = replace(encode_config(args, []), **taken)
    return Measured(model, revision, texts, tuple(sources), data_dir, config, output)


def _run_model(args: argparse.Namespace) -> tuple[str, str | None, str, str | None, dict[str, Any]]:
    """``--run RUN``: the run's model (``--model`` says how to load it), revision, texts, data folder and encode
    settings but the readout; a different setting given beside ``--run`` is refused."""
    check_runs([args.run])
    folder = RunFolder(args.run)
    scores = folder.one_setting()
    row = scores.iloc[-1]
    name, revision = str(row["model"]), str(row["revision"])
    given = [f"--{o.replace('_', '-')}" for o in RUN_SETTINGS if getattr(args, o) != ENCODE_DEFAULTS[o]]
    if getattr(args, "revision", None) is not None:
        given.append("--revision")
    if given:
        raise UserError(f"with --run the model's settings are the run's: drop {', '.join(given)}")
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
