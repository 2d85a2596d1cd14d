"""A training process killed (SIGKILL) mid-epoch resumes from its last finished epoch."""

import csv
import json
import signal
import subprocess
import sys
import time

import pytest
from support.datasets import make_reuters_raw
from support.processes import run_on_terminal, run_pipeline, subprocess_env, train_args
from support.project import write_params

pytestmark = [pytest.mark.slow]

TRAIN_ARGS = train_args(history="history.csv", summary="summary.json", curves="curves.png", backup_dir="backup")
EPOCHS, STOPPED = 4, 3


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_killed_training_resumes_without_repeating_an_epoch(tmp_path, loop):
    """With early stopping on the training loss the wrong way round (mode max: the first epoch
    is the best), so that the run stops after 3 of 4 epochs and its model is the first epoch's,
    whose weights the killed process kept in its backup."""
    make_reuters_raw(tmp_path / "raw", n=3000)
    write_params(
        tmp_path,
        {
            "train.reuters.loop": loop,
            "train.reuters.epochs": EPOCHS,
            "train.reuters.batch_size_per_replica": 8,
            "train.reuters.early_stopping.monitor": "loss",
            "train.reuters.early_stopping.mode": "max",
            "train.reuters.early_stopping.patience": 2,
        },
    )
    assert run_pipeline("preprocess", "reuters", "--raw", "raw", "--out", "prepared", cwd=tmp_path).returncode == 0
    env = subprocess_env(MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")

    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", *TRAIN_ARGS],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    backup = tmp_path / "backup" / "history.json"
    deadline = time.time() + 300
    while not (backup.is_file() and json.loads(backup.read_text() or "[]")):
        assert proc.poll() is None, "training ended before its first backup"
        assert time.time() < deadline
        time.sleep(0.05)
    started = time.time()
    time.sleep(0.4)  # into the second epoch
    assert proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished_before_kill = len(json.loads(backup.read_text()))
    assert 1 <= finished_before_kill < STOPPED
    assert not (tmp_path / "model").exists()  # no half-written output

    resumed = subprocess.run(
        [sys.executable, "-m", "pipeline", *TRAIN_ARGS],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    print(
        f"{loop}: killed {time.time() - started:.1f} s before the resumed run ended; "
        f"{finished_before_kill} epoch(s) kept"
    )
    history = list(csv.DictReader((tmp_path / "history.csv").open()))
    assert [int(r["epoch"]) for r in history] == list(range(1, STOPPED + 1))
    assert not (tmp_path / "backup").exists()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["best_epoch"], summary["epochs_trained"]) == (1, STOPPED)

    import keras

    from pipeline.data import prepared
    from pipeline.training.models import loss

    model = keras.models.load_model(tmp_path / "model" / "model.keras")
    x_val, y_val = prepared.read(tmp_path / "prepared").head("val", 10**6)
    own_val_loss = float(keras.ops.convert_to_numpy(loss()(y_val, model(x_val, training=False))))
    assert own_val_loss == pytest.approx(float(history[0]["val_loss"]), rel=1e-4)  # the first epoch's
    assert own_val_loss != pytest.approx(float(history[-1]["val_loss"]), rel=1e-4)

    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("reuters")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
    assert sorted(steps) == list(range(1, STOPPED + 1))  # every epoch logged once: none repeated
    metrics = run.data.metrics
    assert (metrics["best_epoch"], metrics["kept_epoch"], metrics["epochs_trained"]) == (1, 1, STOPPED)


def test_custom_loop_draws_a_progress_bar_on_a_terminal(tmp_path):
    make_reuters_raw(tmp_path / "raw", n=400)
    write_params(
        tmp_path,
        {
            "train.reuters.loop": "custom",
            "train.reuters.epochs": 2,
            "train.reuters.batch_size_per_replica": 32,
            "preprocess.reuters.max_len": 60,
        },
    )
    assert run_pipeline("preprocess", "reuters", "--raw", "raw", "--out", "prepared", cwd=tmp_path).returncode == 0
    env = subprocess_env(MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")
    code, shown = run_on_terminal([sys.executable, "-m", "pipeline", *TRAIN_ARGS], tmp_path, env)
    assert code == 0
    for epoch in ("epoch 1/2", "epoch 2/2"):
        assert epoch in shown
    assert "loss=" in shown and "accuracy=" in shown and "9/9" in shown  # 288 samples, batch 32


# The backup folder's bookkeeping, in this process with the default strategy.


class FakeRun:
    def __init__(self, run_id):
        self.run_id = run_id


def test_a_backup_resumes_the_run_it_was_made_for(tmp_path):
    import tensorflow as tf

    from pipeline.training.resume import Backup

    opened = []

    def open_run(run_id):
        opened.append(run_id)
        return FakeRun(run_id or f"new-{len(opened)}")

    backup = Backup(tmp_path / "b", tf.distribute.get_strategy())
    assert backup.resume_or_start("params-1", open_run).run_id == "new-1"
    assert json.loads((tmp_path / "b" / "mlflow_run.json").read_text()) == {
        "run_id": "new-1",
        "fingerprint": "params-1",
    }
    (tmp_path / "b" / "history.json").write_text("[]")
    assert backup.resume_or_start("params-1", open_run).run_id == "new-1"  # a killed run, same params
    assert (tmp_path / "b" / "history.json").exists()
    assert backup.resume_or_start("params-2", open_run).run_id == "new-3"  # other params: start over
    assert not (tmp_path / "b" / "history.json").exists()
    assert opened == [None, "new-1", None]
    backup.finish()
    assert not (tmp_path / "b").exists()


def test_without_a_folder_nothing_is_written(tmp_path, monkeypatch):
    import tensorflow as tf

    from pipeline.training.resume import Backup, EpochPublisher, EpochRecorder

    monkeypatch.chdir(tmp_path)
    backup = Backup(None, tf.distribute.get_strategy())
    assert backup.resume_or_start("p", FakeRun).run_id is None
    hooks = backup.hooks(model=None, loop="custom", train_samples=10, on_epoch=None)
    assert (type(hooks.recorder), hooks.backup, type(hooks.publisher), hooks.initial_epoch) == (
        EpochRecorder,
        None,
        EpochPublisher,
        0,
    )
    backup.finish()
    assert list(tmp_path.iterdir()) == []
