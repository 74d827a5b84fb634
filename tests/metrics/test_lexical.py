"""Lexical references for agreement (TF-IDF, TF-IDF + LSA, BM25 fitted on the sampled texts alone): a layer that is
a noisy linear map of the texts' TF-IDF vectors is the one picked; picks are seeded; a sample with no lexical
geometry is one error line through the CLI; ``select --by agreement --agreement-with tfidf-lsa`` reads the curves
through the one selection engine."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import save_tiny_model, write_tiny_gpt2_scores

from layer_mteb.analysis.rules import extremum_layer
from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics.agreement import AGREEMENT_TABLE, curves
from layer_mteb.metrics.agreement.compute import sample_texts
from layer_mteb.metrics.agreement.lexical import LEXICAL_KINDS, LexicalSpec, lexical_vectors, parse_lexical
from layer_mteb.metrics.agreement.measures import agreement_curve


def _synthetic_layers(texts: list[str], k: int, n_layers: int = 6, seed: int = 0) -> torch.Tensor:
    """[n_layers + 1, n, 128]: layer ``k`` a random linear map of the texts' TF-IDF vectors plus noise, every other
    layer noise of the same scale."""
    rng = np.random.default_rng(seed)
    tfidf = lexical_vectors(texts, LexicalSpec("tfidf"), seed)
    mapped = tfidf @ rng.normal(size=(tfidf.shape[1], 128))
    scale = mapped.std()
    layers = rng.normal(scale=scale, size=(n_layers + 1, len(texts), 128))
    layers[k] = mapped + rng.normal(scale=0.3 * scale, size=mapped.shape)
    return torch.from_numpy(layers)


@pytest.mark.parametrize("kind", LEXICAL_KINDS)
@pytest.mark.parametrize("k", [2, 5])
def test_the_layer_that_maps_the_texts_tfidf_is_picked(data_dir, kind, k):
    texts = sample_texts("STS12", 200, seed=0, data_dir=data_dir)
    layers = _synthetic_layers(texts, k)
    values = agreement_curve(layers, lexical_vectors(texts, parse_lexical(kind), 0), "mknn", "none", 10)
    curve = pd.Series(values)
    assert extremum_layer(curve, "max") == k
    others = curve.drop(k)
    assert curve[k] > 2 * others.max()  # noise layers stay near chance, 10 / 199


def test_same_seed_same_vectors_and_picks(data_dir):
    texts = sample_texts("STSBenchmark", 128, seed=3, data_dir=data_dir)
    spec = parse_lexical("tfidf-lsa")
    first, again = lexical_vectors(texts, spec, 7), lexical_vectors(texts, spec, 7)
    np.testing.assert_array_equal(first, again)
    assert first.shape == (128, 100)
    layers = _synthetic_layers(texts, 3, seed=1)
    picks = [extremum_layer(pd.Series(agreement_curve(layers, lexical_vectors(texts, spec, 7))), "max") for _ in "ab"]
    assert picks == [3, 3]


def test_lsa_vectors_do_not_follow_the_blas_threads(data_dir):
    """64 texts at 100 dimensions: the randomized SVD near the sample's rank gave other vectors with two BLAS threads
    than with one until it was pinned to one."""
    from threadpoolctl import threadpool_limits

    texts = sample_texts("STS12", 64, seed=0, data_dir=data_dir)
    spec = parse_lexical("tfidf-lsa")
    with threadpool_limits(limits=1):
        one = lexical_vectors(texts, spec, 0)
    with threadpool_limits(limits=2):
        two = lexical_vectors(texts, spec, 0)
    np.testing.assert_array_equal(one, two)


def test_names_settings_and_revisions():
    assert parse_lexical("tfidf-lsa:dims=50").name == "tfidf-lsa:dims=50"
    assert parse_lexical("tfidf-lsa:dims=100:ngrams=2").name == "tfidf-lsa"  # the defaults are not spelled out
    assert parse_lexical("bm25:ngrams=1") == LexicalSpec("bm25", ngrams=1)
    assert "TruncatedSVD min(100 n_terms-1)" in parse_lexical("tfidf-lsa").revision
    assert parse_lexical("tfidf").revision.startswith("scikit-learn-")
    assert parse_lexical("bm25:k1=2").name == "bm25:k1=2" and parse_lexical("bm25:b=0").name == "bm25:b=0"
    assert parse_lexical("bm25:k1=1.2:b=0.75").name == "bm25"  # the defaults again
    assert parse_lexical("bm25").revision.endswith("BM25 k1=1.2 b=0.75")  # the study's rows keep their revision
    assert parse_lexical("bm25:k1=0.5:b=1").revision.endswith("BM25 k1=0.5 b=1")
    for bad in ("tfidf:dims=50", "tfidf-lsa:dims=0", "tfidf:k1=2", "bm25:b=2", "bm25:k1=-1", "bm25:k1=x", "lsa"):
        with pytest.raises(UserError):
            parse_lexical(bad)
    # LSA never asks for more dimensions than the sample has terms less one
    assert (
        lexical_vectors(["red apple pie", "green apple tart", "red pie"], parse_lexical("tfidf-lsa"), 0).shape[1] < 10
    )


def test_bm25_weighting_follows_its_formula():
    """With k1 = 0 a term's BM25 weight is its idf log(1 + (N - df + 0.5) / (df + 0.5)) wherever it occurs, whatever
    its count and the text's length; with b = 0 the length does not matter, with b = 1 it does."""
    texts = ["red apple red apple pie", "green apple", "red pie and green tart", "tart tart tart"]
    words = sorted({w for t in texts for w in t.split()})
    present = np.array([[w in t.split() for w in words] for t in texts], dtype=float)
    idf = np.log(1 + (len(texts) - present.sum(axis=0) + 0.5) / (present.sum(axis=0) + 0.5))
    expected = present * idf
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    got = lexical_vectors(texts, parse_lexical("bm25:k1=0:ngrams=1"))
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    counts = np.array([[t.split().count(w) for w in words] for t in texts], dtype=float)
    for b in (0.0, 1.0):
        lengths = counts.sum(axis=1, keepdims=True)
        tf = counts * 3.0 / (counts + 2.0 * (1 - b + b * lengths / lengths.mean()))
        expected = tf * idf
        expected /= np.linalg.norm(expected, axis=1, keepdims=True)
        got = lexical_vectors(texts, parse_lexical(f"bm25:k1=2:b={b:g}:ngrams=1"))
        np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("texts", [[], ["", " "], ["yes"] * 20, [f"word{i}" for i in range(30)]])
def test_a_sample_without_lexical_geometry_is_one_error(texts):
    with pytest.raises(UserError, match="share no word") as err:
        lexical_vectors(texts, parse_lexical("tfidf"))
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_select_by_lexical_agreement_and_auto_through_the_cli(tmp_path, data_dir, bert_tokenizer, capsys):
    """``--agreement-with tfidf-lsa`` writes its curves to agreement.csv (its settings as the revision) and picks each
    task's layer of most agreement; ``auto`` on this base model, with no trained reference's curves, keeps its rule
    and says the lexical reference was not adopted (the study), and reads the lexical curves when they are named."""
    from layer_mteb.cli import main

    folder = save_tiny_model("gpt2", bert_tokenizer, tmp_path / "tiny-gpt2")
    run = write_tiny_gpt2_scores(tmp_path / "run")
    argv = ["select", "--run", str(run), "--by", "agreement", "--model", str(folder), "--sample", "40"]
    assert main([*argv, "--agreement-with", "tfidf-lsa"]) == 0
    stored = RunFolder(run).read(AGREEMENT_TABLE)
    lexical = stored[stored["reference"] == "tfidf-lsa"]
    assert len(lexical) and lexical["reference_revision"].str.contains("TruncatedSVD").all()
    curve = curves(stored, reference="tfidf-lsa", metric="mknn", outlier="none", n=40, k=10, seed=0)["BIOSSES"]
    picks = pd.read_csv(run / "selection.agreement.csv").query("selector == 'agreement' and task == 'BIOSSES'")
    assert picks["chosen_layer"].tolist() == [extremum_layer(curve, "max")]
    text = (run / "agreement.csv").read_text()
    assert main([*argv, "--agreement-with", "tfidf-lsa"]) == 0 and (run / "agreement.csv").read_text() == text
    capsys.readouterr()
    assert main(["select", "--run", str(run), "--by", "auto", "--sample", "40"]) == 0  # the study: not adopted
    out = capsys.readouterr().out
    assert "no agreement curves in this run" in out and "studied for auto and not adopted" in out
    auto = ["select", "--run", str(run), "--by", "auto", "--sample", "40", "--agreement-with", "tfidf-lsa"]
    assert main(auto) == 0  # named, the lexical curves are read like any reference's
    assert "the layer of most agreement with tfidf-lsa (scikit-learn-" in capsys.readouterr().out
    picked = pd.read_csv(run / "selection.auto.csv").query("selector == 'auto' and task == 'BIOSSES'")
    assert picked["chosen_layer"].tolist() == picks["chosen_layer"].tolist()


def test_a_one_word_sample_is_one_line_through_the_cli(tmp_path, bert_tokenizer, capsys):
    """A task whose texts are single words has no lexical geometry: one line, exit 2, nothing written."""
    from layer_mteb.cli import main

    folder = save_tiny_model("gpt2", bert_tokenizer, tmp_path / "tiny-gpt2")
    one_word = tmp_path / "data" / "BIOSSES"
    one_word.mkdir(parents=True)
    pairs = [{"sentence1": f"alpha{i}", "sentence2": f"beta{i}", "score": 1.0} for i in range(30)]
    (one_word / "test.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    bare = write_tiny_gpt2_scores(tmp_path / "bare" / "run")
    (bare / "run.json").write_text(json.dumps({"tasks": [{"task": "BIOSSES", "data_dir": str(one_word.parent)}]}))
    capsys.readouterr()
    bad = ["select", "--run", str(bare), "--by", "agreement", "--model", str(folder), "--sample", "40"]
    assert main([*bad, "--agreement-with", "tfidf"]) == 2
    err = capsys.readouterr().err.strip()
    assert "share no word" in err and len(err.splitlines()) == 1
    assert not (bare / "agreement.csv").exists()
