"""Instruction embedders as mteb scores them: models whose registry entry loads with mteb's
``InstructSentenceTransformerModel`` (Qwen3-Embedding, e5-mistral-7b-instruct, ...), the instruction put before the
text as sentence-transformers puts a ``prompt``.

mteb's own methods pick every instruction, on a wrapper holding the loader's arguments and no model, so each layer
reads exactly the text ``mteb.evaluate`` gives the model. A loader function that keeps the arguments inside
(Qwen3-Embedding's) is called with the wrapper stood in by a recorder that stops before any weights load.
"""

from __future__ import annotations

import inspect
import logging
import warnings
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from layer_mteb.common.errors import UserError
from layer_mteb.common.files import text_hash

logger = logging.getLogger(__name__)

NONE = "none"
#: the loader arguments that change the texts or the length; the others (dtype, device, trust_remote_code) do not
_TEXT_ARGUMENTS = ("instruction_template", "apply_instruction_to_passages", "prompts_dict", "prompt_priority")
#: loader arguments that change what the tokenizer or the pooling does, which the layers do not reproduce
_UNSUPPORTED = ("add_eos_token", "tokenizer_kwargs", "include_prompt", "embed_dim", "config_kwargs")


@dataclass(frozen=True)
class Instructions:
    """The instruction handling of mteb's registry entry ``model`` (its loader's ``arguments``); ``default_prompt``
    goes before a text that gets no instruction (usually none)."""

    model: str
    arguments: dict[str, Any] = field(hash=False)
    default_prompt: str = ""

    @cached_property
    def _wrapper(self) -> Any:
        """mteb's instruction wrapper with the loader's arguments and no model: its methods pick the instruction."""
        from mteb.models.abs_encoder import PromptSource
        from mteb.models.instruct_wrapper import InstructSentenceTransformerModel

        wrapper = object.__new__(InstructSentenceTransformerModel)  # its __init__ would load the model
        wrapper.instruction_template = self.arguments.get("instruction_template")
        wrapper.prompts_dict = self.arguments.get("prompts_dict")
        if self.arguments.get("prompt_priority") is not None:
            wrapper.prompt_priority = [PromptSource.from_str(s) for s in self.arguments["prompt_priority"]]
        return wrapper

    @property
    def to_passages(self) -> bool:
        """Whether documents get the instruction too."""
        return bool(self.arguments.get("apply_instruction_to_passages", True))

    @property
    def max_length(self) -> int | None:
        """The length the loader sets (``max_seq_length``), or None (the folder's own)."""
        length = self.arguments.get("max_seq_length")
        return int(length) if length else None

    def text_for(self, task_metadata: Any, prompt_type: Any) -> str:
        """What goes before each text of ``task_metadata`` encoded as ``prompt_type``, as mteb's wrapper computes it."""
        from mteb.types import PromptType

        with warnings.catch_warnings():  # mteb warns where a task has no prompt of this type; it then uses none
            warnings.simplefilter("ignore")
            instruction: str | None = self._wrapper.get_task_instruction(task_metadata, prompt_type)
        if not self.to_passages and prompt_type == PromptType.document:
            instruction = None
        return self.default_prompt if instruction is None else instruction

    def template(self) -> str:
        """The template as a record says it: the string, or the template function's qualified name."""
        template = self.arguments.get("instruction_template")
        if template is None or isinstance(template, str):
            return str(template)
        return f"{getattr(template, '__module__', '')}.{getattr(template, '__qualname__', repr(template))}"

    def digest(self) -> str:
        """Short hash of what changes the texts (a template function by its source), for store keys and experiments."""
        template = self.arguments.get("instruction_template")
        source = template if template is None or isinstance(template, str) else _source(template)
        prompts = sorted((self.arguments.get("prompts_dict") or {}).items())
        priority = [str(s) for s in self.arguments.get("prompt_priority") or ()]
        return text_hash(self.model, source, self.to_passages, prompts, priority, self.default_prompt)

    def record(self, task_metadata: Any = None) -> dict[str, object]:
        """The instructions as ``run.json`` states them; with ``task_metadata``, the text each prompt type gets."""
        texts = {}
        if task_metadata is not None:
            from mteb.types import PromptType

            texts = {
                "texts": {str(t.value if t else "none"): self.text_for(task_metadata, t) for t in (*PromptType, None)}
            }
        return {
            "model": self.model,
            "instruction_template": self.template(),
            "apply_instruction_to_passages": self.to_passages,
            "prompts_dict": dict(self.arguments.get("prompts_dict") or {}),
            "default_prompt": self.default_prompt,
            "digest": self.digest(),
            **texts,
        }


def _source(function: Any) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return repr(function)


class _Recorded(Exception):
    """Raised by the stand-in wrapper: carries the arguments the loader passed it."""

    def __init__(self, arguments: dict[str, Any]):
        super().__init__("recorded")
        self.arguments = arguments


def _record(*args: Any, **kwargs: Any) -> Any:
    raise _Recorded(kwargs)


def loader_arguments(meta: Any) -> dict[str, Any] | None:
    """The arguments mteb's registry entry ``meta`` gives ``InstructSentenceTransformerModel``, or None (another
    loader)."""
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel

    loader = meta.loader
    kwargs = dict(meta.loader_kwargs or {})
    if loader is InstructSentenceTransformerModel:
        return kwargs
    code = getattr(loader, "__code__", None)
    if code is None or "InstructSentenceTransformerModel" not in code.co_names:
        return None
    scope = loader.__globals__
    if scope.get("InstructSentenceTransformerModel") is not InstructSentenceTransformerModel:
        return None
    scope["InstructSentenceTransformerModel"] = _record
    try:
        loader(meta.name, revision=meta.revision, **kwargs)
    except _Recorded as recorded:
        return recorded.arguments
    except Exception:  # a loader that does more before calling the wrapper: not one read here
        return None
    finally:
        scope["InstructSentenceTransformerModel"] = InstructSentenceTransformerModel
    return None


def _changes_inputs(argument: str, value: Any) -> bool:
    return value is False if argument == "include_prompt" else bool(value)


@lru_cache(maxsize=1)
def _registry_names() -> tuple[str, ...]:
    """Every model name in mteb's registry (read once: a run asks per task)."""
    import mteb

    return tuple(meta.name for meta in mteb.get_model_metas())


def registry_name(model_name: str) -> str | None:
    """The mteb registry name of ``model_name``: itself, or for ``local/<folder>`` the one registry name ending in the
    folder's name (``Qwen3-Embedding-0.6B`` -> ``Qwen/Qwen3-Embedding-0.6B``); else None."""
    names = _registry_names()
    if model_name in names:
        return model_name
    if not model_name.startswith("local/"):
        return None
    tail = model_name.removeprefix("local/")
    matches = [name for name in names if name.rpartition("/")[2] == tail]
    return matches[0] if len(matches) == 1 else None


def choose_instructions(asked: str | None, model_name: str, default_prompt: str = "") -> Instructions | None:
    """The instructions a run applies: ``asked`` None for ``model_name``'s registry entry if it uses mteb's
    instruction wrapper, ``none`` for none, else the registry entry ``asked`` names (which must use it)."""
    import mteb

    if asked is not None and asked.strip().lower() == NONE:
        return None
    name = registry_name(model_name) if asked is None else asked
    if name is None:
        return None
    try:
        meta = mteb.get_model_meta(name)
    except (KeyError, ValueError):
        if asked is None:
            return None
        raise UserError(f"--instructions {asked!r} is no model in mteb's registry (`mteb.get_model_meta`)") from None
    arguments = loader_arguments(meta)
    if arguments is None:
        if asked is not None:
            loader = getattr(meta.loader, "__name__", repr(meta.loader))
            raise UserError(
                f"--instructions {asked!r}: mteb loads that model with {loader}, not with its instruction wrapper "
                "(InstructSentenceTransformerModel); give --instructions none, or --prompts FILE"
            )
        return None
    unsupported = [a for a in _UNSUPPORTED if a in arguments and _changes_inputs(a, arguments[a])]
    if unsupported:
        logger.warning(
            "%s: mteb's loader also sets %s, which this run does not apply: its inputs may differ from mteb's by that",
            name,
            ", ".join(unsupported),
        )
    kept = {k: v for k, v in arguments.items() if k in (*_TEXT_ARGUMENTS, "max_seq_length")}
    return Instructions(meta.name, kept, default_prompt)
