"""The Kubernetes TFJob and Slurm examples run the same train command the CLI accepts."""

import re
import shlex
import subprocess

import yaml
from support.project import ROOT

from pipeline.cli import cli


def parses(args: list[str]) -> dict:
    """Parse `pipeline ARGS` with the real CLI, without running it."""
    assert args[:3] == ["python", "-m", "pipeline"], args
    group_ctx = cli.make_context("pipeline", args[3:4] + ["--help"], resilient_parsing=True)
    command = cli.get_command(group_ctx, args[3])
    return command.make_context(args[3], list(args[4:])).params


def dvc_train_args(dataset: str) -> list[str]:
    cmd = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["train"]["do"]["cmd"]
    return shlex.split(cmd.replace("${item}", dataset))


def test_tfjob_runs_the_train_stage_on_workers():
    job = yaml.safe_load((ROOT / "deploy/kubernetes/tfjob-train.yaml").read_text())
    assert job["kind"] == "TFJob"
    workers = job["spec"]["tfReplicaSpecs"]["Worker"]
    assert workers["replicas"] >= 2
    (container,) = workers["template"]["spec"]["containers"]
    assert container["name"] == "tensorflow"
    assert "command" not in container  # the image's entrypoint runs first
    assert parses(container["args"]) == parses(dvc_train_args("reuters"))


def test_slurm_script_runs_the_train_stage_with_srun():
    path = ROOT / "deploy/slurm/train.sbatch"
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    text = path.read_text()
    assert re.search(r"^#SBATCH --nodes=\d+", text, re.M) and "--ntasks-per-node=1" in text
    srun_line = re.search(r"^srun (.*?)(?<!\\)$", text.replace("\\\n", " "), re.M)
    assert srun_line, text
    srun = srun_line.group(1)
    options, *command = shlex.split(srun)
    assert options == "${container[@]}"  # empty, or the image's pyxis options
    assert parses(command) == parses(dvc_train_args("reuters"))
    assert '--container-image="$PIPELINE_IMAGE"' in text
