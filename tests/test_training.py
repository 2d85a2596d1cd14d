"""Models, input pipelines and a short real training run (default strategy, one process)."""

import dataclasses

import numpy as np
import pytest

from conftest import ROOT
from fixtures import make_reuters_npz
from pipeline.config import load_params
from pipeline.data import reuters

pytestmark = pytest.mark.slow

import tensorflow as tf  # noqa: E402

from pipeline import models, training  # noqa: E402
from pipeline.data.inputs import make_dataset, prepare_images  # noqa: E402


def test_lr_decay_schedule():
    rates = [training.lr_at_epoch(1e-3, (30,), 0.1, e) for e in range(40)]
    assert rates[:30] == [1e-3] * 30
    assert rates[30:] == pytest.approx([1e-4] * 10)
    assert training.lr_at_epoch(1.0, (2, 4), 0.5, 5) == 0.25


def test_shuffle_gives_a_new_order_every_epoch_and_sees_every_sample():
    x = np.arange(100, dtype=np.int32)
    ds = make_dataset(x, x, batch_size=10, shuffle=True, seed=1)
    first = np.concatenate([b[0].numpy() for b in ds])
    second = np.concatenate([b[0].numpy() for b in ds])
    assert sorted(first) == sorted(second) == list(range(100))
    assert first.tolist() != second.tolist()
    unshuffled = np.concatenate([b[0].numpy() for b in make_dataset(x, x, batch_size=30, shuffle=False)])
    assert unshuffled.tolist() == list(range(100))


def test_images_are_scaled_resized_and_expanded_in_the_pipeline():
    x = np.zeros((4, 28, 28), np.uint8)
    x[:, 0, 0] = 255
    out = prepare_images(tf.constant(x), 32).numpy()
    assert out.shape == (4, 32, 32, 3) and out.dtype == np.float32
    assert out.min() == -1.0 and out.max() <= 1.0 and out.max() > 0


def test_reuters_model_is_the_seeds_architecture():
    model = models.reuters_conv1d(max_len=300, vocab_size=1000, num_classes=46, embedding_dim=7)
    kinds = [(type(layer).__name__, getattr(layer, "filters", None), getattr(layer, "kernel_size", None))
             for layer in model.layers[1:]]
    assert kinds == [("Embedding", None, None), ("Conv1D", 64, (5,)), ("MaxPooling1D", None, None),
                     ("Conv1D", 32, (3,)), ("MaxPooling1D", None, None), ("Flatten", None, None),
                     ("Dense", None, None)]
    assert model.get_layer("embedding").output_dim == 7
    assert model.output_shape == (None, 46)
    # logits: the last layer has no softmax
    assert model.get_layer("logits").activation.__name__ == "linear"


def test_mobilenet_model_has_no_top_and_logits():
    model = models.mobilenet_v2(img_size=32, num_classes=10, dense_units=512, batchnorm_momentum=0.9)
    assert model.input_shape == (None, 32, 32, 3)
    assert model.output_shape == (None, 10)
    backbone = model.layers[1]
    assert backbone.name.startswith("mobilenetv2") and backbone.output_shape == (None, 1280)
    assert model.get_layer("dense").units == 512
    assert model.get_layer("logits").activation.__name__ == "linear"
    norms = [layer for layer in backbone.layers if isinstance(layer, models.keras.layers.BatchNormalization)]
    assert norms and {layer.momentum for layer in norms} == {0.9}


def test_short_training_run_records_each_epoch(tmp_path):
    make_reuters_npz(tmp_path / "reuters.npz", n=200)
    params = load_params(ROOT / "params.yaml", "reuters")
    splits, stats = reuters.prepare(*reuters.load_raw(tmp_path), dataclasses.replace(params.preprocess, max_len=60))
    cfg = dataclasses.replace(params.train, epochs=3, lr_decay_epochs=(2,), batch_size_per_replica=16)
    seen = []
    result = training.train(cfg, splits=splits, stats=stats, strategy=tf.distribute.get_strategy(),
                            on_epoch=lambda epoch, row: seen.append(epoch), verbose=0)
    assert seen == [1, 2, 3]
    assert [r["epoch"] for r in result.history] == [1, 2, 3]
    assert [r["learning_rate"] for r in result.history] == pytest.approx([1e-3, 1e-3, 1e-4])
    assert result.history[-1]["loss"] < result.history[0]["loss"]
    assert all(r["samples_per_second"] > 0 and r["epoch_seconds"] >= r["train_seconds"] for r in result.history)
    assert result.global_batch_size == 16
    logits = result.model.predict(splits["test"][0][:3], verbose=0)
    assert not np.allclose(logits.sum(axis=1), 1.0)
    path = tmp_path / "history.csv"
    training.write_history_csv(result.history, path)
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(training.HISTORY_COLUMNS) and len(lines) == 4


def test_evaluation_batches_split_evenly_and_leave_no_replica_empty():
    assert training.even_batch(1000, 64, 2) == 64
    assert training.even_batch(19, 32, 2) == 16  # 18 + 1 would leave a replica empty -> 16 + 3
    assert training.even_batch(65, 64, 2) == 62  # 64 + 1 -> 62 + 3
    assert training.even_batch(19, 32, 1) == 19
    for n in [2, 4, *range(6, 300)]:  # 3 and 5 samples cannot be split so on 2 replicas
        size = training.even_batch(n, 32, 2)
        assert size % 2 == 0 and (n % size == 0 or n % size >= 2), n


def test_training_batches():
    assert training.train_batches(1000, 64, 2) == (64, False)  # last batch 40
    assert training.train_batches(129, 64, 2) == (64, True)    # last batch 1: one replica empty
    assert training.train_batches(129, 64, 1) == (64, False)
    assert training.train_batches(20, 64, 2) == (20, False)
