"""Prompt-entropy stress tests (the paper's Figure 3) and bimodality (its Figure 4) for any model.

Token states stream through the ``metrics`` code (:class:`~layer_mteb.metrics.runner.TokenMetrics`) into
``stress.csv`` (one row per prompt and layer; ``level`` is p, or the length in tokens), ``dip.csv`` (Hartigan's dip
test per layer; test ``none``: unperturbed) and ``stress.json`` (settings, where the texts came from, wall time). A
prompt of identical tokens has entropy 0 here (``metrics`` leaves it out): the limit the repetition test moves to.

Prompts are perturbed on token ids, so lengths stay exact, and the special tokens at the ends stay put. Each prompt
draws once from a generator seeded by (seed, test, prompt): levels perturb nested sets of positions, so curves
differ by the level alone, whatever other prompts or levels ran.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd
import torch

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.files import write_json
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import PROMPT_ENTROPIES
from layer_mteb.metrics.bimodality import DIPS_TABLE, STRESS_COLUMNS, STRESS_TABLE, stress_tables
from layer_mteb.metrics.metric_settings import MetricSettings
from layer_mteb.metrics.runner import TokenMetrics, discard_vectors, loaded_model
from layer_mteb.metrics.texts import load_texts
from layer_mteb.model.architectures import LoadedModel
from layer_mteb.model.forward import encode_token_ids, tokenize

logger = logging.getLogger(__name__)

Test = Literal["randomness", "repetition", "length"]
TESTS: tuple[str, ...] = get_args(Test)
#: the authors' lowest random id: ids below it are control and byte tokens in most vocabularies
FIRST_RANDOM_ID = 20


def special_ends(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The ids the tokenizer adds before and after every text (e.g. [CLS] and [SEP]; <bos> and nothing)."""
    marker = "a"
    bare = tokenizer(marker, add_special_tokens=False)["input_ids"]
    full = tokenizer(marker)["input_ids"]
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return list(full[:start]), list(full[start + len(bare) :])
    return [], []


def content_bounds(ids: np.ndarray, prefix: Sequence[int], suffix: Sequence[int]) -> tuple[int, int]:
    """[start, stop) of the tokens between the tokenizer's own special tokens at the ends of ``ids``."""
    start = len(prefix) if list(ids[: len(prefix)]) == list(prefix) else 0
    stop = len(ids) - len(suffix) if suffix and list(ids[len(ids) - len(suffix) :]) == list(suffix) else len(ids)
    return start, max(start, stop)


def perturb(
    ids: np.ndarray,
    test: Test,
    p: float,
    *,
    prompt: int,
    seed: int,
    vocab: int,
    ends: tuple[Sequence[int], Sequence[int]],
) -> np.ndarray:
    """``ids`` with each content token replaced with probability ``p``: by a random id (``randomness``) or by one
    token of the prompt chosen at random (``repetition``). ``p = 0`` returns the ids unchanged."""
    if test not in ("randomness", "repetition"):
        raise ValueError(f"perturb takes randomness or repetition, not {test!r}")
    start, stop = content_bounds(ids, *ends)
    content = ids[start:stop]
    if p == 0 or len(content) == 0:
        return ids.copy()
    rng = np.random.default_rng([seed, TESTS.index(test), prompt])  # a test is seeded by its place in TESTS
    draws = rng.random(len(content))
    if test == "randomness":
        replacement = rng.integers(FIRST_RANDOM_ID, vocab, size=len(content))
    else:
        replacement = np.full(len(content), content[rng.integers(len(content))])
    out = ids.copy()
    out[start:stop] = np.where(draws < p, replacement, content)
    return out


def random_prompts(
    n: int, length: int, *, seed: int, vocab: int, ends: tuple[Sequence[int], Sequence[int]]
) -> list[np.ndarray]:
    """``n`` prompts of exactly ``length`` ids: the tokenizer's special ends around uniform random ids."""
    prefix, suffix = ends
    inner = length - len(prefix) - len(suffix)
    if inner < 2:
        raise UserError(f"--lengths {length} leaves fewer than 2 tokens besides the special tokens {prefix + suffix}")
    rng = np.random.default_rng([seed, TESTS.index("length"), length])
    body = rng.integers(FIRST_RANDOM_ID, vocab, size=(n, inner))
    head, tail = np.asarray(prefix, dtype=np.int64), np.asarray(suffix, dtype=np.int64)
    return [np.concatenate([head, row.astype(np.int64), tail]) for row in body]


#: the authors' grids (their notebook): p in linspace(0, 1, 10), linspace(0, 0.9, 9), lengths 64 … 2048
RANDOMNESS_LEVELS: tuple[float, ...] = tuple(float(p) for p in np.linspace(0, 1, 10))
REPETITION_LEVELS: tuple[float, ...] = tuple(float(p) for p in np.linspace(0, 0.9, 9))
LENGTHS: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048)
STRESS_RUNS_FILE = "stress.json"
#: the paper's sample sizes (``stress --paper-sizes``) and the default: about a minute of CPU for MiniLM-L6
#: (measured: 60 s user+sys on a shared 2-core machine; each WikiText prompt adds 18 forward passes, ~2.5 s)
PAPER_STRESS_SIZES = {"n_prompts": 1000, "length_prompts": 1000}
QUICK_STRESS_SIZES = {"n_prompts": 16, "length_prompts": 10}
#: padded tokens per batch when the caller sets no cap: 2048-token prompts would otherwise come 32 at a time
DEFAULT_BATCH_TOKENS = 16384
#: the readable form of each normalisation, as in the release: raw nats, ÷ log N, ÷ log D, ÷ min(log N, log D)
STRESS_NORMALIZATIONS = tuple(dict.fromkeys(PROMPT_ENTROPIES.values()))


@dataclass(frozen=True)
class StressSettings:
    """What to perturb and how much (defaults: the paper's grids and sizes)."""

    tests: tuple[str, ...] = TESTS
    n_prompts: int = 1000
    length_prompts: int = 1000
    randomness: tuple[float, ...] = RANDOMNESS_LEVELS
    repetition: tuple[float, ...] = REPETITION_LEVELS
    lengths: tuple[int, ...] = LENGTHS
    alpha: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = [t for t in self.tests if t not in TESTS]
        if unknown or not self.tests:
            raise UserError(f"--tests must name some of {', '.join(TESTS)}; got {','.join(self.tests) or 'none'}")
        for name in ("randomness", "repetition"):
            bad = [p for p in getattr(self, name) if not 0 <= p <= 1]
            if bad or not getattr(self, name):
                raise UserError(f"--{name} levels must be probabilities in [0, 1], got {bad or 'none'}")
        if not self.lengths or min(self.lengths) < 4:
            raise UserError(f"--lengths must be token counts of at least 4, got {list(self.lengths)}")
        if self.n_prompts < 4 or self.length_prompts < 4:
            raise UserError("--n-prompts and --length-prompts must be at least 4 (the dip test's smallest sample)")
        if not self.alpha > 0:
            raise UserError(f"--alpha must be positive, got {self.alpha}")


def model_context(model: LoadedModel) -> int:
    """Tokens the model can attend over: its position table, or the tokenizer's limit where that is smaller."""
    config, limit = model.model.config, getattr(model.tokenizer, "model_max_length", None)
    positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None) or None
    bounds = [int(b) for b in (positions, limit) if b is not None and b < 10**7]
    return min(bounds) if bounds else max(LENGTHS)


def run_stress(
    model: LoadedModel | str,
    texts: str = "wikitext",
    *,
    config: EncodeConfig | None = None,
    settings: StressSettings | None = None,
    data_dir: str | Path | None = None,
    output: str | Path | None = None,
    compress: bool = False,
    progress: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(``stress.csv`` frame, ``dip.csv`` frame) of ``model``; with ``output``, both are merged into that folder."""
    started = time.perf_counter()
    settings = settings or StressSettings()
    model, config = loaded_model(model, config)
    if config.max_batch_tokens is None:
        config = EncodeConfig(**{**asdict(config), "max_batch_tokens": DEFAULT_BATCH_TOKENS})
    run = _Run(model, config, settings, progress)
    parts, data = [], None
    if {"randomness", "repetition"} & set(settings.tests):
        source = load_texts(
            texts, tokenizer=model.tokenizer, n_prompts=settings.n_prompts, data_dir=data_dir, seed=settings.seed
        )
        data = source.data
        logger.info("stress tests of %s%s: %d prompts", source.name, f" [{data}]" if data else "", len(source.texts))
        parts += run.perturbed(source.name, tokenize(model.tokenizer, source.texts, config)[0])
    if "length" in settings.tests:
        parts += run.lengths()
    values = pd.concat(parts, ignore_index=True)[STRESS_COLUMNS]
    derived = stress_tables(values)
    if output is not None:
        seconds = time.perf_counter() - started
        folder = RunFolder(output)
        with folder.locked():
            folder.update(STRESS_TABLE, values, gzip=compress)
            for table, frame in derived:
                folder.update(table, frame)
        about = {"model": model.name, "revision": model.revision, "texts": texts, "data": data}
        entry = {**about, "readout": config.readout, "tests": list(settings.tests), "seconds": round(seconds, 1)}
        record_stress_run(folder, {**entry, "settings": asdict(settings), "encode": config.key()})
    return values, next(frame for table, frame in derived if table == DIPS_TABLE)


def record_stress_run(folder: RunFolder, entry: dict) -> None:
    """Add one stress run's settings and wall time to ``stress.json`` (replacing an earlier run of its key)."""
    path = folder.file(STRESS_RUNS_FILE)
    key = ("model", "texts", "readout", "tests")
    with folder.locked():
        runs = json.loads(path.read_text()).get("runs", []) if path.is_file() else []
        runs = [r for r in runs if tuple(r.get(k) for k in key) != tuple(entry.get(k) for k in key)]
        write_json(path, {"runs": [*runs, entry]})


class _Run:
    """The forward passes of one stress run: one per perturbed prompt, entropies streamed per batch. The ids a
    random token may take (``vocab``): the tokenizer's vocabulary, within the model's embedding table."""

    def __init__(self, model: LoadedModel, config: EncodeConfig, settings: StressSettings, progress: bool):
        self.model, self.config, self.settings, self.progress = model, config, settings, progress
        self.ends = special_ends(model.tokenizer)
        self.vocab = min(len(model.tokenizer), model.model.get_input_embeddings().num_embeddings)
        if self.vocab <= FIRST_RANDOM_ID + 1:
            raise UserError(f"a vocabulary of {self.vocab} ids leaves none to draw above id {FIRST_RANDOM_ID}")

    def perturbed(self, texts: str, ids: list[np.ndarray]) -> list[pd.DataFrame]:
        """Randomness and repetition levels of ``ids``; p = 0 runs alone (batched as ``metrics`` does), the other
        levels together, so batches group prompts of like length rather than padding each level to its longest."""
        levels = [
            (t, p) for t in ("randomness", "repetition") if t in self.settings.tests for p in getattr(self.settings, t)
        ]
        changed = [(test, p) for test, p in levels if p != 0]
        kwargs = {"seed": self.settings.seed, "vocab": self.vocab, "ends": self.ends}
        pooled = [perturb(row, test, p, prompt=i, **kwargs) for test, p in changed for i, row in enumerate(ids)]
        found = self.entropies(pooled) if pooled else {}
        plain = self.entropies(ids) if len(changed) < len(levels) else {}

        def columns(level: tuple[str, float]) -> dict[str, np.ndarray]:  # a changed level's prompts in the passes
            start = changed.index(level) * len(ids)
            return {name: values[:, start : start + len(ids)] for name, values in found.items()}

        return [self.frame(plain if p == 0 else columns((test, p)), texts, test, p) for test, p in levels]

    def lengths(self) -> list[pd.DataFrame]:
        """Random-token prompts of each length up to the model's context (longer ones are skipped, and said so)."""
        context = model_context(self.model)
        kept = [n for n in self.settings.lengths if n <= context]
        if len(kept) < len(self.settings.lengths):
            logger.warning("lengths over %s's context of %d tokens skipped", self.model.name, context)
        if not kept:
            raise UserError(f"every --lengths value exceeds {self.model.name}'s context of {context} tokens")
        draw = partial(
            random_prompts, self.settings.length_prompts, seed=self.settings.seed, vocab=self.vocab, ends=self.ends
        )
        return [self.frame(self.entropies(draw(length)), "random", "length", length) for length in kept]

    def entropies(self, ids: list[np.ndarray]) -> dict[str, np.ndarray]:
        """normalisation -> [L+1, n] per-prompt prompt entropies (NaN: a prompt under 2 tokens)."""
        settings = MetricSettings(views=0, alpha=self.settings.alpha)
        observer = TokenMetrics(self.model.n_layers + 1, len(ids), settings, curvature=False)
        encode_token_ids(self.model, ids, self.config, progress=self.progress, on_batch=observer, into=discard_vectors)
        # all tokens identical (>= 2 of them, nothing left after centring): the minimum entropy, 0
        defined = observer.entropy_valid | (observer.lengths >= 2)
        nan = torch.tensor(float("nan"), dtype=torch.float64)
        return {how: torch.where(defined, observer.normalized(how), nan).numpy() for how in STRESS_NORMALIZATIONS}

    def frame(self, found: dict[str, np.ndarray], texts: str, test: str, level: float) -> pd.DataFrame:
        """Tidy rows of one (test, level); prompts under 2 tokens have no entropy and are dropped (with a note)."""
        n_states, n = next(iter(found.values())).shape
        rows = pd.MultiIndex.from_product(
            [list(found), range(n_states), range(n)], names=["normalization", "layer", "prompt"]
        )
        frame = pd.DataFrame({"value": np.stack(list(found.values())).reshape(-1)}, index=rows).reset_index()
        frame = frame.assign(
            model=self.model.name, test=test, level=float(level), texts=texts, readout=self.config.readout
        )
        missing = frame["value"].isna()
        if missing.any():
            logger.warning("%s %s: %d prompt(s) under 2 tokens have no entropy", test, level, missing.sum() // n_states)
        return frame[~missing]
