"""The pipeline's train stage against the baseline script, side by side, on the same machine.

Runs benchmarks/reuters_baseline.py and `pipeline train reuters` in turn (baseline, pipeline,
baseline, pipeline, ...), each as its own process, on the same data and number of epochs, and
prints each run's whole-process wall time, CPU time (user + system) and peak memory, its
training samples per second (validation excluded, timed the same way on both sides) and test
accuracy (the pipeline's from its evaluate stage, run untimed after the train stage), then
the pipeline-to-baseline ratios: median and spread over the pairs.

    dvc repro preprocess@reuters      # data/raw/reuters and data/prepared/reuters
    python benchmarks/compare_reuters.py [--pairs 3] [--epochs 10] [-S train.reuters.key=value ...]

`-S` sets a param of the pipeline's side (as `dvc exp run -S` does), for example
`-S train.reuters.strategy=mirrored` to measure the pipeline as it was before its defaults
changed. MLflow runs go to a temporary store.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import harness
from harness import ROOT

from pipeline.runtime import environment


def measured(args: list[str], cwd: Path, env: dict) -> dict:
    """Run a process to its end (exit with its output if it fails): its wall time, its own CPU
    time and peak RSS, its stdout."""
    run = harness.run(args, cwd, env)
    return {"wall": run.seconds, "cpu": run.cpu_seconds, "rss_mb": run.peak_mb, "out": run.out}


def baseline(work: Path, npz: Path, epochs: int, env: dict) -> dict:
    run = measured(
        [sys.executable, str(ROOT / "benchmarks" / "reuters_baseline.py"), "--npz", str(npz), "--epochs", str(epochs)],
        work,
        env,
    )
    figures = json.loads(run["out"].strip().splitlines()[-1])
    return {**run, "samples_per_second": figures["samples_per_second"], "test_accuracy": figures["test_accuracy"]}


def pipeline(work: Path, prepared: Path, env: dict) -> dict:
    out = work / "out"
    run = measured(harness.train_argv("reuters", prepared, out, quiet=False), work, env)
    summary = json.loads((out / "measurements.json").read_text())
    harness.run(harness.evaluate_argv("reuters", prepared, out / "model", out, quiet=False), work, env)
    metrics = json.loads((out / "metrics.json").read_text())
    return {**run, "samples_per_second": summary["samples_per_second"], "test_accuracy": metrics["test_accuracy"]}


def spread(values: list[float], digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="Baseline-pipeline pairs, alternating (at least 3).")
    parser.add_argument("--epochs", type=int, default=None, help="Both sides (default: train.reuters.epochs).")
    parser.add_argument("--raw", type=Path, default=ROOT / "data/raw/reuters", help="Folder of reuters.npz.")
    parser.add_argument("--prepared", type=Path, default=ROOT / "data/prepared/reuters")
    harness.add_overrides(parser, help="A param of the pipeline's side, as `dvc exp run -S`.")
    opts = parser.parse_args()
    for path in (opts.raw / "reuters.npz", opts.prepared / "stats.json"):
        if not path.is_file():
            sys.exit(f"error: {path}: not found; run `dvc repro preprocess@reuters` first")
    with tempfile.TemporaryDirectory(prefix="compare-reuters-") as tmp:
        work = Path(tmp)
        epochs = opts.epochs or harness.load_params("reuters", opts.overrides).train.epochs
        harness.write_params(work, [*opts.overrides, f"train.reuters.epochs={epochs}"])
        env = harness.mlflow_env(work)
        print(
            f"Reuters, {epochs} epochs, {opts.pairs} pairs alternating; {environment.cpu()[0]}, {os.cpu_count()} cores"
            + (f"; pipeline with {' '.join('-S ' + a for a in opts.overrides)}" if opts.overrides else "")
        )
        print(
            f"{'run':<10}{'pair':>5}{'wall s':>9}{'CPU s':>8}{'train samples/s':>17}{'test acc':>10}{'peak RSS MB':>13}"
        )
        rows = []
        for pair in range(1, opts.pairs + 1):
            row = {
                "baseline": baseline(work, opts.raw.resolve() / "reuters.npz", epochs, env),
                "pipeline": pipeline(work, opts.prepared.resolve(), env),
            }
            for side, r in row.items():
                print(
                    f"{side:<10}{pair:>5}{r['wall']:>9.1f}{r['cpu']:>8.1f}{r['samples_per_second']:>17,.0f}"
                    f"{r['test_accuracy']:>10.4f}{r['rss_mb']:>13,.0f}",
                    flush=True,
                )
            rows.append(row)

        def ratios(key):
            return [r["pipeline"][key] / r["baseline"][key] for r in rows]

        print(f"pipeline / baseline, median (min-max) over {opts.pairs} pairs:")
        print(f"  wall time           {spread(ratios('wall'))}")
        print(f"  CPU time            {spread(ratios('cpu'))}")
        print(f"  train samples/s     {spread(ratios('samples_per_second'))}")
        accuracy = {
            side: statistics.median(r[side]["test_accuracy"] for r in rows) for side in ("baseline", "pipeline")
        }
        print(
            f"  test accuracy       {accuracy['pipeline']:.4f} vs {accuracy['baseline']:.4f} "
            f"({accuracy['pipeline'] - accuracy['baseline']:+.4f})"
        )


if __name__ == "__main__":
    main()
