"""LayerEncoder through mteb.evaluate scores exactly like a plain encoder returning the same vectors."""

from __future__ import annotations

import json

import mteb
import numpy as np
import pytest
import torch
from conftest import direct_vectors
from mteb.models.abs_encoder import AbsEncoder

from layer_mteb.common.config import EncodeConfig
from layer_mteb.common.errors import UserError
from layer_mteb.evaluation.encoder import LayerEncoder, model_meta, resolve_settings
from layer_mteb.tasks.catalog import TaskSpec, load_task
from layer_mteb.vectors.store import LayerCache


class PlainEncoder(AbsEncoder):
    """The reference: one text at a time, no batching, no padding, no cache of the code under test. ``seen`` keeps
    each text's definition vectors of every layer (:func:`direct_vectors` computes them all at once), so the encoders
    of a model's layers share one forward pass per text instead of one per text and layer."""

    def __init__(self, loaded, layer, config, seen: dict[str, torch.Tensor] | None = None):
        self.loaded, self.layer, self.config = loaded, layer, config
        self.seen = {} if seen is None else seen
        self._meta = model_meta(loaded, layer, resolve_settings(loaded, config)).model_copy(
            update={"name": "test/plain"}
        )

    @property
    def mteb_model_meta(self):
        return self._meta

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        texts = [t for batch in inputs for t in batch["text"]]
        for text in texts:
            if text not in self.seen:
                self.seen[text] = direct_vectors(self.loaded, text, self.config.readout, self.config.pooling)
        return np.stack([self.seen[t][self.layer].numpy() for t in texts]).astype(np.float32)


def small_clustering_folder(tmp_path, data_dir):
    """A real legacy clustering task (TwentyNewsgroups' class) on labelled Banking77 questions of 4 intents."""
    folder = tmp_path / "TwentyNewsgroupsClustering"
    folder.mkdir()
    keep = {"card_arrival", "lost_or_stolen_card", "exchange_rate", "age_limit"}
    rows = [json.loads(line) for line in (data_dir / "Banking77Classification" / "test.jsonl").open()]
    picked = [r for r in rows if r["label"] in keep][:120]
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in picked))
    return tmp_path


@pytest.mark.parametrize(
    ("task_name", "subsets"),
    [
        ("STS17", ("en-en",)),
        ("TwitterSemEval2015", None),
        # minutes each (a logistic regression per layer, clustering of real texts): run with -m slow
        pytest.param("AmazonCounterfactualClassification", ("en",), marks=pytest.mark.slow),
        pytest.param("TwentyNewsgroupsClustering", None, marks=pytest.mark.slow),
    ],
)
def test_cached_layer_scores_equal_plain_encoder_scores(task_name, subsets, tiny_gpt_neox, data_dir, tmp_path):
    folder = small_clustering_folder(tmp_path, data_dir) if "Clustering" in task_name else data_dir
    task = load_task(TaskSpec(task_name, subsets=subsets), "test", folder)
    task.load_data()
    if task_name == "AmazonCounterfactualClassification":
        task.dataset["en"]["test"] = task.dataset["en"]["test"].select(range(200))
    config = EncodeConfig(batch_size=16)
    settings = resolve_settings(tiny_gpt_neox, config)
    cache = LayerCache(tiny_gpt_neox, settings.encode)
    seen: dict[str, torch.Tensor] = {}
    for layer in range(tiny_gpt_neox.n_layers + 1):
        cached = mteb.evaluate(LayerEncoder(cache, layer, settings=settings), task, cache=None, show_progress_bar=False)
        plain = mteb.evaluate(
            PlainEncoder(tiny_gpt_neox, layer, config, seen), task, cache=None, show_progress_bar=False
        )
        got, want = cached.task_results[0].get_score(), plain.task_results[0].get_score()
        assert got == pytest.approx(want, abs=1e-6), f"layer {layer}"
    assert len(cache) > 0


def test_meta_keeps_layers_and_settings_apart(tiny_gpt_neox):
    a = LayerEncoder.from_model(tiny_gpt_neox, 1).mteb_model_meta
    b = LayerEncoder.from_model(tiny_gpt_neox, 2).mteb_model_meta
    c = LayerEncoder.from_model(tiny_gpt_neox, 1, config=EncodeConfig(readout="raw")).mteb_model_meta
    assert a.name == "test/tiny-gpt_neox"
    assert len({a.experiment_name, b.experiment_name, c.experiment_name}) == 3
    assert a.experiment_kwargs["layer"] == 1 and c.experiment_kwargs["readout"] == "raw"


def test_negative_layer_counts_from_the_end_and_out_of_range_explains(tiny_gpt_neox):
    assert LayerEncoder.from_model(tiny_gpt_neox, -1).layer == tiny_gpt_neox.n_layers
    with pytest.raises(UserError, match=r"hidden states 0\.\.2"):
        LayerEncoder.from_model(tiny_gpt_neox, 3)


def test_an_encoder_is_a_view_of_a_cache_and_never_loads_a_model(tiny_gpt_neox):
    """Building one from a name is the factory's job; a view whose settings are not its vectors' is refused."""
    settings = resolve_settings(tiny_gpt_neox, EncodeConfig())
    with pytest.raises(TypeError, match="from_model"):
        LayerEncoder("minilm-l6", 1, settings=settings)
    open_attention = LayerCache(tiny_gpt_neox, EncodeConfig())  # the model's own attention, named by the settings
    assert LayerEncoder(open_attention, 1, settings=settings).config.attention == "causal"
    with pytest.raises(ValueError, match="made with"):
        LayerEncoder(LayerCache(tiny_gpt_neox, EncodeConfig(readout="raw")), 1, settings=settings)
