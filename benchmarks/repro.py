"""Time a full `dvc repro` from a clean state, stage by stage, and print the figures.

Clones the committed project into a temporary folder (no data, no cache, no MLflow store),
runs every stage in pipeline order with `dvc repro --single-item`, and prints each stage's
wall time and its processes' peak memory, the total, and the metrics of both experiments.

    PIPELINE_DATA_MIRROR=file:///path/to/datasets python benchmarks/repro.py [-S key=value ...]

`-S` values are applied to params.yaml of the clone before the run (as `dvc exp run -S` does).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import harness
from harness import ROOT

DATASETS = ("reuters", "mnist")
STAGES = ("download", "preprocess", "train", "evaluate")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_overrides(parser)
    opts = parser.parse_args()
    env = harness.dvc_env()
    with tempfile.TemporaryDirectory(prefix="bench-repro-") as tmp:
        work = Path(tmp) / "project"
        harness.run(["git", "clone", "-q", str(ROOT), str(work)], cwd=tmp, env=env)
        harness.write_params(work, opts.overrides, source=None)  # an error names params.yaml, not the clone's
        rows, total = [], 0.0
        for stage in STAGES:
            for dataset in DATASETS:
                name = f"{stage}@{dataset}"
                run = harness.run([sys.executable, "-m", "dvc", "repro", "--single-item", name], cwd=work, env=env)
                rows.append((name, run.seconds, run.peak_mb))
                total += run.seconds
        print(harness.host_line())
        print(f"{'stage':<22}{'seconds':>10}{'peak RSS MiB':>16}")
        for name, seconds, peak in rows:
            print(f"{name:<22}{seconds:>10.1f}{peak:>16,.0f}")
        print(f"{'total dvc repro':<22}{total:>10.1f}")
        for dataset in DATASETS:
            figures = {
                k: v
                for name in ("metrics.json", "train.json", "measurements.json")
                for k, v in json.loads((work / f"reports/{dataset}/{name}").read_text()).items()
            }
            print(
                f"{dataset}: "
                + ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in sorted(figures.items()))
            )


if __name__ == "__main__":
    main()
