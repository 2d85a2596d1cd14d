"""The strategy.run loop on one replica (the multi-replica cases are in test_equivalence.py,
each in its own process)."""

import dataclasses
from pathlib import Path
from typing import Literal

import numpy as np
import pytest
from support.models import reuters_model
from support.project import ROOT

from pipeline.config.loading.loader import load_params

pytestmark = pytest.mark.slow

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from pipeline.data import prepared  # noqa: E402
from pipeline.data.inputs import make_dataset  # noqa: E402
from pipeline.kinds.labelled_texts import full_length_facts  # noqa: E402
from pipeline.training import models  # noqa: E402
from pipeline.training.custom_loop import CustomLoop  # noqa: E402


class Seen(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.calls = []

    def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(("begin", epoch, float(self.model.optimizer.learning_rate)))

    def on_test_begin(self, logs=None):
        self.calls.append(("test",))

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("end", epoch, sorted(logs)))


def small_loop(folder: Path, seed=0):
    keras.utils.set_random_seed(seed)
    rng = np.random.RandomState(seed)
    x = rng.randint(1, 50, (40, 12)).astype(np.int32)
    y = (x[:, 0] % 46).astype(np.int32)
    cfg = dataclasses.replace(load_params(ROOT / "params.yaml", "reuters").train, loop="custom")
    strategy = tf.distribute.get_strategy()
    with strategy.scope():
        model = reuters_model(max_len=12, vocab_size=50)
        models.compile_model(model, cfg)
    data = prepared.write_arrays(
        folder,
        {"train": (x, y), "val": (x[:16], y[:16])},
        input_="sequences",
        class_names=[str(c) for c in range(46)],
        facts=full_length_facts(12, 50),
    )
    train = make_dataset(data, "train", batch_size=8, shuffle=True, seed=seed, shuffle_buffer=40)
    val = make_dataset(data, "val", batch_size=8, shuffle=False)
    return CustomLoop(model, strategy), train, val, (x[:16], y[:16])


def test_epochs_call_the_keras_hooks_with_fits_log_keys_and_the_schedule(tmp_path):
    loop, train, val, _ = small_loop(tmp_path)
    seen = Seen()
    loop.fit(train, val, epochs=3, initial_epoch=1, callbacks=[seen], lr_for_epoch=lambda e: 0.1 * e, progress=False)
    assert seen.calls == [
        ("begin", 1, pytest.approx(0.1)),
        ("test",),
        ("end", 1, ["accuracy", "loss", "val_accuracy", "val_loss"]),
        ("begin", 2, pytest.approx(0.2)),
        ("test",),
        ("end", 2, ["accuracy", "loss", "val_accuracy", "val_loss"]),
    ]


def test_validation_figures_are_the_models_own(tmp_path):
    loop, train, val, (x, y) = small_loop(tmp_path)
    logs = {}

    class Keep(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, epoch_logs=None):
            logs.update(epoch_logs)

    loop.fit(train, val, epochs=1, callbacks=[Keep()], progress=False)
    logits = loop.model.predict(x, verbose=0)
    expected_loss = float(np.mean(models.loss(reduction=None)(y, logits)))
    assert logs["val_loss"] == pytest.approx(expected_loss, rel=1e-5)
    assert logs["val_accuracy"] == pytest.approx(float(np.mean(logits.argmax(1) == y)))
    assert logs["loss"] > 0 and 0 <= logs["accuracy"] <= 1


class Kept(keras.callbacks.Callback):
    """The last epoch's logs."""

    def __init__(self):
        super().__init__()
        self.logs = {}

    def on_epoch_end(self, epoch, logs=None):
        self.logs = dict(logs or {})


def test_class_weights_weigh_the_step_as_fits_class_weight_does():
    """From the same weights, one SGD step on one batch: the custom loop's weighted loss and
    weights after the step are fit(class_weight=...)'s, and its loss is sum(w_i x l_i) / n."""
    rng = np.random.RandomState(1)
    x = rng.randint(1, 50, (40, 12)).astype(np.int32)
    y = (x[:, 0] % 5).astype(np.int32)
    weights = rng.uniform(0.2, 3.0, 46).tolist()
    cfg = dataclasses.replace(load_params(ROOT / "params.yaml", "reuters").train, optimizer="sgd", learning_rate=0.5)
    keras.utils.set_random_seed(0)
    trained = {}
    for loop in ("fit", "custom"):
        model = reuters_model(max_len=12, vocab_size=50)
        if loop == "fit":
            initial = model.get_weights()
        model.set_weights(initial)
        models.compile_model(model, dataclasses.replace(cfg, loop=loop))
        logits = model.predict(x, verbose=0)
        expected = float(np.mean(np.asarray(weights)[y] * models.loss(reduction=None)(y, logits)))
        batch = tf.data.Dataset.from_tensor_slices((x, y)).batch(40)
        if loop == "fit":
            history = model.fit(batch, class_weight=dict(enumerate(weights)), epochs=1, verbose=0, shuffle=False)
            loss = history.history["loss"][0]
        else:
            kept = Kept()
            CustomLoop(model, tf.distribute.get_strategy(), class_weights=weights).fit(
                batch, None, epochs=1, callbacks=[kept], progress=False
            )
            loss = kept.logs["loss"]
            assert kept.logs["accuracy"] == pytest.approx(float(np.mean(logits.argmax(1) == y)))  # not weighted
        assert loss == pytest.approx(expected, rel=1e-5)
        trained[loop] = model.get_weights()
    assert max(float(np.abs(a - b).max()) for a, b in zip(trained["fit"], trained["custom"])) < 1e-6
    assert max(float(np.abs(a - b).max()) for a, b in zip(trained["fit"], initial)) > 1e-3  # the step moved them


def test_weight_decay_moves_the_weights_in_the_custom_loop_as_in_fit():
    """From the same weights, one SGD step on one batch with weight decay: both loops end on the
    same weights, and those are not the step's without decay."""
    rng = np.random.RandomState(2)
    x = rng.randint(1, 50, (40, 12)).astype(np.int32)
    y = (x[:, 0] % 5).astype(np.int32)
    cfg = dataclasses.replace(load_params(ROOT / "params.yaml", "reuters").train, optimizer="sgd", learning_rate=0.5)
    keras.utils.set_random_seed(0)
    initial = reuters_model(max_len=12, vocab_size=50).get_weights()
    batch = tf.data.Dataset.from_tensor_slices((x, y)).batch(40)
    trained = {}
    runs: tuple[tuple[Literal["fit", "custom"], float], ...] = (("fit", 0.1), ("custom", 0.1), ("fit", 0.0))
    for loop, decay in runs:
        model = reuters_model(max_len=12, vocab_size=50)
        model.set_weights(initial)
        models.compile_model(model, dataclasses.replace(cfg, loop=loop, weight_decay=decay))
        if loop == "fit":
            model.fit(batch, epochs=1, verbose=0, shuffle=False)
        else:
            CustomLoop(model, tf.distribute.get_strategy()).fit(batch, None, epochs=1, callbacks=[], progress=False)
        trained[loop, decay] = model.get_weights()
    decayed, custom, plain = trained["fit", 0.1], trained["custom", 0.1], trained["fit", 0.0]
    assert max(float(np.abs(a - b).max()) for a, b in zip(decayed, custom)) < 1e-6
    assert max(float(np.abs(a - b).max()) for a, b in zip(decayed, plain)) > 1e-3
