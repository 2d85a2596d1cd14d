"""Test accuracy with and without best-epoch restore (and early stopping), over several seeds.

Runs the real train and evaluate stages (`python -m pipeline ...`) on prepared data, one
process each, with a copy of params.yaml that changes the seed and the early-stopping keys
of the setting; MLflow logs to a store in a temporary folder. Prints one line per run, then
each setting's mean and range of test accuracy.

    python benchmarks/early_stopping.py --data data/prepared/reuters [--dataset reuters]
        [--seeds 42,1,2] [--settings last,restore,patience3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

import harness

# name: early_stopping values
SETTINGS: dict[str, dict[str, int | bool | None]] = {
    "last": {"patience": None, "restore_best_weights": False},  # every epoch, the last one's model
    "restore": {"patience": None, "restore_best_weights": True},  # every epoch, the best one's model
    "patience3": {"patience": 3, "restore_best_weights": True},  # stop 3 epochs after the best
}


def run(work: Path, dataset: str, data: Path, setting: str, seed: int, env: dict) -> dict:
    overrides = [f"train.{dataset}.seed={seed}"]
    for key, value in SETTINGS[setting].items():
        overrides.append(f"train.{dataset}.early_stopping.{key}={json.dumps(value)}")
    harness.write_params(work, overrides)
    model = work / f"model-{setting}-{seed}"
    for argv in (
        harness.train_argv(dataset, data, work, model_dir=model),
        harness.evaluate_argv(dataset, data, model, work),
    ):
        subprocess.run(argv, cwd=work, env=env, check=True)
    train = harness.train_figures(work)
    test = json.loads((work / "metrics.json").read_text())
    return {
        "setting": setting,
        "seed": seed,
        "best_epoch": train["best_epoch"],
        "epochs_trained": train["epochs_trained"],
        "train_seconds": train["train_seconds"],
        "test_accuracy": test["test_accuracy"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="Prepared data (data/prepared/<dataset>).")
    parser.add_argument("--dataset", default="reuters")
    parser.add_argument("--seeds", default="42,1,2")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    settings = args.settings.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = harness.mlflow_env(work)
        results = []
        print("setting    seed  best epoch  epochs  train s  test accuracy", flush=True)
        for seed in seeds:  # the settings alternate, so that a slow spell of the host hits them alike
            for setting in settings:
                r = run(work, args.dataset, args.data.resolve(), setting, seed, env)
                results.append(r)
                print(
                    f"{setting:<10} {seed:>4}  {r['best_epoch']:>10}  {r['epochs_trained']:>6}  "
                    f"{r['train_seconds']:>7.1f}  {r['test_accuracy']:.4f}",
                    flush=True,
                )
        print()
        for setting in settings:
            accuracies = [r["test_accuracy"] for r in results if r["setting"] == setting]
            print(
                f"{setting:<10} test accuracy mean {statistics.mean(accuracies):.4f} "
                f"(min {min(accuracies):.4f}, max {max(accuracies):.4f}, {len(accuracies)} seeds)"
            )


if __name__ == "__main__":
    main()
