"""Time a sweep of queued Reuters experiments run one at a time and several at once.

Clones the committed project into a temporary folder, prepares Reuters once (`dvc repro
preprocess@reuters`), then, for each mode in turn, queues the same grid of Reuters experiments
(`dvc exp run --queue evaluate@reuters -S train.reuters.learning_rate=...`), runs them all with
`dvc exp run --run-all -j J`, times the whole sweep, and removes its experiments before the
next mode. Modes alternate (A, B, A, B, ...) so that a noisy host disturbs them alike; compare
the medians side by side, not with figures from another run.

    PIPELINE_DATA_MIRROR=file:///path/to/datasets python benchmarks/sweep.py \\
        --epochs 3 --pairs 2 --mode 1 --mode 2 --mode 2:TF_NUM_INTRAOP_THREADS=1

A mode is `J[:SETTING,...]`: J queue workers, and settings applied to that mode only: a
`key=value` whose key has a dot is a param (`-S`, e.g. train.reuters.devices.intra_op_threads=1),
any other is an environment variable of `dvc exp run --run-all` (the queue workers pass their
environment to the stages). Failed experiments are counted and their messages printed; the
sweep's time is still reported. It prints figures only: nothing here is a pass or fail.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import harness
from harness import ROOT

RATES = "0.0005,0.001,0.002,0.004,0.008,0.016,0.0003,0.0002"


def parse_mode(text: str) -> tuple[int, list[str], dict]:
    """'2:TF_NUM_INTRAOP_THREADS=1,train.reuters.epochs=2' -> (2, ['train.reuters.epochs=2'], {...})."""
    jobs, _, rest = text.partition(":")
    params, env = [], {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"{text}: expected KEY=VALUE, got {item!r}")
        if "." in key:
            params.append(item)
        else:
            env[key] = value
    try:
        count = harness.positive_int(jobs)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text}: the number of workers first (one or more), e.g. 2 or 2:KEY=VALUE"
        ) from None
    return count, params, env


def dvc(*args, cwd, env, check=True) -> harness.Measured:
    return harness.run([sys.executable, "-m", "dvc", *args], cwd=cwd, env=env, check=check)


def queue_states(work, env) -> dict[str, list[str]]:
    """Experiment names by state (Success, Failed, Queued, ...) from `dvc queue status`."""
    states: dict[str, list[str]] = {}
    for line in dvc("queue", "status", cwd=work, env=env).out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] != "Task" and not line.startswith("Worker"):
            states.setdefault(parts[-1], []).append(parts[1])
    return states


def accuracies(work, env) -> list[float]:
    shown = json.loads(dvc("exp", "show", "--json", cwd=work, env=env).out or "[]")
    found = []
    for commit in shown:
        for exp in commit.get("experiments") or []:
            for rev in exp.get("revs", []):
                metrics = ((rev.get("data") or {}).get("metrics") or {}).get("reports/reuters/metrics.json")
                if metrics and "test_accuracy" in (metrics.get("data") or {}):
                    found.append(metrics["data"]["test_accuracy"])
    return found


def sweep(work, env, jobs, params, extra_env, rates, epochs) -> dict:
    overrides = [f"train.reuters.learning_rate={rates}"]
    if epochs:
        overrides.append(f"train.reuters.epochs={epochs}")
    overrides += params
    args = ["exp", "run", "--queue", "evaluate@reuters"]
    for item in overrides:
        args += ["-S", item]
    dvc(*args, cwd=work, env=env)
    result = dvc("exp", "run", "--run-all", "-j", str(jobs), cwd=work, env={**env, **extra_env}, check=False)
    states = queue_states(work, env)
    failures = []
    for name in states.get("Failed", []):
        log = dvc("queue", "logs", name, cwd=work, env=env, check=False)
        lines = [line for line in (log.out + log.err).splitlines() if line.strip()]
        failures.append((name, " | ".join(lines[-3:])[-600:]))
    accs = accuracies(work, env)
    dvc("exp", "remove", "--all-commits", cwd=work, env=env, check=False)
    dvc("queue", "remove", "--all", cwd=work, env=env, check=False)
    return {
        "wall": result.seconds,
        "code": result.code,
        "states": {k: len(v) for k, v in states.items()},
        "failures": failures,
        "accuracies": accs,
        "run_all_output": (result.out + result.err)[-1500:] if result.code else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", type=int, default=4, help="learning rates in the grid (at most 8)")
    parser.add_argument("--epochs", type=int, default=3, help="train.reuters.epochs of each (0: params.yaml's)")
    parser.add_argument("--pairs", type=int, default=2, help="rounds of the modes, alternating")
    parser.add_argument(
        "--mode",
        dest="modes",
        action="append",
        metavar="J[:KEY=VALUE,...]",
        help="queue workers and settings of one mode; default: 1 and 2 with defaults",
    )
    opts = parser.parse_args()
    texts = opts.modes or ["1", "2"]
    try:
        labels, modes = texts, [parse_mode(text) for text in texts]
    except argparse.ArgumentTypeError as exc:
        parser.error(f"--mode {exc}")
    rates = ",".join(RATES.split(",")[: max(1, min(opts.experiments, 8))])
    env = harness.dvc_env()
    if not env.get("PIPELINE_DATA_MIRROR"):
        print("note: PIPELINE_DATA_MIRROR is unset: the download stage fetches from the internet", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        work = Path(tmp) / "project"
        harness.run(["git", "clone", "-q", str(ROOT), str(work)], cwd=tmp, env=env)
        harness.run(["git", "config", "user.name", "bench"], cwd=work, env=env)
        harness.run(["git", "config", "user.email", "bench@localhost"], cwd=work, env=env)
        dvc("repro", "preprocess@reuters", cwd=work, env=env)
        print(
            f"{harness.host_line()}; "
            f"{len(rates.split(','))} Reuters experiments (learning_rate={rates}), "
            f"{opts.epochs or 'params.yaml'} epochs each",
            flush=True,
        )
        walls: dict[str, list[float]] = {label: [] for label in labels}
        for round_ in range(opts.pairs):
            for label, (jobs, params, extra) in zip(labels, modes):
                figures = sweep(work, env, jobs, params, extra, rates, opts.epochs)
                walls[label].append(figures["wall"])
                accs = ", ".join(f"{a:.4f}" for a in sorted(figures["accuracies"]))
                print(
                    f"round {round_ + 1} mode {label:<40} wall {figures['wall']:7.1f} s  "
                    f"exit {figures['code']}  {figures['states']}  test accuracy [{accs}]",
                    flush=True,
                )
                for name, message in figures["failures"]:
                    print(f"  failed {name}: {message}", flush=True)
                if figures["run_all_output"]:
                    print(f"  --run-all said: {figures['run_all_output']}", flush=True)
        base = statistics.median(walls[labels[0]])
        print(f"{'mode':<42}{'median s':>10}{'ratio to ' + labels[0]:>16}  walls")
        for label in labels:
            median = statistics.median(walls[label])
            print(f"{label:<42}{median:>10.1f}{median / base:>16.2f}  " + ", ".join(f"{w:.1f}" for w in walls[label]))


if __name__ == "__main__":
    main()
