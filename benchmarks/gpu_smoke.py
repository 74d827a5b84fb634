"""GPU smoke test: does a whole `layer-mteb run` work on a GPU host, with no hub, and what does the all-layer pass cost?

Builds a random Llama decoder of about 320M parameters (``--quick``: a tiny one) and a byte-level BPE tokenizer
trained on generated text, five generated tasks of the types the paper and MTEB(eng, v2) score (Retrieval,
Reranking, STS, Classification, Clustering) as a task file, then runs ``layer-mteb run`` on them:

1. float32, ``--eval-workers 4`` (every layer) and again ``--eval-workers 1`` (some layers, the vectors reused):
   the scores must be identical;
2. bfloat16, ``--eval-workers 4`` (GPU only): the run completes; its largest score difference to float32 is printed;
3. float32 with a JSON ``--device-map`` sending the second half of the blocks and the final norm to CPU offload
   (accelerate keeps them on ``meta`` between calls): scores equal float32 on the GPU within 1e-4;
4. float32 on the CPU, for three layers of the STS and Classification tasks: scores equal the GPU's within 1e-3;
5. the all-layer pass (:class:`layer_mteb.LayerCache` filled, as a sweep fills it) beside sentence-transformers
   ``encode`` of the same model cut at nothing (last layer, mean pooling) on the same texts and batch size, in float32
   and bfloat16: texts/s, tokens/s and their ratio (one timed run each after a warm-up);
6. peak GPU memory of each run beside the model's weights and the vector memory limit the run chose.

It exits 1 when a check fails. Every number is also written to ``--out/gpu_smoke.json``.

    bash benchmarks/gpu_smoke.sh                      # with layer_mteb installed (pip install -e .)
    python benchmarks/gpu_smoke.py --device cpu --quick   # the same flow on a CPU, tiny model (about 2 minutes)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
TASKS = ["SmokeRetrieval", "SmokeReranking", "SmokeSTS", "SmokeClassification", "SmokeClustering"]
FULL = {"hidden": 1024, "blocks": 24, "heads": 16, "ffn": 2816, "vocab": 8192, "docs": 4000, "queries": 200}
QUICK = {"hidden": 64, "blocks": 4, "heads": 4, "ffn": 128, "vocab": 2048, "docs": 300, "queries": 40}
WORKER_TOLERANCE = 0.0  # scores of one worker and of four: identical
OFFLOAD_TOLERANCE = 1e-4
CPU_TOLERANCE = 1e-3


# ------------------------------------------------------------------------------------------------ generated data


def _words(rng: np.random.Generator, n: int) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, size=rng.integers(3, 10))) for _ in range(n)]


class Corpus:
    """Texts over ten topics: each topic has its own words, all share common ones, so layers differ in scores."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.topics = [_words(self.rng, 60) for _ in range(10)]
        self.common = _words(self.rng, 200)

    def text(self, topic: int, n_words: int | None = None) -> str:
        n = int(n_words or self.rng.integers(8, 60))
        own = self.rng.random(n) < 0.6
        words = [self.rng.choice(self.topics[topic]) if o else self.rng.choice(self.common) for o in own]
        return " ".join(words)

    def topic(self) -> int:
        return int(self.rng.integers(len(self.topics)))


def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path.name


def write_tasks(folder: Path, docs: int, queries: int) -> tuple[Path, list[str]]:
    """The five tasks as a task file (``custom:``) in ``folder``, and the retrieval corpus's texts."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus = Corpus()
    doc_topics = [corpus.topic() for _ in range(docs)]
    documents = [corpus.text(t, corpus.rng.integers(40, 120)) for t in doc_topics]
    doc_rows = [{"id": f"d{i}", "text": text} for i, text in enumerate(documents)]

    def query_of(i: int) -> str:
        words = documents[i].split()
        return " ".join(corpus.rng.choice(words, size=min(8, len(words)), replace=False))

    targets = corpus.rng.choice(docs, size=queries, replace=False)
    retrieval = {
        "corpus": _jsonl(folder / "retrieval_corpus.jsonl", doc_rows),
        "queries": _jsonl(
            folder / "retrieval_queries.jsonl", [{"id": f"q{i}", "text": query_of(d)} for i, d in enumerate(targets)]
        ),
        "qrels": _jsonl(
            folder / "retrieval_qrels.jsonl",
            [{"query-id": f"q{i}", "corpus-id": f"d{d}", "score": 1} for i, d in enumerate(targets)],
        ),
    }
    rerank_targets = targets[: max(queries // 2, 10)]
    rerank_qrels = []
    for i, d in enumerate(rerank_targets):
        same_topic = [j for j in range(docs) if doc_topics[j] == doc_topics[d] and j != d]
        others = corpus.rng.choice(same_topic, size=min(19, len(same_topic)), replace=False)
        rerank_qrels.append({"query-id": f"r{i}", "corpus-id": f"d{d}", "score": 1})
        rerank_qrels += [{"query-id": f"r{i}", "corpus-id": f"d{j}", "score": 0} for j in others]
    reranking = {
        "corpus": retrieval["corpus"],
        "queries": _jsonl(
            folder / "rerank_queries.jsonl",
            [{"id": f"r{i}", "text": query_of(d)} for i, d in enumerate(rerank_targets)],
        ),
        "qrels": _jsonl(folder / "rerank_qrels.jsonl", rerank_qrels),
    }
    sts_rows = []
    for _ in range(300):
        first = corpus.text(corpus.topic()).split()
        kept = corpus.rng.random()
        second = [w if corpus.rng.random() < kept else corpus.rng.choice(corpus.common) for w in first]
        sts_rows.append({"sentence1": " ".join(first), "sentence2": " ".join(second), "score": round(5 * kept, 3)})
    labelled = {split: [] for split in ("train", "test")}
    for rows in labelled.values():
        for _ in range(300):
            t = corpus.topic()
            rows.append({"text": corpus.text(t), "label": f"topic{t}"})
    clusters = [{"text": corpus.text(t), "label": t} for t in (corpus.topic() for _ in range(400))]
    spec = {
        "custom": [
            {"name": "SmokeRetrieval", "type": "Retrieval", "files": retrieval},
            {"name": "SmokeReranking", "type": "Reranking", "files": reranking},
            {"name": "SmokeSTS", "type": "STS", "files": {"test": _jsonl(folder / "sts.jsonl", sts_rows)}},
            {
                "name": "SmokeClassification",
                "type": "Classification",
                "files": {s: _jsonl(folder / f"classes_{s}.jsonl", rows) for s, rows in labelled.items()},
            },
            {
                "name": "SmokeClustering",
                "type": "Clustering",
                "files": {"test": _jsonl(folder / "clusters.jsonl", clusters)},
            },
        ],
        "suites": {"cpu_check": ["SmokeSTS", "SmokeClassification"]},
    }
    task_file = folder / "smoke_tasks.yaml"
    task_file.write_text(json.dumps(spec, indent=1))  # JSON is YAML
    every_text = documents + [r["text"] for r in labelled["train"]] + [r["sentence1"] for r in sts_rows]
    return task_file, every_text


# ------------------------------------------------------------------------------------------------ the model


def build_model(folder: Path, texts: list[str], size: dict, device: str) -> int:
    """A random Llama and its BPE tokenizer (trained on ``texts``) saved in ``folder``; returns its parameters."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=size["vocab"], special_tokens=["<pad>", "<s>", "</s>", "<unk>"])
    tokenizer.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    )
    fast.padding_side = "right"
    config = LlamaConfig(
        vocab_size=fast.vocab_size,
        hidden_size=size["hidden"],
        intermediate_size=size["ffn"],
        num_hidden_layers=size["blocks"],
        num_attention_heads=size["heads"],
        num_key_value_heads=size["heads"],
        max_position_embeddings=512,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaModel(config)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def offload_map(folder: Path, blocks: int) -> Path:
    """A device map: embeddings and the first half of the blocks on GPU 0, the rest and the final norm offloaded to
    the CPU (accelerate moves them in for each call and leaves them on ``meta`` in between)."""
    mapping: dict[str, int | str] = {"embed_tokens": 0, "rotary_emb": 0, "norm": "cpu"}
    mapping.update({f"layers.{i}": 0 if i < blocks // 2 else "cpu" for i in range(blocks)})
    path = folder / "offload_map.json"
    path.write_text(json.dumps(mapping))
    return path


# ------------------------------------------------------------------------------------------------ runs


def run_cli(out: Path, name: str, args: list[str], env: dict[str, str]) -> dict:
    """``layer-mteb run ARGS`` in its own process (its own CUDA context and peak); its scores and peak memory."""
    output = out / name
    peak_file = out / f"{name}.peak.json"
    command = [sys.executable, __file__, "--cli", str(peak_file), "run", *args, "--output", str(output)]
    print(f"\n$ layer-mteb run {' '.join(args)} --output {output}", flush=True)
    started = time.perf_counter()
    result = subprocess.run(command, env=env, text=True, capture_output=True)
    seconds = time.perf_counter() - started
    print(result.stderr[-3000:], end="", flush=True)
    if result.returncode != 0:
        raise SystemExit(f"FAIL: {name} exited {result.returncode}")
    import layer_mteb

    scores = layer_mteb.mteb_layer_scores(output)
    peak = json.loads(peak_file.read_text()) if peak_file.exists() else {}
    log = json.loads((output / "run.json").read_text())["tasks"]
    peak["max_cache_memory"] = max(entry.get("max_cache_memory") or 0 for entry in log)
    print(
        f"  {name}: {len(scores)} scores in {seconds:.1f} s; peak GPU memory {_gib(peak.get('allocated'))}", flush=True
    )
    return {"scores": scores, "seconds": seconds, "peak": peak, "log": log}


def cli_with_peak(peak_file: str, argv: list[str]) -> int:
    """The command line, then the peak GPU memory this process allocated (written even when it fails)."""
    import torch

    from layer_mteb.cli import main

    try:
        return main(argv)
    finally:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            Path(peak_file).write_text(
                json.dumps(
                    {"allocated": torch.cuda.max_memory_allocated(), "reserved": torch.cuda.max_memory_reserved()}
                )
            )


def compare(a, b, label: str, tolerance: float) -> tuple[bool, float, int]:
    """Largest |score difference| over the (task, layer, subset) both runs scored."""
    keys = ["task", "layer", "subset"]
    joined = a.merge(b, on=keys, suffixes=("_a", "_b"))
    diff = float((joined["main_score_a"] - joined["main_score_b"]).abs().max()) if len(joined) else math.nan
    ok = len(joined) > 0 and diff <= tolerance
    print(
        f"  {'ok  ' if ok else 'FAIL'} {label}: max |diff| {diff:.3g} over {len(joined)} scores (tolerance {tolerance})"
    )
    return ok, diff, len(joined)


def throughput(model_dir: Path, texts: list[str], device: str, dtype: str, batch_size: int) -> dict:
    """Seconds of the all-layer pooled pass and of a last-layer sentence-transformers encode of the same texts."""
    import torch
    from sentence_transformers import SentenceTransformer, models

    import layer_mteb

    config = layer_mteb.EncodeConfig(device=device, dtype=dtype, batch_size=batch_size, max_length=512)
    loaded = layer_mteb.load_model(str(model_dir), config)
    transformer = models.Transformer(str(model_dir), max_seq_length=512)
    st = SentenceTransformer(modules=[transformer, models.Pooling(loaded.hidden_size, "mean")], device=device)
    st.to(getattr(torch, dtype))
    tokens = sum(len(ids) for ids in loaded.tokenizer(texts, truncation=True, max_length=512)["input_ids"])

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)

    def all_layers() -> None:
        layer_mteb.LayerCache(loaded, config, memory_limit=1 << 40).fill(texts)

    def last_layer() -> None:
        st.encode(texts, batch_size=batch_size, convert_to_numpy=True)

    timings = {}
    for name, job in (("all_layers", all_layers), ("last_layer_st", last_layer)):
        job()  # warm-up: kernels, allocator
        sync()
        started = time.perf_counter()
        job()
        sync()
        timings[name] = time.perf_counter() - started
    ratio = timings["all_layers"] / timings["last_layer_st"]
    row = {
        "dtype": dtype,
        "texts": len(texts),
        "tokens": tokens,
        **{f"{k}_seconds": v for k, v in timings.items()},
        **{f"{k}_texts_per_s": len(texts) / v for k, v in timings.items()},
        **{f"{k}_tokens_per_s": tokens / v for k, v in timings.items()},
        "ratio": ratio,
    }
    print(
        f"  {dtype}: all layers {len(texts) / timings['all_layers']:.0f} texts/s "
        f"({tokens / timings['all_layers']:.0f} tokens/s); last layer (sentence-transformers) "
        f"{len(texts) / timings['last_layer_st']:.0f} texts/s; ratio {ratio:.2f}x (goal <= 1.2)",
        flush=True,
    )
    return row


def _gib(n: float | None) -> str:
    return "n/a" if not n else f"{n / 2**30:.2f} GiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda | cuda:N | cpu (cpu: the flow only, no GPU checks)")
    parser.add_argument("--quick", action="store_true", help="a tiny model and small tasks")
    parser.add_argument("--work", default="/tmp/layer_mteb_gpu_smoke", help="model, tasks, runs and caches")
    parser.add_argument("--out", default=None, help="where gpu_smoke.json goes (default: --work)")
    parser.add_argument("--batch-size", type=int, default=None, help="of the throughput pass (default: the run's)")
    args = parser.parse_args()
    import torch

    on_gpu = args.device.startswith("cuda")
    if on_gpu and not torch.cuda.is_available():
        print("FAIL: no CUDA GPU here; run with --device cpu for the flow alone", file=sys.stderr)
        return 2
    size = QUICK if args.quick else FULL
    work = Path(args.work)
    out = Path(args.out or work)
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LAYER_MTEB_CACHE": str(work / "cache"), "HF_HUB_OFFLINE": "1"}
    os.environ["LAYER_MTEB_CACHE"] = env["LAYER_MTEB_CACHE"]
    import mteb
    import transformers

    device_name = torch.cuda.get_device_name(args.device) if on_gpu else "cpu"
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, mteb {mteb.__version__}, "
        f"device {args.device} ({device_name}), {os.cpu_count()} CPUs",
        flush=True,
    )

    started = time.perf_counter()
    task_file, texts = write_tasks(work / "tasks", size["docs"], size["queries"])
    n_params = build_model(work / "model", texts, size, args.device)
    model = str(work / "model")
    weights = n_params * 4
    print(
        f"random Llama: {n_params / 1e6:.0f}M parameters, {size['blocks']} blocks; tasks in {task_file} "
        f"({time.perf_counter() - started:.1f} s)",
        flush=True,
    )

    report: dict = {"device": device_name, "parameters": n_params, "checks": {}}
    ok = True
    base = ["--model", model, "--tasks", str(task_file), "--device", args.device]
    some = f"0,{size['blocks'] // 2},{size['blocks']}"
    runs = {
        "fp32_w4": run_cli(out, "fp32_w4", [*base, "--eval-workers", "4"], env),
        "fp32_w1": run_cli(out, "fp32_w1", [*base, "--eval-workers", "1", "--layers", some], env),
    }
    if on_gpu:  # bfloat16 matrix products on a CPU are slow and not what this checks
        runs["bf16_w4"] = run_cli(out, "bf16_w4", [*base, "--eval-workers", "4", "--dtype", "bfloat16"], env)
        device_map = offload_map(work, size["blocks"])
        offload = [a for a in base if a not in ("--device", args.device)]
        runs["offload"] = run_cli(
            out,
            "offload",
            [*offload, "--device-map", str(device_map), "--eval-workers", "4", "--layers", some, "--no-vector-cache"],
            env,
        )
        cpu = ["--model", model, "--tasks", f"{task_file}:cpu_check", "--device", "cpu", "--layers", some]
        runs["cpu"] = run_cli(out, "cpu", [*cpu, "--eval-workers", "4", "--no-vector-cache"], env)

    print("\nchecks", flush=True)
    scores = {name: run["scores"] for name, run in runs.items()}
    checks = [("eval-workers 4 = eval-workers 1", "fp32_w4", "fp32_w1", WORKER_TOLERANCE)]
    if on_gpu:
        checks += [
            ("offloaded device map = all on the GPU", "fp32_w4", "offload", OFFLOAD_TOLERANCE),
            ("float32 GPU = float32 CPU", "fp32_w4", "cpu", CPU_TOLERANCE),
        ]
    for label, a, b, tolerance in checks:
        passed, diff, n = compare(scores[a], scores[b], label, tolerance)
        report["checks"][label] = {"passed": passed, "max_abs_diff": diff, "scores": n, "tolerance": tolerance}
        ok &= passed
    if "bf16_w4" in scores:
        _, diff, _ = compare(scores["fp32_w4"], scores["bf16_w4"], "bfloat16 vs float32 (informational)", math.inf)
        report["bf16_max_abs_diff"] = diff
    types = sorted(set(scores["fp32_w4"]["task"]))
    missing = sorted(set(TASKS) - set(types))
    if missing:
        print(f"  FAIL tasks without scores: {missing}")
        ok = False
    report["tasks_scored"] = types

    print("\nthroughput (one timed run each, after a warm-up)", flush=True)
    batch = args.batch_size or 32
    report["throughput"] = [
        throughput(work / "model", texts[: size["docs"]], args.device, dtype, batch)
        for dtype in (("float32", "bfloat16") if on_gpu else ("float32",))
    ]

    print("\nmemory", flush=True)
    report["memory"] = {}
    for name, run in runs.items():
        peak = run["peak"]
        report["memory"][name] = peak
        print(
            f"  {name}: peak allocated {_gib(peak.get('allocated'))}, reserved {_gib(peak.get('reserved'))}; "
            f"weights {_gib(weights / (2 if name.startswith('bf16') else 1))}, "
            f"vector memory limit {_gib(peak.get('max_cache_memory'))}"
        )
    report["seconds"] = {name: run["seconds"] for name, run in runs.items()}
    report["passed"] = ok
    (out / "gpu_smoke.json").write_text(json.dumps(report, indent=1, default=str))
    print(
        f"\n{'PASSED' if ok else 'FAILED'} in {time.perf_counter() - started:.0f} s; "
        f"numbers in {out / 'gpu_smoke.json'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--cli":
        sys.exit(cli_with_peak(sys.argv[2], sys.argv[3:]))
    sys.exit(main())
