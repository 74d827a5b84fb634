"""What does exporting a middle layer save? Size on disk and encode time of an exported layer against the exported
last layer (the whole model), each folder loaded by sentence-transformers alone and encoding the same texts.

Both folders come from ``layer_mteb.model.st_export.export_layer``; the last layer's folder is the full model with the
same pooling, so the only difference is the blocks dropped. Encode times alternate between the two folders for
``--rounds`` rounds and the fastest round of each counts (the cores are shared).

    python benchmarks/export_cost.py --threads 1      # SmolLM2-135M layer 12 vs 30, all-MiniLM-L6-v2 layer 3 vs 6
    python benchmarks/export_cost.py --quick          # 200 texts, one round
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, common_options, machine_line, setup, table

from layer_mteb import load_model
from layer_mteb.model.st_export import export_layer


def sts_texts(data_dir: str, n: int) -> list[str]:
    """The first ``n`` distinct sentences of STSBenchmark's test split, in file order."""
    texts: dict[str, None] = {}
    with (Path(data_dir) / "STSBenchmark" / "test.jsonl").open() as lines:
        for line in lines:
            row = json.loads(line)
            texts.update(dict.fromkeys((row["sentence1"], row["sentence2"])))
            if len(texts) >= n:
                break
    return list(texts)[:n]


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def encode_seconds(folders: dict[int, Path], texts: list[str], rounds: int, batch_size: int) -> dict[int, float]:
    """Fastest of ``rounds`` encodes of ``texts`` by each folder's SentenceTransformer (loaded once, warmed up)."""
    from sentence_transformers import SentenceTransformer

    encoders = {layer: SentenceTransformer(str(folder), device="cpu") for layer, folder in folders.items()}
    for encoder in encoders.values():
        encoder.encode(texts[:8])
    best = dict.fromkeys(folders, float("inf"))
    for _ in range(rounds):
        for layer, encoder in encoders.items():
            with Timer() as timer:
                encoder.encode(texts, batch_size=batch_size)
            best[layer] = min(best[layer], timer.seconds)
    return best


def measure(name: str, layer: int, args: argparse.Namespace, texts: list[str], root: Path) -> list[dict]:
    """Rows for ``layer`` and the last layer of ``name``: folder size, weights, encode time, and their ratios."""
    from layer_mteb.common.config import EncodeConfig

    config = EncodeConfig(max_length=args.max_length, dtype=args.dtype)
    model = load_model(name, config)
    last = model.n_layers
    folders = {k: export_layer(model, k, config, root / f"{name}-{k}") for k in (layer, last)}
    seconds = encode_seconds(folders, texts, args.rounds, args.batch_size)
    size = {k: folder_bytes(folder) for k, folder in folders.items()}
    weights = {k: (folder / "model.safetensors").stat().st_size for k, folder in folders.items()}
    return [
        {
            "model": model.name,
            "layer": f"{k} of {last}",
            "folder MB": size[k] / 1e6,
            "weights MB": weights[k] / 1e6,
            "x of full size": size[k] / size[last],
            "encode s": seconds[k],
            "texts/s": len(texts) / seconds[k],
            "x of full time": seconds[k] / seconds[last],
            "blocks / L": k / last,
        }
        for k in (layer, last)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="smollm2-135m:12,minilm-l6:3", help="model:layer pairs, comma-separated")
    parser.add_argument("--texts", type=int, default=1000, help="STSBenchmark test sentences to encode")
    parser.add_argument("--rounds", type=int, default=3, help="encodes per folder; the fastest counts")
    common_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.texts, args.rounds = min(args.texts, 200), 1
    setup(args)
    texts = sts_texts(args.data_dir, args.texts)
    print(machine_line(args.device))
    print(f"{len(texts)} STSBenchmark test sentences, batch size {args.batch_size}, max length {args.max_length}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="export-cost-") as root:
        for pair in args.models.split(","):
            name, _, layer = pair.partition(":")
            rows += measure(name, int(layer), args, texts, Path(root))
            print(f"{name} done", flush=True)
    print("\n### an exported layer vs the exported full model\n")
    print(table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
