"""`pipeline train` (stages/train.py) as DVC runs it, on fixture data: what it writes besides the
model, and nothing printed with -q. The training itself (loops, strategies, resume, early stopping, the run it logs) is
tests/training/'s; the whole pipeline's, tests/scenarios/test_e2e.py's."""

from __future__ import annotations

import datetime
import json
import os
import platform

import pytest
from support.processes import evaluate_args, run_pipeline, subprocess_env, train_args
from support.project import write_params

from pipeline.runtime import environment


@pytest.mark.slow
def test_the_train_stage_names_the_machine(tmp_path):
    from support.datasets import make_reuters_raw

    make_reuters_raw(tmp_path / "raw", n=120)
    write_params(tmp_path, {"train.reuters.epochs": 1, "preprocess.reuters.max_len": 30})
    assert run_pipeline("preprocess", "reuters", "--raw", "raw", "--out", "prepared", cwd=tmp_path).returncode == 0
    env = subprocess_env(MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")
    result = run_pipeline(*train_args(machine="reports/machine.json"), cwd=tmp_path, env=env)
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


@pytest.mark.slow
@pytest.mark.cold_start  # nothing printed while TensorFlow, Keras and MLflow are imported either
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_quiet_training_prints_nothing(tmp_path, loop):
    from support.datasets import make_reuters_npz, make_word_index
    from support.processes import subprocess_env
    from support.project import write_params

    (tmp_path / "raw").mkdir()
    make_reuters_npz(tmp_path / "raw" / "reuters.npz", n=200)
    make_word_index(tmp_path / "raw" / "reuters_word_index.json")
    write_params(tmp_path, {"train.reuters.loop": loop, "train.reuters.epochs": 2, "preprocess.reuters.max_len": 40})
    assert run_pipeline("preprocess", "reuters", "--raw", "raw", "--out", "prepared", cwd=tmp_path).returncode == 0
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    result = run_pipeline("-q", *train_args(), cwd=tmp_path, env=subprocess_env(**env))
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("", "")
    # with -v TensorFlow's own warnings show: none about how the pipeline calls Keras or tf.data
    commands = [
        [
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
        ]
    ]
    if loop == "fit":  # the evaluate stage is the same for both loops: once, quiet too (its model
        # logged and registered without MLflow's notices)
        evaluate = evaluate_args()
        quiet = run_pipeline("-q", *evaluate, cwd=tmp_path, env=subprocess_env(**env))
        assert quiet.returncode == 0 and (quiet.stdout, quiet.stderr) == ("", ""), quiet.stderr
        commands.append(evaluate)
    for args in commands:
        loud = run_pipeline("-v", *args, cwd=tmp_path, env=subprocess_env(**env))
        assert loud.returncode == 0, loud.stderr
        for noise in ("did not fully read the dataset being cached", "`shuffle=True` was passed"):
            assert noise not in loud.stderr
