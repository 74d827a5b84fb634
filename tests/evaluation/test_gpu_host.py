"""What a GPU host does differently, emulated on the CPU: the machine is faked (a forked child that still sees CUDA,
the launcher's environment, the driver's memory figures), never the code under test.

A child forked from a process that has asked torch whether CUDA is available still sees it available, and its
first CUDA call raises "Cannot re-initialize CUDA in forked subprocess": here a fork hook makes every child say
both, so mteb's similarity functions fail in it exactly as on a GPU host.
"""

from __future__ import annotations

import json
import multiprocessing
import os

import mteb
import mteb.similarity_functions as mteb_similarity
import numpy as np
import pandas as pd
import pytest
import torch
from _task_files import SENTENCES, write_csv, write_search_tasks
from conftest import save_tiny_model, tiny_model

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.common.ranks import use_rank_device
from layer_mteb.evaluation import workers
from layer_mteb.evaluation.encoder import LayerEncoder
from layer_mteb.evaluation.sweep import sweep
from layer_mteb.evaluation.workers import affordable_workers, check_eval_workers
from layer_mteb.vectors import memory
from layer_mteb.vectors.memory import auto_memory_limit, store_bytes
from layer_mteb.vectors.store import LayerCache

GB = 10**9

_CHILDREN_SEE_A_GPU = {"on": False}  # a fork hook cannot be removed: it acts only while a test turns it on


def _as_on_a_gpu_host() -> None:
    if _CHILDREN_SEE_A_GPU["on"]:
        torch.cuda.is_available = lambda: True
        torch.cuda._is_in_bad_fork = lambda: True


os.register_at_fork(after_in_child=_as_on_a_gpu_host)


@pytest.fixture
def forked_children_see_a_gpu():
    _CHILDREN_SEE_A_GPU["on"] = True
    yield
    _CHILDREN_SEE_A_GPU["on"] = False


def _search_tasks(folder) -> str:
    """A task file with a tiny Retrieval task and a tiny Reranking task (mteb scores both through similarity)."""
    return write_search_tasks(
        folder,
        ("GpuSearch", "GpuRerank"),
        corpus=[{"id": f"d{i}", "text": t} for i, t in enumerate(SENTENCES)],
        queries=[["q1", "a cat by the window"], ["q2", "markets fell"]],
        qrels=[["q1", "d0"], ["q1", "d1"], ["q2", "d2"]],
        candidates=[["q1", "d0", 1], ["q1", "d2", 0], ["q1", "d4", 0], ["q2", "d3", 1], ["q2", "d6", 0]],
    )


def _sts_task(folder) -> str:
    """A task file with a tiny STS task over every sentence."""
    pairs = [[SENTENCES[i], SENTENCES[i + 1], float(i % 5)] for i in range(len(SENTENCES) - 1)]
    write_csv(folder / "sts.csv", ["sentence1", "sentence2", "score"], pairs)
    path = folder / "sts.yaml"
    path.write_text("custom:\n  - {name: GpuSTS, type: STS, files: {test: sts.csv}}\n")
    return str(path)


def _child_sees(queue) -> None:
    queue.put((torch.cuda.is_available(), torch.cuda._is_in_bad_fork()))


def test_the_emulated_child_fails_in_mtebs_similarity_as_on_a_gpu_host(forked_children_see_a_gpu):
    """The fake is faithful: in a forked child mteb's cos_sim raises the GPU host's error."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_sees, args=(queue,))
    child.start()
    child.join()
    assert queue.get(timeout=10) == (True, True)
    with context.Pool(1) as pool, pytest.raises(RuntimeError, match="Cannot re-initialize CUDA in forked subprocess"):
        pool.apply(mteb_similarity.cos_sim, (np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32)))


@pytest.mark.slow  # two sweeps of two tasks, one of them with forked workers
def test_retrieval_and_reranking_in_workers_on_a_gpu_host_score_as_one_worker(
    tmp_path, tiny_gpt_neox, forked_children_see_a_gpu
):
    tasks = _search_tasks(tmp_path)
    options = {"layers": "all", "progress": False, "vector_cache": False}
    one = sweep(tiny_gpt_neox, tasks, eval_workers=1, **options)
    two = sweep(tiny_gpt_neox, tasks, eval_workers=2, output=tmp_path / "run", **options)
    assert set(one["task"]) == {"GpuSearch", "GpuRerank"} and len(one) == 2 * (tiny_gpt_neox.n_layers + 1)
    pd.testing.assert_frame_equal(one, two, check_exact=True)
    log = json.loads((tmp_path / "run" / "run.json").read_text())["tasks"]
    assert [entry["eval_workers_used"] for entry in log] == [2, 2]  # the layers were scored in forked workers


def test_the_encoders_similarity_is_mtebs_cosine_in_float32_on_the_cpu_wherever_a_gpu_is(tiny_gpt_neox, monkeypatch):
    """The same numbers as mteb's own cosine computed on the CPU, also in a process that sees a GPU (where mteb's
    would move to it, and compile)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 8)).astype(np.float32), rng.standard_normal((7, 8)).astype(np.float32)
    on_cpu, one_row = mteb_similarity.cos_sim(a, b), mteb_similarity.cos_sim(a[0], b)
    pairs = mteb_similarity.pairwise_cos_sim(a, b[:5])
    encoder = LayerEncoder.from_model(tiny_gpt_neox, 1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU host's parent process
    got = encoder.similarity(a, b)
    assert got.dtype == torch.float32 and got.device.type == "cpu"
    assert torch.equal(got, on_cpu)
    assert torch.equal(encoder.similarity_pairwise(a, b[:5]), pairs)
    assert torch.equal(encoder.similarity(torch.from_numpy(a).double(), b), on_cpu)  # float32 whatever comes in
    assert torch.equal(encoder.similarity(a[0], b), one_row)  # one vector is one row


def _fill_in_child(cache: LayerCache, queue) -> None:
    cache.fill(SENTENCES[:2])  # cached already: nothing to run
    try:
        cache.fill(SENTENCES[2:3])
    except UserError as err:
        queue.put(str(err))
    else:
        queue.put(None)


def test_a_forked_worker_never_runs_the_model(tiny_gpt_neox):
    cache = LayerCache(tiny_gpt_neox, EncodeConfig(), memory_limit=GB)
    cache.fill(SENTENCES[:2])
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_fill_in_child, args=(cache, queue), daemon=True)
    child.start()
    child.join(timeout=60)
    if child.is_alive():  # a forward in a forked child can hang on torch's inherited thread pool
        child.kill()
        pytest.fail("the forked child ran the model and did not finish")
    message = queue.get(timeout=10)
    assert message is not None and "\n" not in message
    assert "1 texts that are not in the vector cache" in message and "--eval-workers 1" in message
    cache.fill(SENTENCES[2:3])  # the sweep itself still may
    assert len(cache) == 3


def test_a_lazily_filled_task_gets_the_workers_its_filled_cache_affords(tmp_path, tiny_gpt_neox, monkeypatch):
    """Clustering's texts are known only once its first layer is scored: the workers are counted after that, from
    the vectors then in the cache (here host memory affords one worker for them, not two)."""
    topics = ["cats", "cats", "markets", "markets", "home", "home", "weather", "music"]
    write_csv(tmp_path / "clusters.csv", ["text", "label"], [list(row) for row in zip(SENTENCES, topics, strict=True)])
    path = tmp_path / "clusters.yaml"
    path.write_text("custom:\n  - {name: GpuClusters, type: Clustering, files: {test: clusters.csv}}\n")
    per_worker = 4 * store_bytes(len(SENTENCES), 1, tiny_gpt_neox.hidden_size)
    monkeypatch.setattr(workers, "host_available", lambda: per_worker * 3 // 2)  # the host: room for one worker
    run = tmp_path / "run"
    sweep(tiny_gpt_neox, str(path), layers="all", eval_workers=2, output=run, progress=False, vector_cache=False)
    (entry,) = json.loads((run / "run.json").read_text())["tasks"]
    assert entry["texts_encoded"] == len(SENTENCES) and entry["eval_workers_used"] == 1


def test_under_a_launch_of_two_processes_each_takes_half_the_cores_workers_and_memory(tiny_gpt_neox, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)  # a 16-core host
    monkeypatch.setattr(memory, "host_available", lambda: 64 * GB)
    cache = LayerCache(tiny_gpt_neox, EncodeConfig(), memory_limit=GB)
    cache.fill(SENTENCES)
    per_worker = 4 * store_bytes(len(SENTENCES), 1, tiny_gpt_neox.hidden_size)
    monkeypatch.setattr(workers, "host_available", lambda: per_worker * 8)  # room for 8 workers on the host

    def shares() -> tuple[int, int, int]:
        return check_eval_workers(None), affordable_workers(16, 20, cache), auto_memory_limit("cpu")

    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert shares() == (16, 8, 32 * GB)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert shares() == (8, 4, 16 * GB)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "two")
    with pytest.raises(UserError, match="LOCAL_WORLD_SIZE"):
        check_eval_workers(None)


def test_each_launched_process_makes_its_own_gpu_the_current_one(monkeypatch):
    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    use_rank_device("cuda")  # not launched: torch's own choice stays
    monkeypatch.setenv("LOCAL_RANK", "1")
    use_rank_device("cpu")
    use_rank_device("cuda")
    use_rank_device("cuda:3")
    assert chosen == [1, 3]


def test_the_automatic_limit_counts_memory_pytorch_holds_unused_as_free(monkeypatch):
    """After a big task or a model switch PyTorch keeps the freed blocks; the driver counts them as used. The limit
    measured then must be the one measured before."""
    monkeypatch.setattr(memory, "host_available", lambda: 1000 * GB)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    device = {"free": 40 * GB, "reserved": 0, "allocated": 0}  # what the driver and the caching allocator say
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d=None: (device["free"], 80 * GB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda d=None: device["reserved"])
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda d=None: device["allocated"])
    before = auto_memory_limit("cuda:0")
    device.update(free=28 * GB, reserved=12 * GB, allocated=2 * GB)  # 2 GB in use, 10 GB cached for reuse
    after = auto_memory_limit("cuda:0")
    assert before == 20 * GB and after == 19 * GB  # only what is really in use is gone


def test_task_metrics_read_one_layer_at_a_time(tmp_path, monkeypatch, bert_tokenizer):
    """The task metrics never ask the store for all layers at once (a second copy of it on the device, or all of it
    in host memory when it is on disk), in memory or on disk, and give the same rows either way."""
    from layer_mteb.metrics.representation import matrix_entropy

    real_vectors = LayerCache.vectors

    def one_layer_only(self, texts, layer=None):
        assert layer is not None, "the whole [L+1, N, D] store was stacked"
        return real_vectors(self, texts, layer)

    monkeypatch.setattr(LayerCache, "vectors", one_layer_only)
    path = _sts_task(tmp_path)
    model = tiny_model("gpt2", bert_tokenizer)
    one_layer = store_bytes(len(SENTENCES), 1, model.hidden_size)
    frames = []
    for limit in (GB, one_layer):  # in memory; on disk, one file per layer
        run = tmp_path / f"run-{limit}"
        config = EncodeConfig(max_cache_memory=limit)
        sweep(model, path, config=config, output=run, task_metrics=True, progress=False, vector_cache=False)
        frames.append(pd.read_csv(run / "metrics.csv").sort_values(["layer", "metric"], ignore_index=True))
    pd.testing.assert_frame_equal(frames[0], frames[1])
    entropy = frames[0][frames[0]["metric"] == "dataset_entropy_raw"]
    assert list(entropy["layer"]) == list(range(model.n_layers + 1))
    cache = LayerCache(model, EncodeConfig(), memory_limit=GB)
    expected = [matrix_entropy(cache.vectors(SENTENCES, k), 1.0) for k in range(model.n_layers + 1)]
    assert np.allclose(entropy["value"], expected, rtol=1e-5)


def test_a_model_switch_lets_the_old_model_go_before_the_next_one_loads(tmp_path, bert_tokenizer, monkeypatch):
    import weakref

    from layer_mteb.evaluation import sweep as sweep_module

    folders = [save_tiny_model("gpt2", bert_tokenizer, tmp_path / name, seed=i) for i, name in enumerate("ab")]
    path = _sts_task(tmp_path)
    held: list[weakref.ref] = []
    alive_at_load: list[bool] = []
    real_load = sweep_module.load_model

    def load(*args, **kwargs):
        alive_at_load.append(any(ref() is not None for ref in held))
        loaded = real_load(*args, **kwargs)
        held.append(weakref.ref(loaded.model))
        return loaded

    monkeypatch.setattr(sweep_module, "load_model", load)
    frame = sweep([str(f) for f in folders], path, layers="-1", progress=False, vector_cache=False)
    assert len(frame) == 2 and alive_at_load == [False, False]


def _summarization_task():
    """mteb's SummEval (v2) holding a few rows of our own: mteb's summarization evaluator calls its cosine and dot
    product itself, not through the encoder."""
    from datasets import Dataset, DatasetDict

    s = SENTENCES
    rows = {
        "text": [s[0] + " " + s[1], s[2] + " " + s[3], s[4] + " " + s[6]],
        "human_summaries": [[s[0], s[1]], [s[2], s[3]], [s[4], s[6]]],
        "machine_summaries": [[s[1], s[5], s[7]], [s[3], s[0], s[6]], [s[6], s[2], s[4]]],
        "relevance": [[4.0, 1.0, 2.0], [5.0, 2.0, 1.0], [3.0, 1.0, 4.5]],
    }
    task = mteb.get_task("SummEvalSummarization.v2")
    task.dataset = {"default": DatasetDict({"test": Dataset.from_dict(rows)})}
    task.data_loaded = True
    return task


def test_summarization_in_a_process_that_sees_a_gpu_scores_on_the_cpu(tiny_gpt_neox, monkeypatch):
    """The sweep's own evaluation sees no GPU either: what mteb computes itself (summarization's cosine) is computed
    where a worker computes it, so the same layer gives the same score in the sweep and in any worker."""
    options = {"layers": "all", "eval_workers": 1, "progress": False, "vector_cache": False}
    config = EncodeConfig(device="cpu")
    want = sweep(tiny_gpt_neox, [_summarization_task()], config=config, **options)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU host's sweep process
    got = sweep(tiny_gpt_neox, [_summarization_task()], config=config, **options)
    assert len(got) == tiny_gpt_neox.n_layers + 1 and got["main_score"].notna().all()
    pd.testing.assert_frame_equal(want, got, check_exact=True)
