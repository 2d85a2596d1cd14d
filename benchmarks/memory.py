"""Peak memory of the train stage against the number of epochs: it should not grow.

Runs the real train stage (`python -m pipeline train`) once per epoch count, each in its own
process with a throw-away MLflow store, and prints each run's peak RSS (as the stage reports
it in its summary, and as the operating system counts the whole process) and the growth per
added epoch.

    python benchmarks/memory.py DATASET [--epochs 1,2,4] [--data data/prepared/DATASET] [-S key=value ...]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import harness
from harness import ROOT


def train(work: Path, dataset: str, data: Path, env: dict) -> tuple[float, float, dict]:
    """One train stage run: (wall seconds, whole-process peak RSS in MiB, its results and
    measurements)."""
    run = harness.run(harness.train_argv(dataset, data, work), cwd=work, env=env)
    return run.seconds, run.peak_mb, harness.train_figures(work)


def epoch_counts(text: str) -> list[int]:
    try:
        counts = [int(n) for n in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got {text!r}")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=("reuters", "mnist"))
    parser.add_argument("--epochs", type=epoch_counts, default="1,2,4", help="epoch counts, comma-separated")
    parser.add_argument("--data", type=Path, help="prepared data [default: data/prepared/DATASET]")
    harness.add_overrides(parser)
    opts = parser.parse_args()
    data = opts.data or ROOT / "data" / "prepared" / opts.dataset
    harness.load_params(opts.dataset, opts.overrides)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        env = harness.mlflow_env(tmp)
        for epochs in opts.epochs:
            work = Path(tmp) / f"epochs-{epochs}"
            work.mkdir()
            harness.write_params(work, [*opts.overrides, f"train.{opts.dataset}.epochs={epochs}"])
            rows.append((epochs, *train(work, opts.dataset, data, env)))
    print(f"{opts.dataset}: train stage peak memory against epochs ({os.cpu_count()} CPUs)")
    print(f"{'epochs':>6}{'wall s':>9}{'stage peak MiB':>16}{'process peak MiB':>18}{'val acc':>9}")
    for epochs, seconds, peak, summary in rows:
        print(
            f"{epochs:>6}{seconds:>9.1f}{summary['peak_rss_mb']:>16,.0f}{peak:>18,.0f}"
            f"{summary['final_val_accuracy']:>9.4f}"
        )
    (first, _, peak_first, _), (last, _, peak_last, _) = rows[0], rows[-1]
    if last > first:
        print(f"growth: {(peak_last - peak_first) / (last - first):+,.1f} MiB per added epoch (process peak)")


if __name__ == "__main__":
    main()
