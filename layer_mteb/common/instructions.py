"""Instruction embedders as mteb scores them: models whose registry entry loads with mteb's
``InstructSentenceTransformerModel`` (Qwen3-Embedding, e5-mistral-7b-instruct, ...), the instruction put before the
text as sentence-transformers puts a ``prompt``.

mteb's own methods pick every instruction, on a wrapper holding the loader's arguments and no model, so each layer
reads exactly the text ``mteb.evaluate`` gives the model. A loader function that keeps the arguments inside
(Qwen3-Embedding's) is called with the wrapper stood in by a recorder that stops before any weights load.

The loader also says how the model reads those texts: the arguments it hands the tokenizer (e5-mistral's and
gte-Qwen2's ``add_eos_token``, so last-token pooling reads the appended end-of-sequence token; ``tokenizer_kwargs``;
``padding_side``) and the dtype it loads the weights in (``model_kwargs``). Every layer's input is made with both, as
mteb's wrapper makes the last layer's; what the layers cannot reproduce (prompt tokens left out of the pooling, a
truncated embedding, other model or config arguments) is refused in one line.
"""

from __future__ import annotations

import inspect
import logging
import warnings
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from layer_mteb.common.config import DTYPES
from layer_mteb.common.errors import UserError, first_line
from layer_mteb.common.files import text_hash

logger = logging.getLogger(__name__)

NONE = "none"
#: the loader arguments that change the texts or the length
_TEXT_ARGUMENTS = ("instruction_template", "apply_instruction_to_passages", "prompts_dict", "prompt_priority")
#: the loader arguments that change how the tokenizer reads the texts (mteb's wrapper hands them to the tokenizer)
_TOKENIZER_ARGUMENTS = ("add_eos_token", "tokenizer_kwargs", "padding_side")
#: the loader arguments that change neither the texts nor the vectors, or that the run has its own option for
_NEUTRAL_ARGUMENTS = ("max_seq_length", "device", "revision", "trust_remote_code", "model_kwargs", "config_kwargs")
#: ``model_kwargs`` entries: the dtype (applied, any value), and what does not change a vector (remote code is the
#: run's option; sdpa is transformers' own default attention)
_DTYPE_KEYS = ("dtype", "torch_dtype")
_NEUTRAL_MODEL_ARGUMENTS = {"trust_remote_code": None, "attn_implementation": "sdpa", **dict.fromkeys(_DTYPE_KEYS)}
#: ``config_kwargs`` entries that do not change a vector (no KV cache: the forward pass never keeps one)
_NEUTRAL_CONFIG_ARGUMENTS = {"use_cache": False}
#: the dtype a loader names for the checkpoint's own
AUTO_DTYPE = "auto"


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

    @property
    def tokenizer_arguments(self) -> dict[str, Any]:
        """What mteb's wrapper (``InstructSentenceTransformerModel``) hands the tokenizer
        (``AutoTokenizer.from_pretrained``) besides the length: ``tokenizer_kwargs`` with ``add_eos_token`` and
        ``padding_side`` laid over them where set, as the wrapper does. The length is left out: the run's
        ``max_length`` truncates as the wrapper's ``model_max_length`` does."""
        given = dict(self.arguments.get("tokenizer_kwargs") or {})
        if self.arguments.get("add_eos_token"):
            given["add_eos_token"] = True
        if self.arguments.get("padding_side") is not None:
            given["padding_side"] = self.arguments["padding_side"]
        given.pop("model_max_length", None)
        return given

    @property
    def dtype(self) -> str | None:
        """The dtype the loader loads the weights in (``float16``, ``bfloat16``, ``float32``, ``auto``: the
        checkpoint's), or None (it sets none: sentence-transformers' float32)."""
        return loader_dtype(self.arguments)

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
        # the tokenizer's arguments change the token ids: hashed where there are any (older digests stay as they were)
        tokenizer = sorted((k, repr(v)) for k, v in self.tokenizer_arguments.items())
        return text_hash(self.model, source, self.to_passages, prompts, priority, self.default_prompt, *tokenizer)

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
            "tokenizer_arguments": self.tokenizer_arguments,
            "dtype": self.dtype,
            "digest": self.digest(),
            **texts,
        }


def _source(function: Any) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return repr(function)


class _Recorded(Exception):
    """Raised by the stand-in wrapper: its one argument is the keyword arguments the loader passed it."""


def _record(*args: Any, **kwargs: Any) -> Any:
    raise _Recorded(kwargs)


def loader_arguments(meta: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(The arguments mteb's registry entry ``meta`` gives ``InstructSentenceTransformerModel``, or None for another
    loader; why they could not be read, or None): a loader function that fails before it calls the wrapper (it loads
    a tokenizer or asks the hub first) is said, never taken for a model without instructions."""
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel

    loader = meta.loader
    kwargs = dict(meta.loader_kwargs or {})
    if loader is InstructSentenceTransformerModel:
        return kwargs, None
    code = getattr(loader, "__code__", None)
    if code is None or "InstructSentenceTransformerModel" not in code.co_names:
        return None, None
    scope = loader.__globals__
    if scope.get("InstructSentenceTransformerModel") is not InstructSentenceTransformerModel:
        return None, None
    scope["InstructSentenceTransformerModel"] = _record
    try:
        loader(meta.name, revision=meta.revision, **kwargs)
    except _Recorded as recorded:
        return recorded.args[0], None
    except Exception as error:  # anything the loader does before calling the wrapper
        name = getattr(loader, "__qualname__", repr(loader))
        return None, f"mteb's loader {name} failed before it reached its instruction wrapper ({first_line(error)})"
    finally:
        scope["InstructSentenceTransformerModel"] = InstructSentenceTransformerModel
    return None, f"mteb's loader {getattr(loader, '__qualname__', repr(loader))} never called its instruction wrapper"


def loader_dtype(arguments: dict[str, Any]) -> str | None:
    """The dtype in the loader's ``model_kwargs`` (``dtype`` or the older ``torch_dtype``) as a name, or None."""
    model_arguments = arguments.get("model_kwargs") or {}
    value = next((model_arguments[k] for k in _DTYPE_KEYS if model_arguments.get(k) is not None), None)
    if value is None:
        return None
    return str(getattr(value, "value", value)).removeprefix("torch.")


def _not_reproduced(arguments: dict[str, Any]) -> list[str]:
    """The loader's arguments that change the vectors in a way the layers cannot reproduce, as ``name=value``."""
    found = []
    if arguments.get("include_prompt") is False:
        found.append("include_prompt=False")
    if arguments.get("embed_dim"):
        found.append(f"embed_dim={arguments['embed_dim']}")
    for group, neutral in (("model_kwargs", _NEUTRAL_MODEL_ARGUMENTS), ("config_kwargs", _NEUTRAL_CONFIG_ARGUMENTS)):
        for key, value in (arguments.get(group) or {}).items():
            if key not in neutral or (neutral[key] is not None and value != neutral[key]):
                found.append(f"{group}[{key!r}]={value!r}")
    dtype = loader_dtype(arguments)
    if dtype is not None and dtype not in (*DTYPES, AUTO_DTYPE):
        found.append(f"dtype={dtype}")
    known = (*_TEXT_ARGUMENTS, *_TOKENIZER_ARGUMENTS, *_NEUTRAL_ARGUMENTS, "include_prompt", "embed_dim")
    found += [f"{key}={arguments[key]!r}" for key in arguments if key not in known]
    return found


@lru_cache(maxsize=1)
def _registry_names() -> tuple[str, ...]:
    """Every model name in mteb's registry (read once: a run asks per task)."""
    import mteb

    return tuple(meta.name for meta in mteb.get_model_metas())


def registry_meta(name: str) -> Any | None:
    """mteb's registry entry (``ModelMeta``) of model ``name``, or None for a name the registry does not know."""
    import mteb

    try:
        return mteb.get_model_meta(name)
    except (KeyError, ValueError):
        return None


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
    if asked is not None and asked.strip().lower() == NONE:
        return None
    name = registry_name(model_name) if asked is None else asked
    meta = registry_meta(name) if name is not None else None
    if meta is None and asked is not None:
        raise UserError(f"--instructions {asked!r} is no model in mteb's registry (`mteb.get_model_meta`)")
    return None if meta is None else instructions_of(meta, asked, default_prompt)


def instructions_of(meta: Any, asked: str | None, default_prompt: str = "") -> Instructions | None:
    """The instructions of registry entry ``meta`` (``asked``: named by ``--instructions``, so it must have them), or
    None; a loader not read is one warning line, what the layers cannot reproduce one :class:`UserError`."""
    arguments, unread = loader_arguments(meta)
    if unread is not None:
        if asked is not None:
            raise UserError(f"--instructions {asked!r}: {unread}; give --instructions none, or --prompts FILE")
        logger.warning(
            "%s: %s, so its instructions, template, tokenizer arguments and dtype are not applied: this run's inputs "
            "may differ from mteb's (--instructions none says so without this line)",
            meta.name,
            unread,
        )
        return None
    if arguments is None:
        if asked is not None:
            loader = getattr(meta.loader, "__name__", repr(meta.loader))
            raise UserError(
                f"--instructions {asked!r}: mteb loads that model with {loader}, not with its instruction wrapper "
                "(InstructSentenceTransformerModel); give --instructions none, or --prompts FILE"
            )
        return None
    refused = _not_reproduced(arguments)
    if refused:
        raise UserError(
            f"{meta.name}: mteb's loader sets {', '.join(refused)}, which the layers cannot reproduce: give "
            "--instructions none (or --protocol paper) to score the model without its registry entry"
        )
    kept = {k: v for k, v in arguments.items() if k in (*_TEXT_ARGUMENTS, *_TOKENIZER_ARGUMENTS, "max_seq_length")}
    dtype = loader_dtype(arguments)
    if dtype is not None:
        kept["model_kwargs"] = {"dtype": dtype}
    return Instructions(meta.name, kept, default_prompt)
