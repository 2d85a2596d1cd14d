"""Throughput of the two training loops on 1 and 2 replicas, and the cost of a kill-and-resume.

Runs the real train stage (`python -m pipeline train`) on prepared data, each case in its own
process, and prints samples per second: over all epochs, and in steady state (epochs after
the first, which includes tracing; n/a with one epoch). Then kills a run in its second epoch,
resumes it, and prints how much longer the two attempts took than one uninterrupted run: with
--epochs 1 there is no second epoch to kill, and that part is skipped.

    python benchmarks/loops.py --data data/prepared/reuters [--dataset reuters] [--epochs 4]
"""

from __future__ import annotations

import argparse
import csv
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness


def train(work: Path, dataset: str, data: Path, overrides: dict, env: dict, kill_after_epochs=None):
    harness.write_params(work, [f"train.{dataset}.{key}={value}" for key, value in overrides.items()])
    args = harness.train_argv(dataset, data, work, extra=["--backup-dir", str(work / "backup")], quiet=False)
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if kill_after_epochs is not None:
        backup = work / "backup" / "history.json"
        while not (backup.is_file() and len(json.loads(backup.read_text() or "[]")) >= kill_after_epochs):
            if proc.poll() is not None:
                sys.exit("run ended before it could be killed")
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return time.perf_counter() - start
    _, err = proc.communicate()
    if proc.returncode != 0:
        sys.exit(err[-3000:])
    seconds = time.perf_counter() - start
    with open(work / "history.csv") as fh:
        rows = list(csv.DictReader(fh))
    return seconds, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--dataset", default="reuters", choices=("reuters", "mnist"))
    parser.add_argument(
        "--epochs", type=harness.positive_int, default=4, help="Epochs of each run (kill-and-resume needs 2 or more)."
    )
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = harness.mlflow_env(tmp)
        print(f"{'loop':<8}{'replicas':>9}{'samples/s (all)':>17}{'samples/s (steady)':>20}{'val acc':>9}")
        for loop in ("fit", "custom"):
            for replicas in (1, 2):
                work = Path(tmp) / f"{loop}-{replicas}"
                work.mkdir()
                _, rows = train(
                    work,
                    opts.dataset,
                    opts.data,
                    {"loop": loop, "epochs": opts.epochs, "devices.logical_devices": replicas},
                    env,
                )
                measured = json.loads((work / "measurements.json").read_text())
                steady = measured.get("steady_samples_per_second")  # none with --epochs 1
                steady_text = f"{steady:.0f}" if steady is not None else "n/a"
                print(
                    f"{loop:<8}{replicas:>9}{measured['samples_per_second']:>17.0f}"
                    f"{steady_text:>20}{float(rows[-1]['val_accuracy']):>9.4f}"
                )
        if opts.epochs < 2:
            print("kill-and-resume: skipped: it kills a run in its second epoch, and --epochs 1 has none")
            return
        for loop in ("fit", "custom"):
            base = Path(tmp) / f"resume-base-{loop}"
            base.mkdir()
            whole, _ = train(base, opts.dataset, opts.data, {"loop": loop, "epochs": opts.epochs}, env)
            work = Path(tmp) / f"resume-{loop}"
            work.mkdir()
            first = train(
                work, opts.dataset, opts.data, {"loop": loop, "epochs": opts.epochs}, env, kill_after_epochs=1
            )
            second, rows = train(work, opts.dataset, opts.data, {"loop": loop, "epochs": opts.epochs}, env)
            assert [int(r["epoch"]) for r in rows] == list(range(1, opts.epochs + 1))
            print(
                f"kill-and-resume ({loop}): uninterrupted {whole:.1f} s; killed after {first:.1f} s + resumed "
                f"{second:.1f} s = {first + second:.1f} s; cost {first + second - whole:.1f} s"
            )


if __name__ == "__main__":
    main()
