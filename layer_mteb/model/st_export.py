"""One scored layer of a model written as a sentence-transformers folder that loads without this project.

Layer K as the sweep scores it is a model cut after block K: the deeper blocks' weights are dropped and the config
says K layers. A truncated decoder's ``last_hidden_state`` has passed the final norm, which is exactly the
``final_norm`` readout of layer K; pooling and normalisation become sentence-transformers' own ``Pooling`` and
``Normalize`` modules. What that format cannot express is refused in one line before anything is written: the
``raw`` readout of a layer below the last of a model with a final norm (RMSNorm divides each token by its own scale,
which no weight or config value undoes exactly without also changing every block's norms), and a decoder switched
to bidirectional attention (a config flag older transformers would silently ignore). The folder is built beside the
output under a temporary name and renamed into place at the end, so a failure leaves no half-written folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

from torch import nn

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import building, check_new_folder, no_empty_folders_on_error, topmost_missing
from layer_mteb.common.pooling import sentence_transformers_config
from layer_mteb.common.prompts import Prompts
from layer_mteb.model.architectures import LoadedModel
from layer_mteb.model.attention import attention_of

#: what the sweep feeds a model (``forward.encode_token_ids``: padded token ids and their attention mask)
MODEL_INPUTS = ("input_ids", "attention_mask")


@dataclass(frozen=True)
class RunRecord:
    """What the model card says about the run a layer was chosen from: its folder, the selector that chose the
    layer (None when the layer was given), one line on how the selector's pick compares, and the layer's scores."""

    folder: str
    selector: str | None = None
    summary: str | None = None
    scores: Sequence[tuple[str, float]] = field(default_factory=tuple)


def check_exportable(model: LoadedModel, layer: int, config: EncodeConfig) -> None:
    """Refuse, in one line, a layer or settings the sentence-transformers folder could not reproduce exactly."""
    if not 0 <= layer <= model.n_layers:
        raise UserError(f"--layer {layer} is out of range: {model.name} has layers 0 (embeddings) to {model.n_layers}")
    if config.readout == "raw" and model.final_norm is not None and layer < model.n_layers:
        raise UserError(
            f"--readout raw cannot be exported for layer {layer} of {model.name}: a truncated model ends in its final "
            "norm and no saved setting switches that norm off alone; export --readout final_norm (the paper's) or the "
            f"last layer ({model.n_layers})"
        )
    if model.architecture.kind == "causal" and attention_of(model) == "bidirectional":
        raise UserError(
            f"{model.name} runs its decoder with bidirectional attention, which a sentence-transformers folder cannot "
            "say portably (transformers would load it causal); export a causal decoder or an encoder"
        )


def export_layer(
    model: LoadedModel,
    layer: int,
    config: EncodeConfig,
    output: str | Path,
    *,
    overwrite: bool = False,
    run: RunRecord | None = None,
    prompts: Prompts | None = None,
) -> Path:
    """Write layer ``layer`` of ``model`` read out and pooled as ``config`` says to ``output``, a folder that
    ``SentenceTransformer(output)`` loads; its ``encode`` gives the vectors ``LayerEncoder`` scores.

    The model's weights are saved in the dtype it was loaded in (float32 unless the settings say otherwise; GGUF
    sources were dequantised to float32). ``model`` is cut only while it is saved and is whole again afterwards.
    ``prompts`` (the ones the layer was scored with) go into ``config_sentence_transformers.json``, so mteb and
    sentence-transformers apply them as the sweep did.
    """
    output = Path(output)
    check_new_folder(output, overwrite)
    check_exportable(model, layer, config)
    with no_empty_folders_on_error(topmost_missing(output)), building(output) as folder:
        with truncated(model, layer) as cut:
            cut.save_pretrained(folder)
        _save_tokenizer(model.tokenizer, folder)
        _write_module_list(folder, model.hidden_size, config, prompts)
        (folder / "README.md").write_text(model_card(model, layer, config, run))
        plain_modes(folder)
    return output


def plain_modes(folder: Path) -> None:
    """Every file and folder under ``folder`` with the modes of plain new ones (0644 and 0755 under a usual umask):
    libraries that write through temporary files leave 0600 behind, which colleagues on a shared disk cannot read."""
    mask = os.umask(0o022)
    os.umask(mask)
    for path in [folder, *folder.rglob("*")]:
        path.chmod((0o777 if path.is_dir() else 0o666) & ~mask)


@contextmanager
def truncated(model: LoadedModel, layer: int) -> Iterator[nn.Module]:
    """The base model with only its first ``layer`` blocks and a config that says so (Gemma-3's ``layer_types``
    too, or the saved config fails validation on reload); the blocks and config are restored on exit."""
    parent_path, _, name = model.architecture.blocks.rpartition(".")
    parent = attrgetter(parent_path)(model.model) if parent_path else model.model
    blocks = getattr(parent, name)
    config = model.model.config
    saved = {"num_hidden_layers": config.num_hidden_layers}
    layer_types = vars(config).get("layer_types")  # stored per block (Gemma-3), not derived (Mamba's property)
    if isinstance(layer_types, list):
        saved["layer_types"] = layer_types
    try:
        setattr(parent, name, nn.ModuleList(list(blocks)[:layer]))
        config.num_hidden_layers = layer
        if "layer_types" in saved:
            config.layer_types = layer_types[:layer]
        yield model.model
    finally:
        setattr(parent, name, blocks)
        for key, value in saved.items():
            setattr(config, key, value)


def _save_tokenizer(tokenizer, folder: Path) -> None:
    """The tokenizer (right padding, as scored), feeding the model only token ids and the attention mask, as the
    sweep does: a BERT tokenizer's token type ids would otherwise reach a model that embeds them (GPT-2 adds
    ``wte(token_type_ids)``). ``tokenizer_config.json`` holds the tokenizer's constructor arguments, so the list set
    there is what every later load uses. The chat template is left out: the sweep encodes plain texts, and a
    sentence-transformers version that finds a template may wrap each text in it (SmolLM2-Instruct's adds a system
    prompt)."""
    tokenizer.save_pretrained(folder)
    path = folder / "tokenizer_config.json"
    settings = json.loads(path.read_text())
    settings["model_input_names"] = list(MODEL_INPUTS)
    settings["padding_side"] = "right"
    settings.pop("chat_template", None)
    path.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n")
    for name in ("chat_template.jinja", "chat_template.json"):
        (folder / name).unlink(missing_ok=True)


#: The module list every sentence-transformers version reads (3.x to 6.x): the classic ``sentence_transformers.models``
#: names and their classic settings files. Version 6's own ``save`` names its new module paths, which 5.x and earlier
#: cannot import, so the list is written here instead of by the library.
ST_MODULES = {
    "transformer": "sentence_transformers.models.Transformer",
    "pooling": "sentence_transformers.models.Pooling",
    "normalize": "sentence_transformers.models.Normalize",
}


def _write_module_list(folder: Path, hidden_size: int, config: EncodeConfig, prompts: Prompts | None = None) -> None:
    """Transformer -> Pooling (-> Normalize) as ``modules.json`` and each module's settings file, in the format of
    sentence-transformers 3.0, which every later version still loads."""
    modules = [("transformer", ""), ("pooling", "1_Pooling")] + ([("normalize", "2_Normalize")] * config.normalize)
    listed = [
        {"idx": i, "name": str(i), "path": path, "type": ST_MODULES[kind]} for i, (kind, path) in enumerate(modules)
    ]
    _write_json(folder / "modules.json", listed)
    _write_json(folder / "sentence_bert_config.json", {"max_seq_length": config.max_length, "do_lower_case": False})
    _write_json(folder / "1_Pooling" / "config.json", sentence_transformers_config(config.pooling, hidden_size))
    if config.normalize:
        (folder / "2_Normalize").mkdir()
    settings = {
        "prompts": prompts.mapping if prompts is not None else {},
        "default_prompt_name": prompts.default_name if prompts is not None else None,
        "similarity_fn_name": "cosine",
    }
    _write_json(folder / "config_sentence_transformers.json", settings)


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")


def model_card(model: LoadedModel, layer: int, config: EncodeConfig, run: RunRecord | None = None) -> str:
    """README.md of the folder: where the layer comes from, how it is read out, and the run that chose it."""
    readout = config.readout if model.final_norm is not None else "none (the model has no final norm)"
    lines = [
        "---",
        "library_name: sentence-transformers",
        "pipeline_tag: sentence-similarity",
        "tags: [sentence-transformers, feature-extraction, layer-mteb]",
        "---",
        "",
        f"# {model.name}, layer {layer} of {model.n_layers}",
        "",
        f"The first {layer} blocks of `{model.name}` as a sentence-transformers model"
        + (" (the embeddings only)." if layer == 0 else "; the deeper blocks' weights are not in this folder."),
        "",
        "| | |",
        "|---|---|",
        f"| source model | `{model.name}` |",
        f"| revision | `{model.revision}` |",
        f"| layer | {layer} of {model.n_layers} (relative depth {layer / model.n_layers:.3f}) |",
        f"| readout | {readout} |",
        f"| pooling | {config.pooling} |",
        f"| normalize | {config.normalize} |",
        f"| max_seq_length | {config.max_length} |",
        f"| dtype | {config.dtype} |",
        "",
        *_run_section(run),
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        'model = SentenceTransformer("path/to/this/folder")',
        'embeddings = model.encode(["A sentence.", "Another one."])',
        "```",
        "",
    ]
    return "\n".join(lines)


def _run_section(run: RunRecord | None) -> list[str]:
    if run is None:
        return []
    chosen = f"chosen by the selector `{run.selector}`" if run.selector else "given by hand"
    lines = [f"## Scores in run `{run.folder}`", "", f"The layer was {chosen}.", ""]
    if run.summary:
        lines += [run.summary, ""]
    if run.scores:
        lines += ["| task | main score |", "|---|---|"]
        lines += [f"| {task} | {score:.4f} |" for task, score in run.scores]
    else:
        lines.append("The run has no scores for this layer.")
    return [*lines, ""]
