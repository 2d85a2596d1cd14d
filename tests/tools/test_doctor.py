"""pipeline/tools/doctor.py's checks on their own: a DVC remote that is a folder, a server or a
cloud store; a folder outside git; a line per check, the fix only where one is needed; and the
tracking check the stages run first (the train stage, against a port where nothing listens).
`pipeline doctor` as a whole (real git, DVC, an `mlflow server`): tests/commands/test_doctor_command.py."""

import json
import socket
import time

import pytest
from support.processes import run_pipeline, subprocess_env, train_args
from support.project import write_params
from support.servers import free_ports

from pipeline.tools import doctor


def test_a_remote_is_checked_as_what_it_is(tmp_path):
    """A folder must be there and writable (relative to .dvc/, as DVC reads it), a server must
    answer; a cloud store is not checked here (its credentials), a warning that says how to."""
    (tmp_path / ".dvc").mkdir()
    (tmp_path / "store").mkdir()
    assert doctor._check_remote("local", "../store", tmp_path) == doctor.Check(
        "dvc-remote", "pass", f"local: {tmp_path / 'store'} is writable"
    )
    missing = doctor._check_remote("local", (tmp_path / "gone").as_uri(), tmp_path)
    assert (missing.status, missing.detail) == ("fail", f"local: {tmp_path / 'gone'} is missing or not writable")
    with socket.socket() as listening:  # bound, not listening: the connection is refused
        listening.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{listening.getsockname()[1]}/cache"
        down = doctor._check_remote("web", url, tmp_path)
    assert (down.status, down.fix) == ("fail", "check the network or `dvc remote modify` its url")
    assert down.detail.startswith(f"web: {url} does not answer (")
    cloud = doctor._check_remote("s3", "s3://bucket/cache", tmp_path)
    assert (cloud.status, cloud.fix) == ("warn", "check it with `dvc status --cloud`")


def test_a_folder_outside_git_fails_and_only_a_problem_shows_its_fix(tmp_path):
    git = doctor.check_git(tmp_path)
    assert git == doctor.Check(
        "git", "fail", f"{tmp_path} is not in a git repository", "run from your clone of the project"
    )
    passed = doctor.Check("folder", "pass", "writable", "never shown")
    assert doctor.report([git, passed], as_json=False).splitlines() == [
        f"fail  git        {tmp_path} is not in a git repository; fix: run from your clone of the project",
        "pass  folder     writable",
    ]
    assert json.loads(doctor.report([passed], as_json=True)) == [
        {"name": "folder", "status": "pass", "detail": "writable", "fix": "never shown"}
    ]


@pytest.mark.slow
@pytest.mark.distributed
def test_train_stage_with_a_dead_tracking_server_stops_in_one_line_and_writes_nothing(tmp_path):
    from support.datasets import make_reuters_npz, make_word_index

    raw = tmp_path / "raw"
    raw.mkdir()
    make_reuters_npz(raw / "reuters.npz")
    make_word_index(raw / "reuters_word_index.json")
    write_params(tmp_path, {"train.reuters.epochs": 1})
    assert run_pipeline("preprocess", "reuters", "--raw", raw, "--out", "prepared", cwd=tmp_path).returncode == 0
    (closed,) = free_ports(1)
    env = subprocess_env(MLFLOW_TRACKING_URI=f"http://127.0.0.1:{closed}")
    started = time.time()
    out = run_pipeline(
        *train_args(model_dir="models", backup_dir="backup"),
        cwd=tmp_path,
        env=env,
    )
    took = time.time() - started
    assert out.returncode == 1, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: MLflow tracking server http://127.0.0.1:{closed} does not answer ([Errno 111] "
        "Connection refused); start it, or set MLFLOW_TRACKING_URI to one that runs (unset: "
        "mlflow.db here)"
    ]
    assert "Traceback" not in out.stderr
    assert not any((tmp_path / p).exists() for p in ("models", "h.csv", "s.json", "backup"))
    print(f"\ntrain stage with a dead tracking server: exit 1 after {took:.1f} s")
