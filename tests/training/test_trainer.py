"""Batch sizes, the learning-rate schedule and a short real training run (default strategy, one process)."""

import dataclasses
import hashlib
import json
import time

import numpy as np
import pytest
from fixtures import make_reuters_raw
from helpers import ROOT

from pipeline.config.loader import load_params
from pipeline.config.preprocessing import ReutersPreprocessConfig
from pipeline.data import reuters

pytestmark = pytest.mark.slow

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from pipeline.training import trainer  # noqa: E402


def test_lr_decay_schedule():
    rates = [trainer.lr_at_epoch(1e-3, (30,), 0.1, e) for e in range(40)]
    assert rates[:30] == [1e-3] * 30
    assert rates[30:] == pytest.approx([1e-4] * 10)
    assert trainer.lr_at_epoch(1.0, (2, 4), 0.5, 5) == 0.25


def test_short_training_run_records_each_epoch(tmp_path):
    make_reuters_raw(tmp_path, n=200)
    params = load_params(ROOT / "params.yaml", "reuters")
    assert isinstance(params.preprocess, ReutersPreprocessConfig)
    data = reuters.prepare(
        tmp_path, tmp_path / "prepared", dataclasses.replace(params.preprocess, max_len=60), "preprocess.reuters"
    )
    test_x = data.head("test", 3)[0]
    cfg = dataclasses.replace(
        params.train, epochs=3, lr_decay_epochs=(2,), batch_size_per_replica=16, learning_rate=1e-3
    )
    seen = []
    result = trainer.train(
        cfg,
        data=data,
        strategy=tf.distribute.get_strategy(),
        on_epoch=lambda epoch, row: seen.append(epoch),
        verbose=0,
    )
    assert seen == [1, 2, 3]
    assert [r["epoch"] for r in result.history] == [1, 2, 3]
    assert [r["learning_rate"] for r in result.history] == pytest.approx([1e-3, 1e-3, 1e-4])
    assert result.history[-1]["loss"] < result.history[0]["loss"]
    assert all(
        r["epoch_samples_per_second"] > 0 and r["epoch_seconds"] >= r["epoch_train_seconds"] for r in result.history
    )
    assert result.global_batch_size == 16
    logits = result.model.predict(test_x, verbose=0)
    assert not np.allclose(logits.sum(axis=1), 1.0)
    figures = {
        "replicas": 1,
        "workers": 1,
        "logical_devices": 1,
        "physical_gpus": 0,
        "strategy": "DefaultStrategy",
        "cross_device_ops": "none",
    }
    outputs = {name: tmp_path / name for name in ("history.csv", "train.json", "curves.png", "measured.json")}

    def write(folder):
        trainer.write_outputs(
            result,
            figures=figures,
            run_ids={"run_id": "r"},
            model_dir=folder / "model",
            history=folder / "history.csv",
            summary=folder / "train.json",
            curves=folder / "curves.png",
            measurements=folder / "measured.json",
            title="t",
        )

    write(tmp_path)
    lines = outputs["history.csv"].read_text().splitlines()
    assert lines[0] == "epoch,loss,accuracy,val_loss,val_accuracy,learning_rate" and len(lines) == 4
    model = tmp_path / "model" / "model.keras"
    assert json.loads((tmp_path / "model" / "run.json").read_text()) == {
        "run_id": "r",
        "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
    }
    # results: numbers only, none of them measured
    summary = json.loads(outputs["train.json"].read_text())
    assert summary == {"global_batch_size": 16, **result.summary} and all(
        isinstance(v, (int, float)) for v in summary.values()
    )
    measured = json.loads(outputs["measured.json"].read_text())
    assert measured["peak_rss_mb"] == round(result.peak_rss_mb) > 0 and measured["replicas"] == 1
    assert measured["samples_per_second"] > 0 and measured["steady_samples_per_second"] > 0
    assert set(measured) == {
        "train_seconds",
        "samples_per_second",
        "steady_samples_per_second",
        "peak_rss_mb",
        "replicas",
        "workers",
        "logical_devices",
        "physical_gpus",
    }
    assert outputs["curves.png"].stat().st_size > 0
    # a later save of the same result: the same bytes (no save date), and Keras loads it
    time.sleep(2.1)  # a zip entry's date has a 2 s resolution
    (tmp_path / "again").mkdir()
    write(tmp_path / "again")
    for name in ("history.csv", "train.json", "curves.png", "model/model.keras"):
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / name).read_bytes(), name
    loaded = keras.models.load_model(model)
    assert np.array_equal(loaded.predict(test_x, verbose=0), logits)


def test_evaluation_batches_split_evenly_and_leave_no_replica_empty():
    assert trainer.even_batch(1000, 64, 2) == 64
    assert trainer.even_batch(19, 32, 2) == 16  # 18 + 1 would leave a replica empty -> 16 + 3
    assert trainer.even_batch(65, 64, 2) == 62  # 64 + 1 -> 62 + 3
    assert trainer.even_batch(19, 32, 1) == 19
    for n in [2, 4, *range(6, 300)]:  # 3 and 5 samples cannot be split so on 2 replicas
        size = trainer.even_batch(n, 32, 2)
        assert size % 2 == 0 and (n % size == 0 or n % size >= 2), n


def test_training_batches():
    assert trainer.train_batches(1000, 64, 2) == (64, False)  # last batch 40
    assert trainer.train_batches(129, 64, 2) == (64, True)  # last batch 1: one replica empty
    assert trainer.train_batches(129, 64, 1) == (64, False)
    assert trainer.train_batches(20, 64, 2) == (20, False)


@pytest.mark.parametrize("loop,backup_type", [("fit", "AtomicBackupAndRestore"), ("custom", "EpochCheckpoint")])
def test_callbacks_run_in_the_order_their_rules_need(tmp_path, loop, backup_type):
    """Recorder, schedule, keeper, backup, stopper, publisher (trainer.callbacks_in_order says
    why); what a training does not use is left out."""
    import keras

    from pipeline.training.early_stopping import BestEpoch
    from pipeline.training.resume import Backup

    params = load_params(ROOT / "params.yaml", "reuters")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    backup = Backup(tmp_path / "backup", tf.distribute.get_strategy())
    hooks = backup.hooks(model, loop, train_samples=10, on_epoch=None)
    best = BestEpoch(params.train.early_stopping, hooks.recorder, epochs=3, folder=backup.best_folder)
    schedule = keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr)
    order = trainer.callbacks_in_order(
        recorder=hooks.recorder,
        schedule=schedule,
        keeper=best.keeper,
        backup=hooks.backup,
        stopper=best.stopper,
        publisher=hooks.publisher,
    )
    assert [type(c).__name__ for c in order] == [
        "EpochRecorder",
        "LearningRateScheduler",
        "_Keeper",
        backup_type,
        "_Stopper",
        "EpochPublisher",
    ]
    unbacked = Backup(None, tf.distribute.get_strategy()).hooks(model, loop, train_samples=10, on_epoch=None)
    order = trainer.callbacks_in_order(
        recorder=unbacked.recorder,
        schedule=None,
        keeper=best.keeper,
        backup=unbacked.backup,
        stopper=best.stopper,
        publisher=unbacked.publisher,
    )
    assert [type(c).__name__ for c in order] == ["EpochRecorder", "_Keeper", "_Stopper", "EpochPublisher"]
