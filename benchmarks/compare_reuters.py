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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pipeline.config.loader import load_params  # noqa: E402
from pipeline.config.params_doc import set_in_file  # noqa: E402
from pipeline.errors import ConfigError  # noqa: E402
from pipeline.runtime import environment  # noqa: E402


def run_measured(args: list[str], cwd: Path, env: dict) -> dict:
    """Run a process to its end: its wall time, its own CPU time and peak RSS (os.wait4), its stdout."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None  # stdout=PIPE
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code:
            err.seek(0)
            sys.exit(f"{' '.join(args)} failed ({code}):\n{err.read().decode(errors='replace')[-3000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024, "out": out.decode()}


def baseline(work: Path, npz: Path, epochs: int, env: dict) -> dict:
    run = run_measured(
        [sys.executable, str(ROOT / "benchmarks" / "reuters_baseline.py"), "--npz", str(npz), "--epochs", str(epochs)],
        work,
        env,
    )
    figures = json.loads(run["out"].strip().splitlines()[-1])
    return {**run, "samples_per_second": figures["samples_per_second"], "test_accuracy": figures["test_accuracy"]}


def pipeline(work: Path, prepared: Path, env: dict) -> dict:
    out = work / "out"
    common = ["reuters", "--data", str(prepared), "--model-dir", str(out / "model")]
    run = run_measured(
        [
            sys.executable,
            "-m",
            "pipeline",
            "train",
            *common,
            "--history",
            str(out / "history.csv"),
            "--summary",
            str(out / "train.json"),
            "--curves",
            str(out / "curves.png"),
            "--measurements",
            str(out / "measured.json"),
        ],
        work,
        env,
    )
    summary = json.loads((out / "measured.json").read_text())
    run_measured(
        [
            sys.executable,
            "-m",
            "pipeline",
            "evaluate",
            *common,
            "--metrics",
            str(out / "metrics.json"),
            "--per-class",
            str(out / "per_class.csv"),
            "--confusion",
            str(out / "confusion.csv"),
            "--confusion-png",
            str(out / "confusion.png"),
        ],
        work,
        env,
    )
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
    parser.add_argument(
        "-S",
        "--set",
        dest="assignments",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="A param of the pipeline's side, as `dvc exp run -S`.",
    )
    opts = parser.parse_args()
    for path in (opts.raw / "reuters.npz", opts.prepared / "train.npz"):
        if not path.is_file():
            sys.exit(f"error: {path}: not found; run `dvc repro preprocess@reuters` first")
    with tempfile.TemporaryDirectory(prefix="compare-reuters-") as tmp:
        work = Path(tmp)
        params = work / "params.yaml"
        params.write_text((ROOT / "params.yaml").read_text())
        try:  # checked against the repository's params.yaml, so that an error names it
            epochs = opts.epochs or load_params(ROOT / "params.yaml", "reuters", opts.assignments).train.epochs
            set_in_file(params, [*opts.assignments, f"train.reuters.epochs={epochs}"])
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(exc.exit_code)
        env = {
            **os.environ,
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "MLFLOW_TRACKING_URI": f"sqlite:///{work}/mlflow.db",
            "PYTHONPATH": str(ROOT),
        }
        print(
            f"Reuters, {epochs} epochs, {opts.pairs} pairs alternating; {environment.cpu()[0]}, {os.cpu_count()} cores"
            + (f"; pipeline with {' '.join('-S ' + a for a in opts.assignments)}" if opts.assignments else "")
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
