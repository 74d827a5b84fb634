"""The settings of one run, resolved and checked once (before transformers or mteb load) and only read afterwards.

``layer-mteb run`` makes it from its options, :func:`~layer_mteb.evaluation.sweep.sweep` from its keywords (the same
names), so a mistyped task, layer list or output fails before any model loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any

from layer_mteb.common.config import AUTO, PIPELINE_SETTINGS, SETTINGS_COLUMNS, EncodeConfig, option
from layer_mteb.common.errors import UserError
from layer_mteb.common.instructions import AUTO_DTYPE, choose_instructions
from layer_mteb.common.instructions import NONE as NO_INSTRUCTIONS
from layer_mteb.common.prompts import NONE as NO_PROMPTS
from layer_mteb.common.prompts import read_prompts_file
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.evaluation.plan import check_layers, check_model_layers, check_writable, distributed_shard
from layer_mteb.evaluation.workers import check_eval_workers
from layer_mteb.model.names import MODEL_HELP, check_loadable, model_kind, recorded_name
from layer_mteb.model.pipeline import PROTOCOLS, Pipeline, checkpoint_dtype, model_pipeline, read_pipeline
from layer_mteb.tasks.catalog import DATA_DEFAULT, TaskSpec, data_dir_from_env, select_tasks
from layer_mteb.tasks.custom import check_custom_files


@dataclass(frozen=True)
class RunRequest:
    """The settings of one run: one field per ``layer-mteb run`` option and ``sweep`` keyword (``--model`` is
    ``models``, the encode options ``config``), resolved in place when made; docs/usage.md describes each.

    Units are (model, revision, task); ``shard=(i, n)`` (or ``"i/n"``) runs every n-th from the i-th, and under
    ``accelerate launch`` each process takes its own (``launched``). ``held`` is what ``output`` already holds,
    checked once. ``protocol`` fills what ``config`` left open (``model``: a sentence-transformers model's own
    pipeline and mteb's instructions; ``paper``: the paper's settings); a ``config`` given is taken as it is, and
    ``settings_from`` says which of the two it matches, or ``given``.
    """

    models: Any = option(
        f"{MODEL_HELP}; repeat for several models", MISSING, flags=("--model",), action="append", required=True
    )
    tasks: str | Sequence[Any] = option(
        'tasks.yaml[:suite], or comma-separated suite names, mteb tasks and mteb benchmarks by name, e.g. "MTEB(eng, '
        'v2)" (its tasks, splits and languages as mteb defines them; `mteb available-benchmarks` lists the names)',
        "paper32",
    )
    revision: str | Sequence[str] | None = option(
        "hub revision(s), comma-separated, e.g. step1000,step143000 (default: the main branch)"
    )
    data_dir: str | Path | None = option(f"folder of local task data {DATA_DEFAULT}")
    prompts: str | None = option(
        "prompts put before the texts, per task and query/document as mteb picks them: a JSON/YAML file mapping "
        "prompt names to prompts, or none (default: the model's own, from its config_sentence_transformers.json)"
    )
    instructions: str | None = option(
        "instruction embedders (Qwen3-Embedding, e5-mistral-instruct, ...): put mteb's per-task instruction before "
        "the texts with the template of the model's mteb registry entry (documents too only where mteb does), as "
        "mteb's InstructSentenceTransformerModel does; give the registry name of the model a local folder holds (e.g. "
        "Qwen/Qwen3-Embedding-0.6B), or none (default: the model's own entry, found by hub id or by the folder's "
        "name, under --protocol model)"
    )
    protocol: str = option(
        "what the pooling, max length and normalisation not given are: model, a sentence-transformers model's own "
        "pipeline (its pooling mode, max_seq_length and Normalize) with mteb's instructions for it, so that its last "
        "layer is its mteb score (other models: the paper's settings); paper, the paper's protocol for every model "
        "(mean pooling, 512 tokens, no normalisation, no instructions)",
        "model",
        choices=PROTOCOLS,
    )
    layers: str | Sequence[int] = option("all | 0,3,-1 | 0:12 (hidden states; 0 = embeddings)", "all")
    # the encode options (config) come here in --help
    shard: str | tuple[int, int] | None = option(
        "I/N: run the I-th of N shards of the work, for SLURM array jobs (default: all of it)"
    )
    eval_workers: int | None = option("layers evaluated at once in worker processes (default: one per CPU core)")
    output: str | Path | None = option("run folder (default: runs/<model>)")
    overwrite: bool = option("recompute results that already exist", False)
    vector_cache: bool = option(
        "do not keep pooled vectors on disk", True, flags=("--no-vector-cache",), action="store_false"
    )
    skip_unavailable: bool = option(
        "with the hub offline, run the tasks that have a local copy and list the others (default: stop)", False
    )
    task_metrics: bool = option(
        "also write each task's label-free metrics (prompt entropy, ...) from the same forward pass", False
    )
    verbose: bool = option(
        "show every warning of the evaluators (default: counted, one line per task) and the progress bars of "
        "datasets (default: off)",
        False,
        flags=("-v", "--verbose"),
    )
    trust_remote_code: bool = False  # an encode option
    config: EncodeConfig | None = None
    progress: bool = True
    # resolved from the options above, never given
    settings_from: str = field(init=False)
    split: str = field(init=False)
    launched: bool = field(init=False)
    held: FolderRuns | None = field(init=False)
    #: the benchmark each task given as part of an mteb benchmark object came from (task name -> benchmark name)
    given_benchmarks: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        """Resolve and check every field: each mistake is one :class:`UserError` before any model loads (so never
        copy a request with ``dataclasses.replace``)."""
        for name, value in _resolved(self).items():
            object.__setattr__(self, name, value)

    def benchmark_of(self, task: str) -> str | None:
        """The mteb benchmark the selection took ``task`` from (``run.json`` records it), or None."""
        specs = (spec for spec in self.tasks if isinstance(spec, TaskSpec) and spec.name == task)
        return next((spec.benchmark for spec in specs), self.given_benchmarks.get(task))


def _resolved(request: RunRequest) -> dict[str, Any]:
    """The fields of ``request`` as the sweep reads them."""
    models = tuple(request.models) if isinstance(request.models, list | tuple) else (request.models,)
    named = [model for model in models if isinstance(model, str)]  # the others come loaded
    for name in named:
        model_kind(name)
    revisions = request.revision.split(",") if isinstance(request.revision, str) else request.revision
    revisions = tuple(revisions or [None])
    for name in named:  # a hub id that cannot load is one line now, not after the tasks and the model's libraries
        for revision in revisions:
            check_loadable(name, revision)
    shard = parse_shard(request.shard) if isinstance(request.shard, str) else request.shard
    launched = distributed_shard() if shard is None else None  # under accelerate launch: this process's shard
    output = Path(request.output) if request.output is not None else None
    if output is not None:
        check_writable(output)
    if request.task_metrics and (shard is not None or launched is not None or output is None):
        raise UserError(
            "--task-metrics needs --output and one process; with shards, merge, then run "
            "`layer-mteb metrics --run RUN --texts task:TASK`"
        )
    if isinstance(request.layers, str):
        check_layers(request.layers)
    for name in named:
        check_model_layers(request.layers, name)  # a layer the model lacks, from its config: before it loads
    split, specs, benchmarks = _tasks(request.tasks, folder := data_dir_from_env(request.data_dir), request.prompts)
    instructions = check_instructions(request.instructions, request.prompts, request.protocol)
    own = own_settings(models, revisions[0], request.protocol, instructions)
    config = request.config or EncodeConfig(device=AUTO, **own.settings)
    return {
        "models": models,
        "revision": revisions,
        "tasks": specs,
        "split": split,
        "data_dir": folder,
        "layers": request.layers if isinstance(request.layers, str) else tuple(request.layers),
        "output": output,
        "shard": shard or launched,
        "launched": launched is not None,
        "eval_workers": check_eval_workers(request.eval_workers),
        "config": config,
        "instructions": instructions,
        "settings_from": own.describe(config),
        "held": check_output(output, models, revisions, config),  # no other model or setting in the folder
        "given_benchmarks": benchmarks,
    }


#: what a paper-protocol run applies: EncodeConfig's own defaults
PAPER_SETTINGS: dict[str, Any] = {name: getattr(EncodeConfig(), name) for name in PIPELINE_SETTINGS}


@dataclass(frozen=True)
class OwnSettings:
    """The pooling, normalize and max length ``protocol`` gives the models (empty: the paper's), and their source."""

    settings: dict[str, Any]
    source: str

    def describe(self, config: EncodeConfig) -> str:
        """Which protocol ``config`` follows: the model's pipeline, the paper's, or neither (``given``). The dtype
        counts only where the model's registry entry sets one: a GPU run's ``--dtype bfloat16`` is no other protocol."""
        paper = {k: v for k, v in PAPER_SETTINGS.items() if k != "dtype" or "dtype" in self.settings}
        applied = {name: getattr(config, name) for name in paper}
        if self.settings and applied == {**paper, **self.settings}:
            return self.source
        return "paper" if applied == paper else "given"


def check_instructions(instructions: str | None, prompts: str | None, protocol: str) -> str | None:
    """``instructions`` as the sweep reads it: ``none`` under the paper's protocol or beside a ``--prompts`` file
    (asking for both is an error: only one goes before the texts)."""
    if protocol not in PROTOCOLS:
        raise UserError(f"--protocol must be one of {', '.join(PROTOCOLS)}; got {protocol!r}")
    prompts_file = prompts is not None and prompts.strip().lower() != NO_PROMPTS
    asked = instructions is not None and instructions.strip().lower() != NO_INSTRUCTIONS
    if asked and prompts_file:
        raise UserError("give --instructions or a --prompts file, not both: one of them goes before the texts")
    if instructions is None and (protocol == "paper" or prompts_file):
        return NO_INSTRUCTIONS
    return instructions


def own_settings(
    models: Sequence[Any], revision: str | None, protocol: str, instructions: str | None = None
) -> OwnSettings:
    """The settings ``protocol`` gives ``models``: under ``model`` their sentence-transformers pipeline, read from
    their files, and the dtype of the mteb registry entry whose instructions they get (``instructions`` as
    :func:`check_instructions` leaves it), one for all, else one line says to choose; under ``paper`` (or with
    neither) none."""
    if protocol == "paper":
        return OwnSettings({}, "paper")
    found: dict[str, tuple[dict[str, Any], str]] = {}
    for model in models:
        pipeline = model_pipeline(model, revision) if isinstance(model, str) else loaded_pipeline(model)
        registry = registry_dtype(model, instructions, pipeline)
        if pipeline is None and registry is None:
            continue
        settings = {**(pipeline.settings() if pipeline is not None else {}), **(registry[0] if registry else {})}
        sources = [f"sentence-transformers pipeline of {pipeline.folder}"] if pipeline is not None else []
        found[str(getattr(model, "name", model))] = (settings, ", ".join(sources + ([registry[1]] if registry else [])))
    kinds = {tuple(sorted(settings.items())) for settings, _ in found.values()}
    if len(kinds) > 1 or (found and len(found) < len(models)):
        raise UserError(
            f"the models' own pipelines differ ({', '.join(found)} have their own pooling/normalize/length/dtype): a "
            "run folder holds one setting; give --protocol paper, or --pooling, --max-length, --normalize and --dtype"
        )
    if not found:
        return OwnSettings({}, "paper")
    settings, source = next(iter(found.values()))
    return OwnSettings(settings, "model: " + source)


def registry_dtype(
    model: Any, instructions: str | None, pipeline: Pipeline | None
) -> tuple[dict[str, str], str] | None:
    """({"dtype": ...}, its source) where the mteb registry entry whose instructions ``model`` gets loads it in a
    dtype of its own (e5-mistral-7b-instruct: float16), as mteb's wrapper does; else None. A packaged model is no
    instruction embedder (``tests/evaluation/test_instructions.py`` checks it), so its runs never import mteb here;
    a model passed loaded keeps the dtype it was loaded in."""
    if not isinstance(model, str) or (instructions or "").strip().lower() == NO_INSTRUCTIONS:
        return None
    if instructions is None and model_kind(model) == "packaged":
        return None
    entry = choose_instructions(instructions, recorded_name(model)[0])
    if entry is None or entry.dtype is None:
        return None
    dtype = entry.dtype
    if dtype == AUTO_DTYPE:  # the checkpoint's own, as transformers reads it from config.json
        dtype = checkpoint_dtype(Path(pipeline.folder) if pipeline is not None else Path(model).expanduser())
    return {"dtype": dtype}, f"dtype {dtype} of mteb's registry entry {entry.model}"


def loaded_pipeline(model: Any) -> Pipeline | None:
    """The pipeline of an already loaded model's folder (a sentence-transformers folder it was loaded from)."""
    folder = Path(str(getattr(getattr(model, "model", None), "name_or_path", "") or ""))
    return read_pipeline(folder) if str(folder) not in ("", ".") and folder.is_dir() else None


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (0 <= I < N) -> (I, N)."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 0 <= int(index) < int(count)):
        raise UserError(f"--shard {text!r} must be I/N with 0 <= I < N, e.g. 0/4")
    return int(index), int(count)


def _tasks(
    tasks: str | Sequence[Any], folder: Path | None, prompts: str | None
) -> tuple[str, tuple[Any, ...], dict[str, str]]:
    """(split, specs, {task name: benchmark name}) of a selection or task names, custom task files and a
    ``--prompts`` file checked; mteb objects as the sweep runs them: a task as it is, a benchmark as its tasks (with
    its splits and subsets), each named by the benchmark object it came from. Names mixed in with objects are an
    error: they resolve another way (a task file's split)."""
    if prompts is not None and prompts.strip().lower() != NO_PROMPTS:
        read_prompts_file(prompts)  # a mistake in the file is one line, before any model loads
    if isinstance(tasks, str) or all(isinstance(t, str) for t in _given(tasks)):
        task_file, specs = select_tasks(tasks if isinstance(tasks, str) else ",".join(tasks), folder)
        check_custom_files(spec.custom for spec in specs if spec.custom is not None)  # every file read, none written
        return task_file.split, tuple(specs), {}
    objects: list[Any] = []
    benchmarks: dict[str, str] = {}
    for item in _given(tasks):
        if isinstance(item, str):
            raise UserError(f"tasks mixes the name {item!r} with mteb objects: give names or objects, not both")
        if _is_benchmark(item):
            objects += item.tasks
            benchmarks |= {task.metadata.name: item.name for task in item.tasks}
        else:
            objects.append(item)
    return "test", tuple(objects), benchmarks


def _given(tasks: Any) -> list[Any]:
    """``tasks`` as a list: one object (a task, a benchmark) or a sequence of them."""
    return [tasks] if _is_benchmark(tasks) or hasattr(tasks, "metadata") else list(tasks)


def _is_benchmark(item: Any) -> bool:
    from mteb import Benchmark

    return isinstance(item, Benchmark)


# ---------------------------------------------------------------------------------------------------- the output folder
# A run folder holds the models of one ``run`` command at one setting, so every reader can take ``scores.csv`` as it
# is. ``run`` refuses, before any model loads (:func:`check_output`), a request that mixes in another model or
# setting; it may rerun or extend its own folder. What only loading tells (a hub commit, a decoder's default
# attention) is checked once loaded, before anything is written (:meth:`FolderRuns.check_loaded`).

#: the settings a request states before its model loads (the attention only when asked: None is the model's own)
STATED = tuple(c for c in SETTINGS_COLUMNS if c != "attention")


@dataclass(frozen=True)
class FolderRuns:
    """The (model, revision) runs a folder holds with their one setting; ``extends``: the request names all of them,
    so it may add runs."""

    output: Path
    runs: frozenset[tuple[str, str]]
    setting: dict[str, str]
    extends: bool

    def check_loaded(self, name: str, revision: str, asked: str | None, settings: dict[str, object]) -> None:
        """Refuse an unnamed revision of a model the folder holds (``asked``: the revision requested), or another
        attention than the folder's, before anything is written."""
        names = {model for model, _ in self.runs}
        if (name, revision) not in self.runs and name in names and (asked is None or not self.extends):
            held = ", ".join(sorted(r for m, r in self.runs if m == name))
            raise UserError(
                f"{self.output} holds {name} at revision {held}; this run loaded revision {revision}: "
                "give another --output, or --revision to name the one it holds"
            )
        attention, held_attention = str(settings.get("attention")), self.setting.get("attention")
        if held_attention is not None and attention != held_attention:
            raise UserError(
                f"{self.output} holds scores with attention={held_attention}; this run's model runs "
                f"attention={attention}: give another --output (a run folder holds one setting), or --attention "
                f"{held_attention}"
            )


def check_output(
    output: Path | None, models: Sequence[object], revisions: Sequence[str | None], config: EncodeConfig
) -> FolderRuns | None:
    """The runs ``output`` holds (None: new or empty), checked against ``models`` × ``revisions`` at ``config``: mixing
    in another model or setting is one :class:`UserError` naming the fix."""
    if output is None or not output.is_dir():
        return None
    held = RunFolder(output).held_setting()
    if held is None:
        return None
    runs, setting = held
    _check_setting(output, setting, config, runs)
    requested = [_identity(model, revision) for model in models for revision in revisions]
    new = sorted({r[0] for r in requested if not any(_matches(r, run) for run in runs)})  # none: within the folder
    extends = all(any(_matches(r, run) for r in requested) for run in runs)
    if new and not extends:
        raise UserError(
            f"{output} holds the scores of {_listed(runs)}; this run would add {', '.join(new)}: give it another "
            "--output (a run folder holds the models of one `run` command; name them all in one command to "
            "score several side by side)"
        )
    return FolderRuns(output, runs, setting, extends)


def check_prompts(
    output: Path, log: Sequence[dict], name: str, prompts: dict | None, instructions: dict | None = None
) -> None:
    """Refuse a run of ``name`` whose prompts or instructions (``run.json``'s records; instructions by digest) differ
    from those the folder holds for it: they are no column of ``scores.csv``, so the rows would mix."""
    entries = [entry for entry in log if entry.get("model") == name]
    if not entries:
        return
    for kind, asked, held in (
        ("instructions", _digest(instructions), [_digest(entry.get("instructions")) for entry in entries]),
        ("prompts", prompts, [entry.get("prompts") for entry in entries]),
    ):
        if asked not in held:
            said = f"other {kind}" if held[0] is not None else f"no {kind}"
            raise UserError(
                f"{output} holds scores of {name} made with {said}; this run's {kind} differ: give it another "
                f"--output (a run folder holds one setting), or the folder's --{kind}"
            )


def _digest(instructions: dict | None) -> str | None:
    return None if instructions is None else str(instructions.get("digest"))


def _check_setting(output: Path, setting: dict[str, str], config: EncodeConfig, runs) -> None:
    asked = {name: str(value) for name, value in config.key().items() if name in STATED}
    if config.attention is not None and "attention" in setting:
        asked["attention"] = config.attention
    differ = [name for name, value in asked.items() if setting.get(name) != value]
    if differ:
        held = ", ".join(f"{name}={setting[name]}" for name in differ)
        wanted = ", ".join(f"{name}={asked[name]}" for name in differ)
        paper = all(setting.get(name) == str(value) for name, value in PAPER_SETTINGS.items())
        hint = ", or --protocol paper (the folder's settings are the paper's)" if paper else ""
        raise UserError(
            f"{output} holds scores of {_listed(runs)} with {held}; this run asks {wanted}: give it another --output "
            f"(a run folder holds one setting){hint}"
        )


def _identity(model: object, revision: str | None) -> tuple[str, str | None]:
    """(model, revision) a requested model will be recorded as; the revision None where only loading tells."""
    if isinstance(model, str):
        return recorded_name(model, revision)
    return str(model.name), str(model.revision)


def _matches(requested: tuple[str, str | None], run: tuple[str, str]) -> bool:
    return requested[0] == run[0] and requested[1] in (None, run[1])


def _listed(runs) -> str:
    return ", ".join(sorted({model for model, _ in runs}))
