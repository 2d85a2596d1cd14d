"""The tracking check the stages run first (the one `pipeline doctor` runs): the train stage
against a port where nothing listens. `pipeline doctor` itself (real git, DVC, an `mlflow
server`): tests/commands/test_doctor_command.py."""

import time

import pytest
from helpers import free_ports, run_pipeline, subprocess_env, write_params


@pytest.mark.slow
@pytest.mark.distributed
def test_train_stage_with_a_dead_tracking_server_stops_in_one_line_and_writes_nothing(tmp_path):
    from fixtures import make_reuters_npz, make_word_index

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
        "train",
        "reuters",
        "--data",
        "prepared",
        "--model-dir",
        "models",
        "--history",
        "h.csv",
        "--summary",
        "s.json",
        "--curves",
        "c.png",
        "--backup-dir",
        "backup",
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
