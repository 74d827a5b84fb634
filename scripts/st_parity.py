"""Last layer of the packaged all-MiniLM-L6-v2 on classification tasks: layer_mteb with and without ``--normalize``
against the same model evaluated by mteb through sentence-transformers (its own pipeline, which ends in Normalize).

    python scripts/st_parity.py [--data-dir DIR] [--tasks Banking77Classification,...] [--only st|layer]

Prints one row per (pipeline, task) with mteb's main score, the published leaderboard value and the differences.
Splits what is left between the leaderboard and this machine into normalisation (layer_mteb with vs without
``--normalize``, and sentence-transformers through mteb) and everything else (mteb version, data copy).
"""

from __future__ import annotations

import argparse

import mteb
import pandas as pd
from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
from sentence_transformers import SentenceTransformer

from layer_mteb.common.config import EncodeConfig
from layer_mteb.evaluation.encoder import LayerEncoder
from layer_mteb.model.loading import load_model, packaged_folder
from layer_mteb.tasks.catalog import data_dir_from_env, load_task, read_task_file

#: the public MTEB leaderboard's all-MiniLM-L6-v2 scores (computed with an older mteb on hub data)
PUBLISHED = {"Banking77Classification": 0.8004, "AmazonCounterfactualClassification": 0.6364}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="local task data (default: $LAYER_MTEB_DATA)")
    parser.add_argument("--tasks", default=",".join(PUBLISHED))
    parser.add_argument("--only", choices=["st", "layer"], default=None)
    args = parser.parse_args()
    specs = [read_task_file().spec(name) for name in args.tasks.split(",")]
    rows = []
    pipelines = []
    if args.only in (None, "st"):
        st_model = SentenceTransformer(str(packaged_folder("minilm-l6")), device="cpu")
        print("sentence-transformers pipeline:", [type(m).__name__ for m in st_model])
        pipelines.append(("sentence-transformers via mteb", lambda: SentenceTransformerEncoderWrapper(st_model)))
    if args.only in (None, "layer"):
        for normalize in (False, True):
            config = EncodeConfig(normalize=normalize, max_length=256)  # 256: the model's sentence_bert_config
            loaded = load_model("minilm-l6", config)
            pipelines.append(
                (
                    f"layer_mteb last layer, normalize={normalize}",
                    lambda c=config, m=loaded: LayerEncoder.from_model(m, -1, config=c),
                )
            )
    for spec in specs:
        task = load_task(spec, data_dir=data_dir_from_env(args.data_dir))
        task.load_data()
        for label, build in pipelines:
            result = mteb.evaluate(build(), [task], cache=None, raise_error=True, show_progress_bar=False)
            score = result.task_results[0].get_score()
            rows.append({"pipeline": label, "task": spec.name, "main_score": round(score, 4)})
            print(rows[-1], flush=True)
    frame = pd.DataFrame(rows)
    frame["published"] = frame["task"].map(PUBLISHED)
    frame["minus_published"] = (frame["main_score"] - frame["published"]).round(4)
    print(f"\nmteb {mteb.__version__}\n" + frame.to_string(index=False))


if __name__ == "__main__":
    main()
