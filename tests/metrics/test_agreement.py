"""Layer agreement with a reference embedding (mutual k-NN, linear CKA), TwoNN intrinsic dimension and its layer
rules, and the per-task curves of a run written to ``agreement.csv``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import save_tiny_model, write_tiny_gpt2_scores

from layer_mteb.common.errors import UserError
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics.agreement import AGREEMENT_COLUMNS, AGREEMENT_FILE, AGREEMENT_TABLE, ID_METRIC, curves
from layer_mteb.metrics.agreement.compute import agreement_curves, references_for, sample_texts
from layer_mteb.metrics.agreement.intrinsic_dimension import ID_SELECTORS, id_pick, two_nn
from layer_mteb.metrics.agreement.measures import OUTLIERS, agreement_curve, linear_cka, mutual_knn, treat_outliers
from layer_mteb.metrics.agreement.reference import default_reference, load_reference


def _points(n: int, d: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).normal(size=(n, d)))


def test_mutual_knn_of_a_space_with_itself_is_one():
    x = _points(200, 16)
    assert mutual_knn(x, x, k=10).item() == 1.0
    assert mutual_knn(x, 3.0 * x, k=10).item() == 1.0  # cosine: the scale of a space does not matter


def test_mutual_knn_of_shuffled_rows_is_chance():
    n, k = 1000, 10
    x = _points(n, 32)
    values = [mutual_knn(x, x[torch.from_numpy(np.random.default_rng(s).permutation(n))], k).item() for s in range(3)]
    # a random pairing shares each neighbour with probability k / (n - 1)
    assert np.mean(values) == pytest.approx(k / (n - 1), abs=0.006)


def test_mutual_knn_counts_shared_neighbours_exactly():
    # two hand-made spaces whose nearest neighbours (by angle) agree for half of the rows
    a = torch.tensor([[1.0, 0.0], [1.0, 0.1], [1.0, 0.3], [1.0, 0.7]], dtype=torch.float64)
    b = torch.tensor([[1.0, 0.0], [1.0, 0.1], [1.0, 0.7], [1.0, 0.3]], dtype=torch.float64)
    # nearest: a -> 1, 0, 1, 2 ; b -> 1, 0, 3, 1 (rows 2 and 3 swapped): rows 0, 1 agree, rows 2, 3 do not
    assert mutual_knn(a, b, k=1).item() == pytest.approx(0.5)


def test_cka_is_invariant_to_rotation_and_isotropic_scaling():
    x, y = _points(100, 20, seed=1), _points(100, 30, seed=2)
    y = y + 0.5 * torch.cat([x, x[:, :10]], dim=1)
    rotation, _ = torch.linalg.qr(_points(20, 20, seed=3))
    base = linear_cka(x, y).item()
    assert linear_cka(x @ rotation, y).item() == pytest.approx(base, abs=1e-12)
    assert linear_cka(7.5 * x, 0.01 * y).item() == pytest.approx(base, abs=1e-12)
    assert linear_cka(x, x).item() == pytest.approx(1.0, abs=1e-12)
    assert 0.05 < base < 0.95


def test_the_layer_that_holds_the_reference_wins():
    n, d, hidden, target = 300, 24, 48, 3
    reference = _points(n, d, seed=10)
    mixing = _points(d, hidden, seed=11)
    layers = torch.stack([_points(n, hidden, seed=20 + layer) for layer in range(6)])
    layers[target] = reference @ mixing + 0.3 * _points(n, hidden, seed=30)
    layers[5] += 0.2 * (reference @ mixing)  # a weaker echo elsewhere must not win
    for metric in ("mknn", "cka"):
        for outlier in OUTLIERS:
            curve = agreement_curve(layers, reference, metric, outlier, k=10)
            assert int(np.argmax(curve)) == target, (metric, outlier, curve)


def test_outlier_treatments():
    x = _points(50, 8)
    x[:, 0] *= 1000.0  # a rogue dimension
    standard = treat_outliers(x, "standardize")
    assert torch.allclose(standard.mean(dim=0), torch.zeros(8, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(standard.std(dim=0), torch.ones(8, dtype=torch.float64))
    clamped = treat_outliers(x, "clamp")
    assert torch.allclose(clamped.norm(dim=1), torch.ones(50, dtype=torch.float64))
    limit = np.quantile(x.abs().numpy(), 0.95)
    raw = treat_outliers(x, "none")
    assert torch.equal(raw, x)
    # every value beyond the quantile was cut to it before the rows were normalised
    norms = torch.clamp(x, -limit, limit).norm(dim=1, keepdim=True)
    assert torch.allclose(clamped * norms, torch.clamp(x, -limit, limit))
    with pytest.raises(ValueError):
        treat_outliers(x, "winsor")  # type: ignore[arg-type]


@pytest.mark.parametrize("manifold", ["plane", "swiss_roll"])
def test_two_nn_finds_the_dimension_of_a_manifold(manifold):
    rng = np.random.default_rng(0)
    n = 3000
    if manifold == "plane":
        low = rng.uniform(size=(n, 2))
    else:
        t = 1.5 * np.pi * (1 + 2 * rng.uniform(size=n))
        low = np.column_stack([t * np.cos(t), 20 * rng.uniform(size=n), t * np.sin(t)])
    embedding, _ = np.linalg.qr(rng.normal(size=(50, low.shape[1])))
    points = low @ embedding.T  # a random isometric embedding in 50-D
    assert two_nn(points) == pytest.approx(2.0, rel=0.1)
    assert two_nn(rng.normal(size=(n, 5))) == pytest.approx(5.0, rel=0.1)


def test_id_selectors_on_a_curve_with_a_peak_and_a_valley():
    #          layer: 0   1   2   3   4   5   6   7   8
    curve = np.array([9, 10, 14, 20, 16, 12, 13, 11, 15], dtype=float)
    assert id_pick(curve, "id_after_peak") == 4  # peak at 3
    assert id_pick(curve, "id_min") == 1  # layer 0 (9) is never picked
    assert id_pick(curve, "id_valley_after_peak") == 5  # first local minimum after the peak
    rising = np.arange(10, dtype=float)
    assert [id_pick(rising, name) for name in ID_SELECTORS] == [9, 1, 9]
    noisy = np.array([5, 6, 5.9, 8, 12, 11, 9, 10], dtype=float)  # the wiggle at layer 1 is no peak (too low)
    assert id_pick(noisy, "id_valley_after_peak") == 6
    with pytest.raises(ValueError):
        id_pick(curve, "id_max")  # type: ignore[arg-type]


def test_samples_are_seeded_and_nest(data_dir):
    first = sample_texts("STS12", 64, seed=0, data_dir=data_dir)
    assert first == sample_texts("STS12", 64, seed=0, data_dir=data_dir)
    assert sample_texts("STS12", 16, seed=0, data_dir=data_dir) == first[:16]
    assert sample_texts("STS12", 64, seed=1, data_dir=data_dir) != first
    assert len(set(first)) == 64
    assert len(sample_texts("BIOSSES", 10_000, data_dir=data_dir)) == 183  # all of a small task's texts


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, bert_tokenizer):
    """A run folder whose scores.csv says a tiny saved GPT-2 made its scores (what agreement reads)."""
    folder = save_tiny_model("gpt2", bert_tokenizer, tmp_path_factory.mktemp("models") / "tiny-gpt2")
    run = tmp_path_factory.mktemp("runs") / "tiny"
    run.mkdir()
    settings = {"readout": "final_norm", "pooling": "mean", "max_length": 64, "dtype": "float32"}
    row = {"model": "local/tiny-gpt2", "revision": "r1", **settings, "attention": "causal", "normalize": False}
    unit = {"task": "BIOSSES", "subset": "default", "split": "test"}  # a scores.csv row's key, as a run writes it
    pd.DataFrame([{**row, "layer": 0, "n_layers": 2, **unit, "main_score": 0.1}]).to_csv(
        run / "scores.csv", index=False
    )
    return run, folder


def test_curves_of_a_run_are_written_and_reproducible(tiny_run, data_dir):
    run, folder = tiny_run
    options = {"n": 40, "reference": "minilm-l6", "model": str(folder), "data_dir": data_dir}
    first = agreement_curves(run, "BIOSSES", **options)
    stored = RunFolder(run).read(AGREEMENT_TABLE)
    assert list(stored.columns) == AGREEMENT_COLUMNS
    assert len(stored) == len(first) == 3 * (2 * len(OUTLIERS) + 1)  # layers x (mknn, cka per outlier; ID)
    assert set(stored["metric"]) == {"mknn", "cka", ID_METRIC}
    assert (stored["n"] == 40).all() and set(stored["reference"]) == {"sentence-transformers/all-MiniLM-L6-v2", "-"}
    assert stored["value"].notna().all()
    again = agreement_curves(run, "BIOSSES", **options)  # vectors now come from the stores; same curve, same file
    pd.testing.assert_frame_equal(first, again)
    assert len(RunFolder(run).read(AGREEMENT_TABLE)) == len(stored)
    chosen = curves(stored, metric="mknn", outlier="clamp", n=40, k=10, seed=0)
    assert list(chosen) == ["BIOSSES"] and list(chosen["BIOSSES"].index) == [0, 1, 2]
    with pytest.raises(ValueError, match="several curves"):
        curves(stored, metric="mknn")
    other_seed = agreement_curves(run, "BIOSSES", **options, seed=1, write=False)
    assert not np.allclose(other_seed["value"], first["value"])
    both = agreement_curves(run, ["STS12", "BIOSSES"], **options, write=False)  # one model and reference load
    pd.testing.assert_frame_equal(both[both["task"] == "BIOSSES"].reset_index(drop=True), first)
    assert set(both["task"]) == {"STS12", "BIOSSES"} and len(RunFolder(run).read(AGREEMENT_TABLE)) == len(stored)


def test_a_reference_must_load_and_differ_from_the_model(tmp_path):
    with pytest.raises(UserError, match="neither a packaged model"):
        load_reference(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="cannot load reference") as err:
        load_reference(str(tmp_path / "empty"))
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="is the model under test"):
        references_for("sentence-transformers/all-mpnet-base-v2", "mpnet-base")
    assert default_reference("sentence-transformers/all-mpnet-base-v2") == "minilm-l6"
    mpnet_installed = _installed("mpnet-base")
    assert default_reference("google/gemma-3-270m") == ("mpnet-base" if mpnet_installed else "minilm-l6")
    with pytest.raises(UserError, match=r"no scores\.csv"):
        RunFolder(tmp_path).setting()
    with pytest.raises(UserError, match="at least one task"):
        agreement_curves(tmp_path, [])


@pytest.mark.parametrize("offline", [True, False])
def test_with_no_reference_installed_the_hub_serves_one_when_it_is_reachable(monkeypatch, offline):
    """A machine with neither packaged reference installed (faked: the package lookup says so) takes
    all-mpnet-base-v2 from the hub when the hub is reachable, and says in one line what to install when it is not;
    a hub id given offline is refused before anything loads."""
    from huggingface_hub import constants

    from layer_mteb.metrics.agreement import reference

    def not_installed(name):
        raise UserError(f"{name} is not installed")

    monkeypatch.setattr(reference, "packaged_distributions", not_installed)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    if offline:
        with pytest.raises(UserError, match="no reference encoder is installed"):
            default_reference("google/gemma-3-270m")
        with pytest.raises(UserError, match="nor a hub id with the hub reachable"):
            load_reference("sentence-transformers/all-mpnet-base-v2")
    else:
        assert default_reference("google/gemma-3-270m") == "sentence-transformers/all-mpnet-base-v2"
        assert reference.reference_name("sentence-transformers/all-mpnet-base-v2") == (
            "sentence-transformers/all-mpnet-base-v2"
        )


def _installed(name: str) -> bool:
    from layer_mteb.model.names import packaged_distributions

    try:
        packaged_distributions(name)
    except UserError:
        return False
    return True


def test_select_by_agreement_and_auto_pick_the_layer_of_most_agreement(tiny_run, data_dir, tmp_path, capsys):
    """``select --by agreement`` computes the run's curves once and picks each task's layer of most agreement (ties
    deeper); ``--by auto`` on this base model then uses those curves; a reference that cannot load is one line,
    exit 2, and writes nothing."""
    from layer_mteb.analysis.selection.agreement import AgreementOptions
    from layer_mteb.analysis.selection.picks import select_layers
    from layer_mteb.cli import main
    from layer_mteb.common.run_folder import RunFolder

    _, folder = tiny_run
    run = write_tiny_gpt2_scores(tmp_path / "run")
    bad = ["select", "--run", str(run), "--by", "agreement", "--model", str(folder), "--sample", "40"]
    assert main([*bad, "--agreement-with", str(tmp_path / "no-such-encoder")]) == 2
    assert "neither a packaged model" in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == ["scores.csv"]
    argv = [*bad, "--agreement-with", "minilm-l6", "--data-dir", str(data_dir)]
    assert main(argv) == 0
    curve = curves(RunFolder(run).read(AGREEMENT_TABLE), metric="mknn", outlier="none", n=40, k=10, seed=0)["BIOSSES"]
    best = int(curve[curve >= curve.max() - 1e-9].index.max())
    picks = pd.read_csv(run / "selection.agreement.csv")
    assert picks.query("selector == 'agreement' and task == 'BIOSSES'")["chosen_layer"].tolist() == [best]
    stored = (run / AGREEMENT_FILE).read_text()
    assert main(argv) == 0 and (run / AGREEMENT_FILE).read_text() == stored  # the stored curves are read back
    assert main(["select", "--run", str(run), "--by", "auto", "--sample", "40", "--agreement-with", "minilm-l6"]) == 0
    assert "the layer of most agreement with sentence-transformers/all-MiniLM-L6-v2" in capsys.readouterr().out
    auto = pd.read_csv(run / "selection.auto.csv").query("selector == 'auto' and task == 'BIOSSES'")
    assert auto["chosen_layer"].tolist() == [best]
    id_curve = curves(RunFolder(run).read(AGREEMENT_TABLE), metric=ID_METRIC, n=40, seed=0)["BIOSSES"]
    for name in ID_SELECTORS:  # the published intrinsic-dimension selectors: the same engine, from Python
        select_layers(run, by=name, agreement=AgreementOptions(n=40))
        picked = pd.read_csv(run / f"selection.{name}.csv").query(f"selector == '{name}' and task == 'BIOSSES'")
        assert picked["chosen_layer"].tolist() == [id_pick(id_curve.to_numpy(), name)]


def test_the_selection_only_reads_curves_and_names_the_stage_that_computes_them(tmp_path):
    """The selection engine computes nothing: a run without the asked curves has them named by ``missing_curves``
    (what the CLI hands to the curves' stage), and a pick that reads none is one line naming that stage."""
    from layer_mteb.analysis.selection.agreement import AgreementOptions, missing_curves
    from layer_mteb.analysis.selection.picks import select_layers

    settings = {"readout": "final_norm", "pooling": "mean", "max_length": 64, "dtype": "float32", "normalize": False}
    rows = [
        {"model": "local/tiny-gpt2", "revision": "r1", **settings, "attention": "causal", "layer": layer}
        | {"n_layers": 1, "task": task, "task_type": "STS", "subset": "default", "split": "test", "main_score": 0.5}
        for task in ("STS12", "BIOSSES")
        for layer in range(2)
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    assert missing_curves(tmp_path, AgreementOptions()) == ["BIOSSES", "STS12"]
    with pytest.raises(UserError, match="computes them first"):
        select_layers(tmp_path, by="agreement")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.csv"]


def test_a_causal_model_read_at_its_first_token_has_curves_without_an_intrinsic_dimension(
    tmp_path, data_dir, bert_tokenizer
):
    """Every text starts with the same token, so a causal model pooled from its first token gives every text one
    vector (up to float noise): agreement and CKA are still written, the TwoNN ID has nothing to fit (NaN, or 0 on
    noise; no ID pick), and the computation ends in its table, not a traceback."""
    from layer_mteb.analysis.selection.agreement import AgreementOptions
    from layer_mteb.analysis.selection.picks import select_layers

    run, folder = tmp_path / "run", save_tiny_model("gpt2", bert_tokenizer, tmp_path / "tiny-gpt2")
    run.mkdir()
    settings = {"readout": "final_norm", "pooling": "first", "max_length": 64, "dtype": "float32", "normalize": False}
    row = {"model": "local/tiny-gpt2", "revision": "r1", **settings, "attention": "causal", "task": "BIOSSES"}
    pd.DataFrame([{**row, "layer": 0, "n_layers": 2, "subset": "default", "split": "test", "main_score": 0.1}]).to_csv(
        run / "scores.csv", index=False
    )
    written = agreement_curves(run, "BIOSSES", n=40, reference="minilm-l6", model=str(folder), data_dir=data_dir)
    ids = written[written["metric"] == ID_METRIC]
    assert len(ids) == 3 and ids["value"].isna().any() and ids["value"].fillna(0).abs().max() < 1e-6  # none, or 0
    assert written.loc[written["metric"] == "mknn", "value"].notna().all()
    assert (
        select_layers(run, by="id_min", agreement=AgreementOptions(n=40), write=False)
        .query("selector == 'id_min'")
        .empty
    )


def test_a_stored_curve_the_run_lacks_is_missing_not_an_empty_pick(tiny_run, data_dir, tmp_path):
    """A run whose curves were computed before a curve existed lacks it: it counts as missing for a selector that
    reads it (a handed source computes it), and without a source the pick is one error line, never an empty table."""
    from layer_mteb.analysis.selection.agreement import AgreementOptions, missing_curves
    from layer_mteb.analysis.selection.picks import select_layers

    run, folder = tiny_run
    agreement_curves(run, "BIOSSES", n=40, reference="minilm-l6", model=str(folder), data_dir=data_dir)
    older = tmp_path / "older"
    older.mkdir()
    (older / "scores.csv").write_bytes((run / "scores.csv").read_bytes())
    table = RunFolder(run).read(AGREEMENT_TABLE)
    RunFolder(older).update(AGREEMENT_TABLE, table[table["metric"] != ID_METRIC])
    options = AgreementOptions(n=40)
    assert missing_curves(older, options) == [] and missing_curves(older, options, [ID_METRIC]) == ["BIOSSES"]
    with pytest.raises(UserError, match=f"has no {ID_METRIC} curves"):
        select_layers(older, by="id_min", agreement=options, write=False)
    select_layers(run, by="id_min", agreement=options, write=False)  # the run that holds the curve: no error
