"""Save a randomly initialised Mamba (no pretrained SSM installs offline) to show the state-space-model path.

Its scores say nothing about trained Mamba models; it is labelled ``random`` everywhere it appears.
Usage: python scripts/random_mamba.py OUTPUT_FOLDER [--layers 4] [--hidden 256]
"""

from __future__ import annotations

import argparse

import torch
from transformers import AutoTokenizer, MambaConfig, MambaModel

from layer_mteb.model.loading import packaged_folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    # a real BPE tokenizer that ships offline: SmolLM2's (GPT-2 style, 49k tokens)
    tokenizer = AutoTokenizer.from_pretrained(packaged_folder("smollm2-135m"))
    torch.manual_seed(args.seed)
    config = MambaConfig(
        vocab_size=len(tokenizer),
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        state_size=16,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    MambaModel(config).save_pretrained(args.output)
    tokenizer.save_pretrained(args.output)
    print(f"saved a random {args.layers}-layer Mamba (hidden {args.hidden}) to {args.output}")


if __name__ == "__main__":
    main()
