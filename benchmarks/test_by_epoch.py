"""The test split's accuracy after every epoch, beside the training and validation accuracy.

A dataset trained as `dvc repro train@NAME` trains it (the same model, schedule, statistics and
seed, one process, nothing logged to MLflow), its test split evaluated after each epoch, with
the weights and statistics the evaluate stage would take if the training ended there. It shows
how the test accuracy moves while the model fits the training split: on a dataset whose test
pictures come from elsewhere (another theme, deck or font), it can fall while the validation
accuracy, from the training split's own sources, climbs. The last line gives the last epoch's
test accuracy (what `dvc repro` reports, unless early stopping puts an earlier epoch's weights
back) beside the mean, lowest and highest of the second half
of the epochs: the mean moves less from one seed to the next than the last epoch does, a
steadier figure to compare two settings by.

    dvc repro preprocess@NAME
    python benchmarks/test_by_epoch.py NAME [-S train.NAME.key=value ...] [--csv FILE]
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

import harness
from harness import ROOT


def second_half(rows: list[dict]) -> list[float]:
    """The test accuracies of the second half of the epochs (the later one of an odd count's middle)."""
    return [row["test_accuracy"] for row in rows[len(rows) // 2 :]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", help="A dataset of params.yaml whose preprocess stage has run.")
    parser.add_argument("--data", type=Path, default=None, help="The prepared data (default: data/prepared/DATASET).")
    parser.add_argument("--csv", type=Path, default=None, help="Also write the rows to this CSV file.")
    harness.add_overrides(parser)
    opts = parser.parse_args()
    from pipeline import log

    log.configure(0)  # before TensorFlow: its C++ start-up lines filtered as in a `pipeline` command
    params = harness.load_params(opts.dataset, opts.overrides)
    cfg = params.train
    from pipeline.data import prepared as prepared_data
    from pipeline.errors import PipelineError
    from pipeline.training import distribute

    try:  # before TensorFlow: data not prepared is one `error:` line
        prepared = prepared_data.read(opts.data or ROOT / "data" / "prepared" / opts.dataset)
        prepared.check("train", "val", "test", digests=False)
    except PipelineError as exc:
        harness._config_exit(exc)

    setup = distribute.setup(cfg, where=f"train.{opts.dataset}")
    import keras

    from pipeline.training import evaluation, trainer

    rows: list[dict] = []

    class TestAccuracy(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            logits, labels, _ = evaluation.logits_of_test_split(self.model, prepared, params.evaluate)
            test = evaluation.metrics_from_logits(logits, labels)["test_accuracy"]
            logs = logs or {}
            row = {
                "epoch": epoch + 1,
                "accuracy": logs.get("accuracy"),
                "val_accuracy": logs.get("val_accuracy"),
                "test_accuracy": test,
            }
            rows.append(row)
            print("  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)

    trainer.train(cfg, prepared=prepared, strategy=setup.strategy, verbose=0, observer=TestAccuracy())
    late = second_half(rows)
    print(
        f"{opts.dataset}: test accuracy {rows[-1]['test_accuracy']:.4f} at the last epoch ({len(rows)}); "
        f"epochs {len(rows) - len(late) + 1}-{len(rows)}: mean {statistics.mean(late):.4f}, "
        f"lowest {min(late):.4f}, highest {max(late):.4f}"
    )
    if opts.csv:
        with open(opts.csv, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
