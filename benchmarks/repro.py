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
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pipeline.config.params_doc import set_in_file  # noqa: E402
from pipeline.errors import ConfigError  # noqa: E402
from pipeline.runtime.usage import run_measured  # noqa: E402

DATASETS = ("reuters", "mnist")
STAGES = ("download", "preprocess", "train", "evaluate")


def run(args, cwd, env) -> tuple[float, float]:
    """Run a command; exit with its output if it fails. (wall seconds, peak RSS MiB of its
    largest process: the stage's, under dvc)."""
    with tempfile.TemporaryFile("w+") as out:
        code, seconds, peak = run_measured(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        if code != 0:
            out.seek(0)
            sys.exit(f"{' '.join(args)} failed:\n{out.read()[-6000:]}")
    return seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-S", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    opts = parser.parse_args()
    env = dict(os.environ, DVC_NO_ANALYTICS="1", TF_CPP_MIN_LOG_LEVEL="2")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("MLFLOW_TRACKING_URI", None)
    with tempfile.TemporaryDirectory(prefix="bench-repro-") as tmp:
        work = Path(tmp) / "project"
        run(["git", "clone", "-q", str(ROOT), str(work)], cwd=tmp, env=env)
        try:
            set_in_file(work / "params.yaml", opts.overrides)
        except ConfigError as exc:  # named as the user's params.yaml, not the clone's
            print(f"error: {str(exc).replace(str(work) + os.sep, '')}", file=sys.stderr)
            sys.exit(exc.exit_code)
        rows, total = [], 0.0
        for stage in STAGES:
            for dataset in DATASETS:
                name = f"{stage}@{dataset}"
                seconds, peak = run([sys.executable, "-m", "dvc", "repro", "--single-item", name], cwd=work, env=env)
                rows.append((name, seconds, peak))
                total += seconds
        print(f"host: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
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
