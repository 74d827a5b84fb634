"""Do combinations of layers beat the best single layer? Scored with mteb from the committed runs' vector stores.

    python scripts/layer_mix.py [--runs results/smollm2-135m results/minilm-l6] [--tasks BIOSSES,STS17,...]

Per run and task: the mean of the pooled vectors over a window of consecutive layers (width 3 and 5, centred on the
agreement pick and on the best single layer, cut short at the first and last layer) and over the three layers of most
agreement, each scored by ``mteb.evaluate`` through the sweep's own unit
(:func:`layer_mteb.evaluation.mteb_call.score_encoder`: the task's random state restored, then evaluated) with a
:class:`LayerMixEncoder` (below, on the package's ``LayerEncoder``) over the run's vector store. The single-layer
baselines are the committed ``scores.csv``, used only after the best and the agreement layer, scored afresh the same
way, equal them (to 1e-6; otherwise the script stops). The agreement pick is ``select --by agreement``'s (mutual k-NN,
outliers none, n = 256, k = 10, seed 0, the default reference), read from ``agreement.csv``. Writes
``results/paper/layer_mix.csv`` and ``results/paper/layer_mix.md``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from mteb.models.model_meta import ModelMeta

from layer_mteb import LayerEncoder
from layer_mteb.analysis.rules import extremum_layer
from layer_mteb.analysis.selection.agreement import AGREEMENT, AgreementOptions, read_curves
from layer_mteb.analysis.selection.curves import score_curves
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.common.settings import RunSettings
from layer_mteb.evaluation.encoder import resolve_settings
from layer_mteb.evaluation.mteb_call import score_encoder, texts_mteb_encodes
from layer_mteb.evaluation.plan import resolve_layer, task_units
from layer_mteb.metrics.agreement.compute import model_source
from layer_mteb.metrics.texts import task_texts_label
from layer_mteb.model.loading import load_model
from layer_mteb.model.names import PACKAGED_MODELS
from layer_mteb.tasks.catalog import data_dir_from_env, select_tasks
from layer_mteb.tasks.state import TaskRandomState, load_data_once
from layer_mteb.vectors.store import LayerCache, store_folder

RUNS = ("results/smollm2-135m", "results/minilm-l6", "results/mpnet-base")
TASKS = "BIOSSES,STS17,STS16"
TOLERANCE = 1e-6  # the committed scores are mteb's, rounded to 6 decimals


class LayerMixEncoder(LayerEncoder):
    """The element-wise mean of the pooled hidden states ``layers`` of the vectors in ``cache``.

    A view like :class:`LayerEncoder` (same cache, same checks), over a combination of layers instead of one:
    each text's vector is the mean of its cached vectors of those layers, summed in float64 and handed to mteb as
    float32, so a combination of one layer gives that layer's vectors exactly. ``experiment_kwargs`` name the
    layers and the combination instead of a single layer, so mteb's result cache never serves one for the other.
    """

    COMBINE = "mean"

    def __init__(self, cache: LayerCache, layers: Sequence[int], *, settings: RunSettings):
        if not layers:
            raise ValueError("a layer combination needs at least one layer")
        super().__init__(cache, layers[0], settings=settings)
        resolved = [resolve_layer(layer, self.model.n_layers) for layer in layers]
        if len(set(resolved)) != len(resolved):
            raise ValueError(f"layers {list(layers)} name a layer twice")
        self.layers = tuple(sorted(resolved))
        self._meta = mix_meta(self._meta, self.layers)

    @property
    def label(self) -> str:
        """``mean:3,4,5``: the combination as tables name it."""
        return f"{self.COMBINE}:{','.join(map(str, self.layers))}"

    def encode(self, inputs, *, task_metadata, hf_split: str, hf_subset: str, prompt_type=None, **kwargs: Any):
        texts = self._texts(inputs, task_metadata, prompt_type)
        total = np.zeros((len(texts), self.model.hidden_size), dtype=np.float64)
        for layer in self.layers:
            total += self.cache.layer_rows(texts, layer)
        vectors = (total / len(self.layers)).astype(np.float32)
        return self._finite(vectors, f"layers {self.label} of {self.model.name} give")


def mix_meta(single: ModelMeta, layers: tuple[int, ...]) -> ModelMeta:
    """``single``'s meta (one layer's) with the layer replaced by the combined layers and how they combine."""
    experiment = {key: value for key, value in (single.experiment_kwargs or {}).items() if key != "layer"}
    experiment = {"layers": list(layers), "combine": LayerMixEncoder.COMBINE, **experiment}
    return single.model_copy(update={"experiment_kwargs": experiment})


def combinations(best: int, pick: int, agreement: pd.Series, n_layers: int) -> dict[str, tuple[int, ...]]:
    """name -> layers: windows of width 3 and 5 around the agreement pick and the best layer, the top 3 by agreement
    (ties to the deeper layer)."""

    def window(centre: int, width: int) -> tuple[int, ...]:
        half = width // 2
        return tuple(range(max(0, centre - half), min(n_layers, centre + half) + 1))

    ranked = sorted(agreement.index, key=lambda layer: (-agreement[layer], -layer))
    return {
        "window3@agreement": window(pick, 3),
        "window5@agreement": window(pick, 5),
        "window3@best": window(best, 3),
        "window5@best": window(best, 5),
        "top3@agreement": tuple(sorted(ranked[:3])),
    }


def main_score(rows: list[dict]) -> float:
    """A unit's main score, subsets and splits averaged as :func:`score_curves` averages them."""
    return float(pd.DataFrame(rows)["main_score"].mean())


def run_rows(run: Path, tasks: str, data_dir: Path) -> list[dict]:
    """Every combination of every task of ``run``, with its single-layer baselines."""
    scored = RunFolder(run).setting(device="cpu")
    source = model_source(scored)
    loaded = load_model(source, scored.config, revision=None if source in PACKAGED_MODELS else scored.revision)
    curves = score_curves(RunFolder(run).scores())
    [agreement] = read_curves(run, AgreementOptions()).curves.values()  # the run's one model
    _, specs = select_tasks(tasks, data_dir)
    out = []
    for task, data, fingerprint in task_units(specs, "test", data_dir):
        name = task.metadata.name
        settings = resolve_settings(loaded, scored.config, data=data, data_fingerprint=fingerprint)
        load_data_once(task)
        state = TaskRandomState.of(task)
        cache = LayerCache(loaded, settings.encode, store_folder(loaded, settings, name))
        cache.fill(texts_mteb_encodes(task))

        def score(encoder, task=task, state=state, data=data) -> float:
            return main_score(score_encoder(encoder, task, state, None, False, data))

        curve, agree = curves[name], agreement[AGREEMENT, task_texts_label(name)].sort_index()
        best, pick = extremum_layer(curve, "max"), extremum_layer(agree, "max")
        for layer in {best, pick}:  # the committed baselines hold only if the same unit scores the same again
            fresh = score(LayerEncoder(cache, layer, settings=settings))
            if abs(fresh - float(curve[layer])) > TOLERANCE:
                raise SystemExit(f"{run.name} {name} layer {layer}: fresh {fresh:.6f} != committed {curve[layer]:.6f}")
        base = {"model": run.name, "task": name, "best_layer": best, "best_score": float(curve[best])}
        base |= {"agreement_layer": pick, "agreement_score": float(curve[pick])}
        for combination, layers in combinations(best, pick, agree, loaded.n_layers).items():
            value = score(LayerMixEncoder(cache, layers, settings=settings))
            row = {"combination": combination, "layers": "-".join(map(str, layers)), "score": value}
            out.append({**base, **row, "delta": 100 * (value - base["best_score"])})
        print(f"{run.name} {name}: best {best}, agreement {pick}, fresh singles equal the committed scores", flush=True)
    return out


def summary(frame: pd.DataFrame) -> str:
    """Per model: how often and by how much the best combination beats the best single layer."""
    lines = [
        "# Layer combinations against the best single layer",
        "",
        "Written by `scripts/layer_mix.py` (`make layer-mix`). Each combination is the mean of the pooled vectors of "
        "its layers (the runs' own vectors and settings), scored by `mteb.evaluate`; `delta` = combination's score - "
        "best single layer's (main score x 100). Windows are cut short at the first and last layer. The agreement "
        "pick is `select --by agreement`'s (mutual k-NN, outliers none, n = 256, k = 10, seed 0, "
        "all-mpnet-base-v2 as reference). Before the committed single-layer scores were used, the best and the "
        "agreement layer of every task were scored again the same way and equal them (to 1e-6).",
        "",
        f"Measured on {frame['task'].nunique()} tasks only: {', '.join(sorted(frame['task'].unique()))}.",
        "",
        "| model | combination | mean delta | beats best single | median delta |",
        "|---|---|---|---|---|",
    ]
    for (model, combination), part in frame.groupby(["model", "combination"], sort=False):
        wins = f"{(part['delta'] > 1e-9).sum()}/{len(part)}"
        lines.append(
            f"| {model} | {combination} | {part['delta'].mean():.2f} | {wins} | {part['delta'].median():.2f} |"
        )
    lines += ["", "Per task, the best combination:", ""]
    lines += ["| model | task | best single (layer) | best combination | layers | delta |", "|---|---|---|---|---|---|"]
    for (model, task), part in frame.groupby(["model", "task"], sort=False):
        top = part.loc[part["delta"].idxmax()]
        lines.append(
            f"| {model} | {task} | {top['best_score']:.4f} ({top['best_layer']}) | {top['combination']} | "
            f"{top['layers']} | {top['delta']:.2f} |"
        )
    top = frame.groupby(["model", "task"])["delta"].max()
    wins = int((top > 1e-9).sum())
    lines += [
        "",
        f"A combination beats the best single layer on {wins} of {len(top)} (model, task) pairs (largest gain "
        f"{top.max():.2f} points), so `run --layers mix:A-B` is not offered: on these tasks the best single layer is "
        "as good or better. The mean is of unnormalised pooled vectors, so layers of larger norm weigh more.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", default=list(RUNS))
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--out", default="results/paper/layer_mix")
    args = parser.parse_args()
    start = time.perf_counter()
    data_dir = data_dir_from_env(None)
    frame = pd.DataFrame([row for run in args.runs for row in run_rows(Path(run), args.tasks, data_dir)])
    frame.to_csv(f"{args.out}.csv", index=False, float_format="%.6f")
    Path(f"{args.out}.md").write_text(summary(frame))
    print(f"{len(frame)} combinations scored in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
