"""Does a layer's v2 clustering score depend on which layers were evaluated before it?

v2 clustering (``AbsTaskClustering``) draws its document sample and bootstrap from the task object's own random
generator. "before" evaluates every layer on one task object in turn, as the sweep did until it restored the task's
random state per layer (layer_mteb.tasks.state.TaskRandomState); "alone" is a fresh task object per layer (what a
separate ``mteb.evaluate`` of that layer gives); "sweep" is ``layer_mteb.evaluation.sweep`` of all layers today. It also
counts the texts each way puts through the model.

    python benchmarks/layer_order.py --threads 1     # all-MiniLM-L6-v2 on TwentyNewsgroupsClustering.v2 (local)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import common_options, setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_options(parser)
    parser.add_argument("--model", default="minilm-l6")
    parser.add_argument("--task", default="TwentyNewsgroupsClustering.v2")
    parser.add_argument("--folder", default="TwentyNewsgroupsClustering", help="local data folder under --data-dir")
    args = parser.parse_args()
    setup(args)

    import mteb
    from _common import encode_config

    from layer_mteb import LayerCache, LayerEncoder, load_model, sweep
    from layer_mteb.evaluation.encoder import resolve_settings
    from layer_mteb.evaluation.plan import parse_layers
    from layer_mteb.tasks.catalog import TaskSpec
    from layer_mteb.tasks.local_data import load_local_data

    config = encode_config(args)
    loaded = load_model(args.model, config)
    layers = parse_layers("all", loaded.n_layers)
    settings = resolve_settings(loaded, config)

    def fresh_task():
        task = mteb.get_task(args.task, eval_splits=["test"])
        load_local_data(task, Path(args.data_dir) / args.folder, TaskSpec(args.folder))
        return task

    def score(task, cache, layer) -> float:
        encoder = LayerEncoder(cache, layer, settings=settings)
        return mteb.evaluate(encoder, task, cache=None, show_progress_bar=False).task_results[0].get_score()

    shared_task, shared_cache = fresh_task(), LayerCache(loaded, settings.encode)
    before = {k: score(shared_task, shared_cache, k) for k in layers}
    alone, alone_texts = {}, 0
    for k in layers:
        cache = LayerCache(loaded, settings.encode)
        alone[k] = score(fresh_task(), cache, k)
        alone_texts = max(alone_texts, len(cache))
    frame = sweep(loaded, [fresh_task()], layers="all", config=config, vector_cache=False, progress=False)
    now = dict(zip(frame["layer"], frame["main_score"], strict=True))

    print(f"{loaded.name} on {args.task} (local {args.folder}), main score {shared_task.metadata.main_score}\n")
    print("| layer | before: in a sweep of all layers | alone | sweep now |")
    print("|---|---|---|---|")
    for k in layers:
        print(f"| {k} | {before[k]:.4f} | {alone[k]:.4f} | {now[k]:.4f} |")
    diff = max(abs(now[k] - round(alone[k], 6)) for k in layers)
    texts = f"before {len(shared_cache)}, alone at most {alone_texts} per layer"
    print(f"\nmax |sweep now - alone|: {diff:.1e}; texts encoded: {texts}")


if __name__ == "__main__":
    main()
