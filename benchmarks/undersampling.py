"""How long does mteb's classification undersampling take on a hub-shaped train split, before and after the sweep
holds the label column as a list (layer_mteb.tasks.state.hold_label_lists)?

mteb's ``AbsTaskClassification._undersample_data`` reads ``labels[i]`` for every training row, ``n_experiments``
(10) times per layer. The split here is what the hub path gives: a ``datasets.Dataset`` saved to disk and loaded
memory-mapped, put into the real AmazonReviewsClassification task object; both sides run mteb's own method on the
split mteb's ``evaluate`` hands it (after ``select_columns``) and must select the same rows.

    python benchmarks/undersampling.py                      # 200,000 rows, one undersampling call per side
    python benchmarks/undersampling.py --experiments 10     # a whole layer's worth of calls per side
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import warnings

import _common  # noqa: F401  (offline hub settings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the train split")
    parser.add_argument("--labels", type=int, default=5, help="distinct labels (AmazonReviews has 5)")
    parser.add_argument("--experiments", type=int, default=1, help="undersampling calls per side (mteb: 10/layer)")
    args = parser.parse_args()

    import mteb
    from datasets import Dataset, DatasetDict, load_from_disk

    from layer_mteb.tasks.state import hold_label_lists

    rng = random.Random(0)
    rows = {
        "text": [
            f"review {i}: " + " ".join(rng.choice(("good", "bad", "fine", "broken")) for _ in range(12))
            for i in range(args.rows)
        ],
        "label": [rng.randrange(args.labels) for _ in range(args.rows)],
    }
    with tempfile.TemporaryDirectory() as folder:
        Dataset.from_dict(rows).save_to_disk(f"{folder}/train")
        Dataset.from_dict({k: v[:1000] for k, v in rows.items()}).save_to_disk(f"{folder}/test")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            task = mteb.get_task("AmazonReviewsClassification", languages=["eng"], hf_subsets=["en"])

        def loaded_splits() -> DatasetDict:
            return DatasetDict({s: load_from_disk(f"{folder}/{s}") for s in ("train", "test")})

        timings, selections = {}, {}
        for side in ("lazy column (before)", "held list (after)"):
            task.dataset = {"en": loaded_splits()}
            start = time.perf_counter()
            if side.startswith("held"):
                hold_label_lists(task)
            train = task.dataset["en"].select_columns(["text", "label"])["train"]  # as mteb's evaluate does
            picked, shuffled = [], None
            for i in range(args.experiments):
                _, shuffled, selected = task._undersample_data(train, i, shuffled)
                picked.append(selected)
            timings[side] = time.perf_counter() - start
            selections[side] = picked

    before, after = timings.values()
    same = len({str(s) for s in selections.values()}) == 1
    print(f"rows {args.rows:,}, labels {args.labels}, undersampling calls per side {args.experiments}\n")
    print("| label column | seconds | per call | rows selected identical |")
    print("|---|---|---|---|")
    for side, seconds in timings.items():
        print(f"| {side} | {seconds:.3f} | {seconds / args.experiments:.3f} | {same} |")
    print(f"\nspeed-up: **{before / after:.0f}x**")
    if not same:
        raise SystemExit("the held labels selected different rows")


if __name__ == "__main__":
    main()
