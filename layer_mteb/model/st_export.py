"""One scored layer of a model written as a sentence-transformers folder that loads without this project.

Layer K is the model cut after block K (a truncated decoder's output has passed the final norm: the ``final_norm``
readout), then ``Pooling`` and ``Normalize``. What the format cannot say exactly is refused in one line before
anything is written, and the folder is renamed into place only when complete.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import building, check_new_folder, no_empty_folders_on_error, plain_modes, topmost_missing
from layer_mteb.common.pooling import sentence_transformers_config
from layer_mteb.common.prompts import Prompts
from layer_mteb.model.architectures import LoadedModel, swapped
from layer_mteb.model.attention import attention_of

#: what the sweep feeds a model (``forward.encode_token_ids``: padded token ids and their attention mask)
MODEL_INPUTS = ("input_ids", "attention_mask")


@dataclass(frozen=True)
class RunRecord:
    """The run a layer was chosen from, for the model card: folder, selector (None: given), a summary, scores."""

    folder: str
    selector: str | None = None
    summary: str | None = None
    scores: Sequence[tuple[str, float]] = field(default_factory=tuple)


def check_exportable(model: LoadedModel, layer: int, config: EncodeConfig) -> None:
    """Refuse, in one line, a layer or settings the sentence-transformers folder could not reproduce exactly: raw
    readout below the last layer (a truncated model ends in its norm) or a bidirectional decoder."""
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
    """Write ``layer`` of ``model`` as ``config`` reads it out to ``output``, a folder whose
    ``SentenceTransformer(output).encode`` gives the vectors ``LayerEncoder`` scores, with the ``prompts`` scored
    with; weights keep their loaded dtype, and ``model`` is whole again afterwards."""
    output = Path(output)
    check_new_folder(output, overwrite)
    check_exportable(model, layer, config)
    with no_empty_folders_on_error(topmost_missing(output)), building(output) as folder:
        with swapped(model.model, truncation(model, layer)):
            model.model.save_pretrained(folder)
        _save_tokenizer(model.tokenizer, folder)
        _write_module_list(folder, model.hidden_size, config, prompts)
        (folder / "README.md").write_text(model_card(model, layer, config, run))
        plain_modes(folder)
    return output


def truncation(model: LoadedModel, layer: int) -> dict[str, Any]:
    """What :func:`~layer_mteb.model.architectures.swapped` sets to make the base model its first ``layer`` blocks,
    with a config that says so (Gemma-3's ``layer_types`` too, or reloading fails)."""
    stand_ins: dict[str, Any] = {
        model.architecture.blocks: nn.ModuleList(list(model.blocks)[:layer]),
        "config.num_hidden_layers": layer,
    }
    # stored per block (Gemma-3), not derived (Mamba's property)
    layer_types = vars(model.model.config).get("layer_types")
    if isinstance(layer_types, list):
        stand_ins["config.layer_types"] = layer_types[:layer]
    return stand_ins


def _save_tokenizer(tokenizer, folder: Path) -> None:
    """The tokenizer as the sweep uses it: right padding, only ids and mask (GPT-2 would embed a BERT tokenizer's
    token type ids), and no chat template (sentence-transformers may wrap each text in it)."""
    tokenizer.save_pretrained(folder)
    path = folder / "tokenizer_config.json"
    settings = json.loads(path.read_text())
    settings.update(model_input_names=list(MODEL_INPUTS), padding_side="right")
    settings.pop("chat_template", None)
    path.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n")
    for name in ("chat_template.jinja", "chat_template.json"):
        (folder / name).unlink(missing_ok=True)


#: The modules (class in ``sentence_transformers.models``, folder), named as every sentence-transformers version (3.x
#: to 6.x) imports them; 6's own ``save`` writes paths 5.x cannot.
ST_MODULES = (("Transformer", ""), ("Pooling", "1_Pooling"), ("Normalize", "2_Normalize"))


def _write_module_list(folder: Path, hidden_size: int, config: EncodeConfig, prompts: Prompts | None = None) -> None:
    """Transformer -> Pooling (-> Normalize) in sentence-transformers 3.0's format, which every later version loads."""
    modules = ST_MODULES if config.normalize else ST_MODULES[:2]
    listed = [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (kind, path) in enumerate(modules)
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


def exported_readout(model: LoadedModel, config: EncodeConfig) -> str:
    """The readout as the folder has it, said once for the model card and the command's line: a model without a
    final norm has none to apply or skip, whatever ``--readout`` says."""
    return config.readout if model.final_norm is not None else "none (the model has no final norm)"


def model_card(model: LoadedModel, layer: int, config: EncodeConfig, run: RunRecord | None = None) -> str:
    """README.md of the folder: where the layer comes from, how it is read out, and the run that chose it."""
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
        f"| readout | {exported_readout(model, config)} |",
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
        lines += ["| task | main score |", "|---|---|", *(f"| {task} | {score:.4f} |" for task, score in run.scores)]
    else:
        lines.append("The run has no scores for this layer.")
    return [*lines, ""]
