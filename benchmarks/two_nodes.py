"""Time Reuters' training on one node and on two nodes of a Slurm cluster, through
deploy/slurm/train.sbatch as a user submits it.

Clones the committed project into a folder the nodes see (`--folder`, on the shared file
system: default /var/tmp), prepares Reuters there once (`dvc repro preprocess@reuters`), sets
`loop: custom` and the epochs, then submits `sbatch --wait --nodes=N --ntasks-per-node=1
deploy/slurm/train.sbatch` with N = 1 and N = 2 in turn (1, 2, 1, 2, ...: a noisy host
disturbs both alike) and prints each run's seconds per epoch and samples per second (the
train stage's measurements.json), then the medians. Run it where `sbatch` reaches the cluster,
with the tracking server the nodes reach:

    deploy/cluster/up.sh && source /var/tmp/pipeline-cluster/cluster.env
    PIPELINE_DATA_MIRROR=file:///path/to/datasets python benchmarks/two_nodes.py --epochs 3 --pairs 2

On deploy/cluster/up.sh's cluster the two nodes share one machine's cores: the figures say what
the second node costs in communication there, not what it gains on two machines. It prints
figures only: nothing here is a pass or fail.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import harness
from harness import ROOT


def submit(work: Path, nodes: int, env: dict, gpus: int) -> dict:
    """One training on `nodes` nodes: its measurements and seconds per epoch (the job's own
    wall time says little: `sbatch --wait` looks at the job every few seconds)."""
    for stale in ("reports/reuters/measurements.json", "reports/reuters/train.json"):
        (work / stale).unlink(missing_ok=True)
    done = harness.run(
        [
            "sbatch",
            "--wait",
            f"--nodes={nodes}",
            "--ntasks-per-node=1",
            f"--gpus-per-node={gpus}",
            f"--output={work / f'slurm-{nodes}.out'}",
            str(work / "deploy" / "slurm" / "train.sbatch"),
        ],
        cwd=work,
        env=env,
        check=False,
    )
    if done.code != 0:
        log = (work / f"slurm-{nodes}.out").read_text()[-2000:] if (work / f"slurm-{nodes}.out").exists() else ""
        sys.exit(f"error: sbatch --nodes={nodes} exited {done.code}: {done.err.strip()}\n{log}")
    measured = json.loads((work / "reports" / "reuters" / "measurements.json").read_text())
    epochs = json.loads((work / "reports" / "reuters" / "train.json").read_text())["epochs_trained"]
    return {**measured, "seconds_per_epoch": measured["train_seconds"] / epochs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=harness.positive_int, default=3, help="train.reuters.epochs of each run")
    parser.add_argument("--pairs", type=harness.positive_int, default=2, help="rounds of 1 then 2 nodes")
    parser.add_argument("--gpus-per-node", type=int, default=0, help="as the nodes have them (0 on CPU nodes)")
    parser.add_argument("--folder", type=Path, default=Path("/var/tmp"), help="where the clone goes: nodes see it")
    opts = parser.parse_args()
    if not os.environ.get("SLURM_CONF") and not shutil.which("sinfo"):
        parser.error("no Slurm here: start deploy/cluster/up.sh and source its cluster.env")
    if not os.environ.get("MLFLOW_TRACKING_URI", "").startswith("http"):
        parser.error("MLFLOW_TRACKING_URI: set it to a tracking server the nodes reach (the cluster.env's)")
    env = {**harness.dvc_env(), "MLFLOW_TRACKING_URI": os.environ["MLFLOW_TRACKING_URI"]}
    with tempfile.TemporaryDirectory(prefix="bench-two-nodes-", dir=opts.folder) as tmp:
        work = Path(tmp) / "project"
        harness.run(["git", "clone", "-q", str(ROOT), str(work)], cwd=tmp, env=env)
        (work / ".venv").symlink_to(Path(sys.prefix))
        harness.run([sys.executable, "-m", "dvc", "repro", "-q", "preprocess@reuters"], cwd=work, env=env)
        overrides = ["train.reuters.loop=custom", f"train.reuters.epochs={opts.epochs}"]
        overrides.append("train.reuters.early_stopping.patience=null")  # every run trains every epoch
        harness.write_params(work, overrides, source=None)
        print(f"{harness.host_line()}; Reuters, {opts.epochs} epochs, loop custom, one worker a node")
        print(f"{'nodes':>5}  {'s/epoch':>8}  {'samples/s':>9}")
        results: dict[int, list[dict]] = {1: [], 2: []}
        for _ in range(opts.pairs):
            for nodes in (1, 2):
                got = submit(work, nodes, env, opts.gpus_per_node)
                results[nodes].append(got)
                per_epoch, rate = got["seconds_per_epoch"], got["samples_per_second"]
                print(f"{nodes:>5}  {per_epoch:8.2f}  {rate:9.0f}")
        for nodes, runs in results.items():
            per_epoch = statistics.median(r["seconds_per_epoch"] for r in runs)
            rate = statistics.median(r["samples_per_second"] for r in runs)
            print(f"median, {nodes} node(s): {per_epoch:.2f} s an epoch, {rate:.0f} samples/s")


if __name__ == "__main__":
    main()
