"""What the authors' metric arithmetic changes (docs/selection.md, "The paper's formulas and the authors' code"):
every WikiText metric of the committed runs' models under ``--arithmetic paper`` and ``--arithmetic authors``, side
by side against the committed scores: each metric's layer ordering (Kendall τ between the two curves), its pick
(min/max as selection reads it) and its correlations with the mean score (dCor / Spearman / Kendall).

    python scripts/arithmetic_comparison.py compute results/minilm-l6 [...] --out results/paper/arithmetic.csv
    python scripts/arithmetic_comparison.py table [--out results/paper/arithmetic.csv] > table.md

``compute`` loads each run's model with the run's own settings and measures what the run's ``metrics.csv`` was
measured with (``make results``: 200 WikiText prompts, 4 views × 32 prompts; a decoder's metrics on the raw residual
stream, which selection pairs with its final-norm scores, an encoder's on its one readout) under both arithmetics
from one forward pass over the prompts and one over their views, and merges the rows into ``--out`` (one model at a
time; MiniLM about 3 min, the decoders 9–28 min on two busy cores). ``table`` reads
only that file and the runs' ``scores.csv``: picks and correlations through the package's own selection and
correlation (1000 permutations, seed 0), so it is remade without a model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from scipy.stats import kendalltau

from layer_mteb.analysis.selection.correlation import correlate
from layer_mteb.analysis.selection.curves import metric_curves
from layer_mteb.analysis.selection.picks import select_layers
from layer_mteb.common.config import ARITHMETICS
from layer_mteb.common.run_folder import RunFolder
from layer_mteb.metrics import DIRECTIONS, METRICS_TABLE

OUT = Path("results/paper/arithmetic.csv")
#: the committed runs' WikiText metric sizes (Makefile, ``results/%/correlation.csv``)
SIZES = {"n_prompts": 200, "views": 4, "augment_prompts": 32}
TEXTS = "wikitext"
#: the architectures whose last hidden state passed a final norm: their metrics are measured raw, as selection reads
DECODER_READOUT = "raw"


def compute(runs: list[Path], out: Path, data_dir: str) -> None:
    """Every WikiText metric of each run's model under both arithmetics, merged into ``out``."""
    from dataclasses import replace

    from layer_mteb.model.loading import load_model

    for run in runs:
        folder = RunFolder(run)
        setting = folder.setting(device="cpu")
        stored = folder.read(METRICS_TABLE)
        readouts = set(stored.loc[stored["texts"] == TEXTS, "readout"])
        config = replace(setting.config, readout=DECODER_READOUT if DECODER_READOUT in readouts else "final_norm")
        print(f"{run.name}: both arithmetics, readout {config.readout}", file=sys.stderr, flush=True)
        frame = both_arithmetics(load_model(setting.model, config), config, data_dir)
        held = pd.read_csv(out) if out.is_file() else frame.iloc[:0]
        merged = METRICS_TABLE.tidy(pd.concat([held, frame], ignore_index=True))
        merged = merged.drop_duplicates([*METRICS_TABLE.key, "metric", "layer"], keep="last")
        out.parent.mkdir(parents=True, exist_ok=True)
        METRICS_TABLE.tidy(merged).to_csv(out, index=False, float_format="%.10g")


def both_arithmetics(model, config, data_dir: str) -> pd.DataFrame:
    """``compute_metrics`` under each arithmetic, from one forward pass over the prompts and one over their views
    (each arithmetic's observer sees the same batches): the decoders' passes are most of the cost."""
    from layer_mteb.metrics import runner
    from layer_mteb.metrics.metric_settings import MetricSettings
    from layer_mteb.model.attention import with_model_attention
    from layer_mteb.model.forward import encode_all_layers

    config = with_model_attention(config, model)
    settings = {a: MetricSettings(**SIZES, arithmetic=a) for a in ARITHMETICS}
    source = runner._source(TEXTS, model, settings["paper"], data_dir)
    rows: list[dict] = []
    adders = {a: runner._row_adder(rows, model, config, source, s) for a, s in settings.items()}
    observers = {a: runner.TokenMetrics(model.n_layers + 1, len(source.texts), s) for a, s in settings.items()}

    def observe(*batch) -> None:
        for observer in observers.values():
            observer(*batch)

    pooled, _ = encode_all_layers(model, source.texts, config, progress=False, on_batch=observe)
    for arithmetic, observer in observers.items():
        for name, per_layer in observer.summary().items():
            for layer, entry in enumerate(per_layer):
                if entry is not None:
                    adders[arithmetic](layer, name, *entry)
        runner._dataset_metrics(pooled, settings[arithmetic], adders[arithmetic])
    views = runner.view_vectors(model, config, settings["paper"], source, False)
    for arithmetic in ARITHMETICS:
        runner._view_metrics(views, settings[arithmetic], adders[arithmetic])
    return runner.tidy_metrics(rows)


def table(runs: list[Path], out: Path) -> str:
    """The side-by-side markdown: per model and metric, the ordering change, both picks, both correlations."""
    metrics = METRICS_TABLE.tidy(pd.read_csv(out))
    lines = [
        "| model | metric | median Δ | τ | pick paper → authors (score) | dCor | Spearman | Kendall |",
        "|---|---|---|---|---|---|---|---|",
    ]
    moved = total = 0
    for run in runs:
        scores = RunFolder(run).scores()
        model = str(scores["model"].iloc[0])
        own = metrics[metrics["model"] == model]
        if own.empty:
            continue
        picks, correlations, curves = {}, {}, {}
        for arithmetic in ARITHMETICS:
            part = own[own["arithmetic"] == arithmetic]
            curves[arithmetic] = metric_curves(part)
            chosen = select_layers(scores=scores, metrics=part, write=False)
            chosen = chosen[(chosen["task"] == "mean") & (chosen["texts"] == TEXTS)]
            picks[arithmetic] = {
                row.selector: (row.chosen_layer, row.chosen_score) for row in chosen.itertuples(index=False)
            }
            found = correlate(scores=scores, metrics=part)
            found = found[(found["task"] == "mean") & (found["texts"] == TEXTS)]
            correlations[arithmetic] = {(r.metric, r.method): r.statistic for r in found.itertuples()}
        for metric in DIRECTIONS:
            key = (metric, TEXTS)
            if key not in curves["paper"] or key not in curves["authors"]:
                continue
            paper, authors = curves["paper"][key], curves["authors"][key]
            authors = authors.reindex(paper.index)
            tau = kendalltau(paper, authors).statistic
            change = ((authors - paper).abs() / paper.abs()).median()
            before, after = (picks[a].get(metric) for a in ARITHMETICS)
            total += 1
            moved += before[0] != after[0]
            pick = f"{before[0]} → {after[0]} ({100 * before[1]:.1f} → {100 * after[1]:.1f})"
            if before[0] == after[0]:
                pick = f"{before[0]} = {after[0]} ({100 * before[1]:.1f})"
            cells = [
                " → ".join(f"{correlations[a].get((metric, method), float('nan')):+.2f}" for a in ARITHMETICS)
                for method in ("dcor", "spearman", "kendall")
            ]
            row = [model.split("/")[-1], metric, f"{100 * change:.0f} %", f"{tau:+.2f}", pick, *cells]
            lines.append(f"| {' | '.join(row)} |")
    lines.append("")
    lines.append(f"{moved} of {total} picks move.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("compute", "table"))
    parser.add_argument(
        "runs", nargs="*", type=Path, help="committed run folders (default: the four real models' under results/)"
    )
    parser.add_argument("--out", type=Path, default=OUT, help=f"the two arithmetics' metrics (default {OUT})")
    parser.add_argument("--data-dir", default="../shared/data", help="the folder holding WikiText")
    args = parser.parse_args(argv)
    runs = args.runs or [Path("results") / name for name in ("minilm-l6", "mpnet-base", "smollm2-135m", "gemma3-270m")]
    if args.action == "compute":
        compute(runs, args.out, args.data_dir)
    else:
        print(table(runs, args.out))


if __name__ == "__main__":
    main()
