"""`pipeline train` (stages/train.py) as DVC runs it, on fixture data: what it writes besides the
model. The training itself (loops, strategies, resume, early stopping, the run it logs) is
tests/training/'s; the whole pipeline's, tests/scenarios/test_e2e.py's."""

from __future__ import annotations

import datetime
import json
import os
import platform

import pytest
from support.processes import run_pipeline, subprocess_env
from support.project import write_params

from pipeline.runtime import environment


@pytest.mark.slow
def test_the_train_stage_names_the_machine(tmp_path):
    from support.datasets import make_reuters_raw

    make_reuters_raw(tmp_path / "raw", n=120)
    write_params(tmp_path, {"train.reuters.epochs": 1, "preprocess.reuters.max_len": 30})
    assert run_pipeline("preprocess", "reuters", "--raw", "raw", "--out", "prepared", cwd=tmp_path).returncode == 0
    env = subprocess_env(MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")
    result = run_pipeline(
        "train",
        "reuters",
        "--data",
        "prepared",
        "--model-dir",
        "model",
        "--history",
        "h.csv",
        "--summary",
        "s.json",
        "--curves",
        "c.png",
        "--machine",
        "reports/machine.json",
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "reports" / "machine.json").read_text()
    machine = json.loads(text)
    assert text == json.dumps(machine, indent=2, sort_keys=True) + "\n"  # as every JSON output
    import keras
    import tensorflow as tf

    today = datetime.datetime.now(datetime.timezone.utc).date()
    assert machine == {
        "cpu": environment.cpu()[0],
        "cpu_cores": os.cpu_count(),
        "instruction_sets": environment.cpu()[1],
        "gpus": [],  # CUDA_VISIBLE_DEVICES=-1 in the tests
        "tensorflow_version": tf.__version__,
        "keras_version": keras.__version__,
        "python_version": platform.python_version(),
        "date": machine["date"],
    }
    assert machine["date"] in (today.isoformat(), (today - datetime.timedelta(days=1)).isoformat())
    assert not list((tmp_path / "reports").glob(".*.tmp"))
