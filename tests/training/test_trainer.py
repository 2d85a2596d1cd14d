"""Batch sizes, the learning-rate schedule and a short real training run (default strategy, one process)."""

import dataclasses
import hashlib
import json
import time

import numpy as np
import pytest
from support.datasets import make_reuters_raw
from support.project import ROOT

from pipeline.config.loading.loader import load_params
from pipeline.data import reuters
from pipeline.kinds.labelled_texts import ReutersPreprocessConfig, full_length_facts

pytestmark = pytest.mark.slow

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from pipeline.training import lifecycle, trainer  # noqa: E402


def test_lr_decay_schedule():
    rates = [trainer.lr_at_epoch(1e-3, (30,), 0.1, e) for e in range(40)]
    assert rates[:30] == [1e-3] * 30
    assert rates[30:] == pytest.approx([1e-4] * 10)
    assert trainer.lr_at_epoch(1.0, (2, 4), 0.5, 5) == 0.25


def test_cosine_schedule_falls_from_the_rate_to_its_factor_at_the_last_epoch():
    rates = [trainer.cosine_lr_at_epoch(1e-3, 0.01, 5, e) for e in range(5)]
    assert rates == pytest.approx(
        [1e-3, 1e-3 * (0.01 + 0.99 * (1 + 2**-0.5) / 2), 5.05e-4, 1e-3 * (0.01 + 0.99 * (1 - 2**-0.5) / 2), 1e-5]
    )
    assert all(a > b for a, b in zip(rates, rates[1:]))
    assert trainer.cosine_lr_at_epoch(1e-3, 0.01, 1, 0) == 1e-3  # one epoch: at the rate


@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_each_loop_trains_each_epoch_at_the_cosine_schedules_rate(tmp_path, loop):
    make_reuters_raw(tmp_path, n=120)
    params = load_params(ROOT / "params.yaml", "reuters")
    assert isinstance(params.preprocess, ReutersPreprocessConfig)
    data = reuters.prepare(
        tmp_path, tmp_path / "prepared", dataclasses.replace(params.preprocess, max_len=20), "preprocess.reuters"
    )
    cfg = dataclasses.replace(
        params.train, epochs=3, lr_schedule="cosine", lr_decay_factor=0.01, loop=loop, learning_rate=1e-3
    )
    result = trainer.train(cfg, prepared=data, strategy=tf.distribute.get_strategy(), verbose=0)
    assert [r["learning_rate"] for r in result.history] == pytest.approx([1e-3, 5.05e-4, 1e-5])


def test_a_training_without_a_validation_split_has_no_val_figures_in_its_summary(tmp_path):
    """No NaN in train.json (which JSON has no word for): the val_ figures are left out; the
    history keeps its columns (the plots declare them)."""
    make_reuters_raw(tmp_path, n=120)
    params = load_params(ROOT / "params.yaml", "reuters")
    assert isinstance(params.preprocess, ReutersPreprocessConfig)
    whole = dataclasses.replace(params.preprocess, max_len=20, validation_split=0.0)
    data = reuters.prepare(tmp_path, tmp_path / "prepared", whole, "preprocess.reuters")
    stopping = dataclasses.replace(params.train.early_stopping, monitor="loss", mode="min")
    cfg = dataclasses.replace(params.train, epochs=2, early_stopping=stopping, learning_rate=1e-3)
    result = trainer.train(cfg, prepared=data, strategy=tf.distribute.get_strategy(), verbose=0)
    assert [r["epoch"] for r in result.history] == [1, 2]
    assert all(np.isnan(r["val_accuracy"]) for r in result.history)
    summary_keys = {"final_loss", "final_accuracy", "best_epoch", "kept_epoch", "epochs_trained", "params_count"}
    assert set(result.summary) == summary_keys
    files = lifecycle.Outputs(tmp_path / "model", tmp_path / "history.csv", tmp_path / "train.json", tmp_path / "c.png")
    trainer.write_outputs(result, files, figures={}, run_ids={}, title="t")

    def no_constant(name):
        raise AssertionError(f"train.json holds {name}")

    summary = json.loads((tmp_path / "train.json").read_text(), parse_constant=no_constant)
    assert summary == {"global_batch_size": cfg.batch_size_per_replica, **result.summary}
    assert (tmp_path / "history.csv").read_text().splitlines()[0].split(",") == list(trainer.HISTORY_COLUMNS)


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
    observed = []

    class Observer(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            observed.append((epoch + 1, self.model, sorted(logs)))

    result = trainer.train(
        cfg,
        prepared=data,
        strategy=tf.distribute.get_strategy(),
        on_epoch=lambda epoch, row: seen.append(epoch),
        verbose=0,
        observer=Observer(),
    )
    assert seen == [1, 2, 3]
    assert [epoch for epoch, _, _ in observed] == [1, 2, 3]
    assert all(model is result.model for _, model, _ in observed)
    assert all({"accuracy", "val_accuracy"} <= set(keys) for _, _, keys in observed)
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
        files = lifecycle.Outputs(
            folder / "model",
            folder / "history.csv",
            folder / "train.json",
            folder / "curves.png",
            folder / "measured.json",
        )
        trainer.write_outputs(result, files, figures=figures, run_ids={"run_id": "r"}, title="t")

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
    """Recorder, statistics, observer, schedule, keeper, backup, stopper, publisher
    (trainer.callbacks_in_order says why); what a training does not use is left out."""
    import keras

    from pipeline.training.batchnorm import EpochStatistics
    from pipeline.training.early_stopping import BestEpoch
    from pipeline.training.resume import Backup

    params = load_params(ROOT / "params.yaml", "reuters")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    backup = Backup(tmp_path / "backup", tf.distribute.get_strategy())
    hooks = backup.hooks(model, loop, train_samples=10, on_epoch=None)
    best = BestEpoch(params.train.early_stopping, hooks.recorder, epochs=3, folder=backup.best_folder)
    schedule = keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr)
    statistics = EpochStatistics(tf.data.Dataset.from_tensor_slices(([[0.0, 0.0, 0.0]], [0])).batch(1))
    order = trainer.callbacks_in_order(
        recorder=hooks.recorder,
        statistics=statistics,
        schedule=schedule,
        keeper=best.keeper,
        backup=hooks.backup,
        stopper=best.stopper,
        publisher=hooks.publisher,
        observer=keras.callbacks.LambdaCallback(),
    )
    assert [type(c).__name__ for c in order] == [
        "EpochRecorder",
        "EpochStatistics",
        "LambdaCallback",  # the observer: the epoch's statistics recomputed, before the keeper
        "LearningRateScheduler",
        "_Keeper",
        backup_type,
        "_Stopper",
        "EpochPublisher",
    ]
    unbacked = Backup(None, tf.distribute.get_strategy()).hooks(model, loop, train_samples=10, on_epoch=None)
    order = trainer.callbacks_in_order(
        recorder=unbacked.recorder,
        statistics=None,
        schedule=None,
        keeper=best.keeper,
        backup=unbacked.backup,
        stopper=best.stopper,
        publisher=unbacked.publisher,
    )
    assert [type(c).__name__ for c in order] == ["EpochRecorder", "_Keeper", "_Stopper", "EpochPublisher"]


def test_the_class_weights_are_the_training_splits_or_none(tmp_path):
    from types import SimpleNamespace

    from pipeline.data import prepared

    y = np.array([0, 0, 0, 1], dtype=np.int32)
    data = prepared.write_arrays(
        tmp_path / "data",
        {"train": (np.zeros((4, 2), np.int32), y)},
        input_="sequences",
        class_names=["a", "b"],
        facts=full_length_facts(2, 10),
    )
    cfg = load_params(ROOT / "params.yaml", "reuters").train
    assert cfg.class_weight == "none" and trainer.class_weights(cfg, data) is None
    balanced = dataclasses.replace(cfg, class_weight="balanced")
    assert trainer.class_weights(balanced, data) == pytest.approx([4 / 6, 2.0])
    # fit is handed them as Keras takes them; with none, no class_weight argument at all
    seen = []
    model = SimpleNamespace(fit=lambda *args, **kwargs: seen.append(kwargs))
    for weights in (None, [4 / 6, 2.0]):
        run = SimpleNamespace(model=model, train_ds="train", val_ds=None, class_weights=weights)
        trainer._run(balanced, run, None, [], 0, None, 0)  # type: ignore[arg-type]  # what _run reads of one
    assert "class_weight" not in seen[0] and seen[1]["class_weight"] == {0: 4 / 6, 1: 2.0}


def weighted_case(tmp_path, loop: str, replicas: int, class_weight: str) -> dict:
    import subprocess
    import sys

    from support.processes import subprocess_env

    out = tmp_path / f"{loop}-{replicas}-{class_weight}.json"
    worker = ROOT / "tests" / "workers" / "train_case.py"
    args = [sys.executable, str(worker), "weighted", loop, str(replicas), class_weight, str(out)]
    result = subprocess.run(args, env=subprocess_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.distributed
def test_balanced_class_weights_weigh_the_loss_alike_in_both_loops_on_two_replicas(tmp_path):
    """On 48 samples of classes of 30, 12 and 6 (each epoch one step of the whole split, each
    run in its own process, two replicas): fit's class_weight and the custom loop's weighting
    give the loss computed by hand, sum(w_i x l_i) / n under the initial model, and the same
    epochs after; accuracy is not weighted (fit's compiled metrics take no sample weights)."""
    fit, custom = (weighted_case(tmp_path, loop, 2, "balanced") for loop in ("fit", "custom"))
    assert fit["weights"] == pytest.approx([48 / (3 * 30), 48 / (3 * 12), 48 / (3 * 6)])
    for case in (fit, custom):
        first = case["history"][0]
        assert first["loss"] == pytest.approx(case["weighted_loss"], rel=1e-6)
        assert case["weighted_loss"] != pytest.approx(case["loss"], rel=1e-4)  # the weights count
        assert first["accuracy"] == pytest.approx(case["accuracy"])
    for a, b in zip(fit["history"], custom["history"], strict=True):
        for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-6), (key, fit, custom)
    plain = weighted_case(tmp_path, "fit", 2, "none")
    assert plain["history"][0]["loss"] == pytest.approx(plain["loss"], rel=1e-6)  # the plain mean
    assert plain["history"][1]["loss"] != pytest.approx(fit["history"][1]["loss"], rel=1e-3)  # another step


def statistics_case(tmp_path, loop: str, replicas: int, count: int) -> dict:
    import subprocess
    import sys

    from support.processes import subprocess_env

    out = tmp_path / f"statistics-{loop}-{replicas}-{count}.json"
    worker = ROOT / "tests" / "workers" / "statistics_case.py"
    args = [sys.executable, str(worker), loop, str(replicas), str(count), str(out)]
    result = subprocess.run(args, env=subprocess_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.distributed
@pytest.mark.parametrize("loop", ["fit", "custom"])
def test_the_trained_model_normalises_with_its_own_statistics_on_two_replicas(tmp_path, loop):
    """batchnorm_statistics: after each epoch (both loops, two replicas) every BatchNormalization
    layer holds the statistics of the first training pictures under the model's final weights,
    so recomputing them changes nothing, and the validation was computed with them; with 0,
    Keras' moving averages, which differ."""
    case = statistics_case(tmp_path, loop, 2, 48)
    assert case["layers"] == 4 and len(case["history"]) == 2
    assert case["difference"] < 1e-5, case
    # validated with them: the epoch's recorded validation loss is the kept model's
    assert case["recorded_val_loss"] == pytest.approx(case["own_val_loss"], rel=1e-4)
    moving = statistics_case(tmp_path, loop, 2, 0)
    assert moving["difference"] > 1e-3
