"""`pipeline doctor` (pipeline/commands/doctor.py) in a DVC project in a git repository, against
real git, DVC, a real `mlflow server` on 127.0.0.1 and a port where nothing listens: a line per
check (or --json), each failure with its fix, exit 1 when a check fails."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.processes import child_json, run_pipeline, subprocess_env
from support.project import write_params
from support.servers import free_ports

pytestmark = pytest.mark.slow

NAMES = ["git", "dvc", "dvc-remote", "folder", "disk", "tracking", "artifacts", "gpus", "versions", "shm", "strategy"]


@pytest.fixture
def clone(tmp_path):
    """A DVC project in a git repository, with the shipped params."""
    repo = tmp_path / "clone"
    repo.mkdir()
    write_params(repo)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    for args in (
        ["git", "init", "-q", "-b", "main"],
        [sys.executable, "-m", "dvc", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "init"],
    ):
        subprocess.run(args, cwd=repo, env=env, check=True, capture_output=True)
    return repo


def doctor(folder, *args, env=None, unprivileged=False):
    """`pipeline doctor --json` in `folder`: (exit code, checks by name, the result).
    `unprivileged`: as root without the capabilities that let it ignore mode bits, so that a
    folder's permissions apply to it as to any user, while the checkout and its environment,
    wherever they live (root's home included), stay readable."""
    cmd = [sys.executable, "-m", "pipeline", "doctor", "--json", *args]
    if unprivileged:
        cmd = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--", *cmd]
    out = subprocess.run(cmd, cwd=folder, env=env or subprocess_env(), capture_output=True, text=True, timeout=300)
    assert "Traceback" not in out.stderr, out.stderr
    return out.returncode, {c["name"]: c for c in child_json(out)}, out


def test_a_sound_clone_passes(clone):
    code, checks, out = doctor(clone)
    assert list(checks) == NAMES
    assert code == 0, out.stdout
    for name in ("git", "dvc", "dvc-remote", "folder", "tracking", "strategy"):
        assert checks[name]["status"] == "pass", checks[name]
    assert checks["tracking"]["detail"] == f"sqlite:///{clone / 'mlflow.db'} (made by the first run)"
    assert checks["strategy"]["detail"].startswith("reuters: DefaultStrategy, 1 replica(s)")
    assert checks["versions"]["detail"].startswith("TensorFlow ")


def test_plain_output_is_one_line_per_check(clone):
    out = run_pipeline("doctor", cwd=clone)
    lines = out.stdout.strip().splitlines()
    assert [line.split()[1] for line in lines] == NAMES
    assert all(line.split()[0] in ("pass", "warn", "fail") for line in lines)


def test_dubious_ownership_and_a_read_only_folder_fail_with_their_fix(clone):
    subprocess.run(["chown", "-R", "65534:65534", clone], check=True)
    code, checks, _ = doctor(clone)  # as root, on a clone owned by another uid
    assert code == 1
    assert checks["git"]["status"] == "fail"
    assert "dubious ownership" in checks["git"]["detail"]
    assert f"git config --global --add safe.directory {clone}" in checks["git"]["fix"]
    # a folder its user cannot write to: root without its capabilities (root writes anywhere)
    subprocess.run(["chown", "-R", "0:0", clone], check=True)
    clone.chmod(0o555)
    try:
        code, checks, _ = doctor(clone, unprivileged=True)
    finally:
        clone.chmod(0o755)
    assert code == 1
    assert checks["folder"]["status"] == "fail"
    assert checks["folder"]["detail"] == f"{clone} is not writable by uid 0 (Permission denied)"
    assert "mount the clone read-write" in checks["folder"]["fix"]


def test_gpus_the_host_lacks_are_a_failed_strategy_check(clone):
    write_params(clone, {"train.mnist.devices.visible_gpus": [0]})
    code, checks, _ = doctor(clone, "--dataset", "mnist")
    assert code == 1
    assert checks["strategy"]["status"] == "fail"
    assert checks["strategy"]["detail"].startswith("train.mnist.devices.visible_gpus: asked for GPU 0")
    assert "change train.mnist in params.yaml" in checks["strategy"]["fix"]


def test_tracking_server_that_answers_and_one_that_does_not(clone, mlflow_server):
    code, checks, _ = doctor(clone, env=subprocess_env(MLFLOW_TRACKING_URI=mlflow_server))
    assert checks["tracking"] == {
        "name": "tracking",
        "status": "pass",
        "fix": "",
        "detail": f"{mlflow_server} answers; its backend store too",
    }
    (closed,) = free_ports(1)
    code, checks, _ = doctor(clone, env=subprocess_env(MLFLOW_TRACKING_URI=f"http://127.0.0.1:{closed}"))
    assert code == 1
    assert checks["tracking"]["status"] == "fail"
    assert checks["tracking"]["detail"].startswith(f"MLflow tracking server http://127.0.0.1:{closed} does not answer")
    assert checks["tracking"]["fix"].startswith("start it, or set MLFLOW_TRACKING_URI")


def test_an_experiment_whose_artifacts_dvc_deleted_is_reported_with_a_repair_that_works(clone):
    """Stores made before artifacts went beside mlflow.db: an experiment created from a
    `dvc exp run --queue` copy keeps pointing into it after DVC deleted it."""
    from mlflow import MlflowClient

    store = f"sqlite:///{clone / 'mlflow.db'}"
    lost = clone / ".dvc" / "tmp" / "exps" / "run" / "a1b2c3" / "mlruns" / "1"
    experiment_id = MlflowClient(store).create_experiment("reuters", artifact_location=lost.as_uri())
    code, checks, _ = doctor(clone)
    assert code == 0  # a warning: training works, the old runs lack their files
    check = checks["artifacts"]
    assert check["status"] == "warn"
    assert f"reuters (id {experiment_id}): {lost.as_uri()}" in check["detail"]
    command = check["fix"].split(" (")[0]
    assert command == f"mlflow experiments rename --experiment-id {experiment_id} --new-name reuters-lost-artifacts"
    mlflow_cli = Path(sys.executable).with_name("mlflow")
    subprocess.run(
        [str(mlflow_cli), *command.split()[1:]],
        cwd=clone,
        check=True,
        capture_output=True,
        env=subprocess_env(MLFLOW_TRACKING_URI=store),
        timeout=120,
    )
    code, checks, _ = doctor(clone)
    assert checks["artifacts"]["status"] == "pass", checks["artifacts"]
    assert (
        checks["artifacts"]["detail"] == "no experiment of reuters or mnist keeps its artifacts in a DVC temporary copy"
    )
