"""BatchNormalization's moving statistics recomputed at the end of each epoch, with the epoch's
final weights, from training pictures as the model trains on them.

While training, a BatchNormalization layer normalises with each batch's own statistics and keeps
moving averages of them for evaluation. Those averages mix batches seen under earlier weights,
which move fast in a short training's first epochs: the model evaluated at an epoch's end
normalises with statistics that are not its own, and its validation accuracy swings from one
epoch to the next while its training accuracy climbs smoothly. The statistics of a few hundred
training pictures, taken with the weights as they are, follow the weights instead (detectron2's
PreciseBN does the same for detection models). The pictures are augmented as in training: the
layers after each normalisation learnt from pictures normalised so (docs/own-data.md: the falls
of the validation accuracy with the moving averages and with the recomputed statistics).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import keras
import numpy as np
import tensorflow as tf

from pipeline.data.inputs import image_size_for, make_dataset

if TYPE_CHECKING:
    from pipeline.config.keys.training import AnyTrainConfig
    from pipeline.data.prepared import Prepared


def epoch_statistics(cfg: AnyTrainConfig, prepared: Prepared, model: keras.Model) -> Optional[EpochStatistics]:
    """The callback that recomputes the model's BatchNormalization statistics each epoch from
    the first `batchnorm_statistics` pictures of the training split, in batches of a replica's
    (as each replica normalises its batch while training); None when the model's settings ask
    for none or it has no such layer. Every worker reads the same pictures, so that all keep the
    same statistics."""
    count = getattr(cfg.settings, "batchnorm_statistics", 0)
    if not count or not layers_of(model):
        return None
    pictures = make_dataset(
        prepared,
        "train",
        batch_size=cfg.batch_size_per_replica,
        shuffle=False,
        image_size=image_size_for(prepared, model),
        limit=count,
    )
    return EpochStatistics(pictures)


class EpochStatistics(keras.callbacks.Callback):
    """Recomputes every BatchNormalization layer's moving mean and variance from `pictures` (a
    dataset of (pictures, labels) batches, the same on every worker: each worker computes the
    same statistics itself, with no reduction across workers) once per epoch: before the
    validation split is evaluated, or at the epoch's end without one, so that what is
    validated, kept as the best epoch and backed up all normalise alike. Each layer's
    statistics are the means over the batches of its batch statistics in training mode (the
    pictures augmented and the layers before it normalising with the batch's own, as while
    training)."""

    def __init__(self, pictures: tf.data.Dataset):
        super().__init__()
        self.pictures = pictures
        self._done = False

    def on_epoch_begin(self, epoch, logs=None):
        self._done = False

    def on_test_begin(self, logs=None):
        self._recompute()

    def on_epoch_end(self, epoch, logs=None):
        self._recompute()

    def _recompute(self) -> None:
        if self._done:
            return
        self._done = True
        recompute(self.model, self.pictures)


def layers_of(model: keras.Model) -> list[keras.layers.BatchNormalization]:
    """The model's BatchNormalization layers, nested models' included, in order."""
    found = []
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            found.append(layer)
        elif isinstance(layer, keras.Model):
            found.extend(layers_of(layer))
    return found


def statistics_of(layers: list[keras.layers.BatchNormalization]) -> list[np.ndarray]:
    """Each layer's moving mean and moving variance, one after the other in one array."""
    return [np.concatenate([layer.moving_mean.numpy(), layer.moving_variance.numpy()]) for layer in layers]


def recompute(model: keras.Model, pictures: tf.data.Dataset) -> None:
    """Each BatchNormalization layer's moving statistics set to the mean of its batch statistics
    in training mode over `pictures` (each batch weighed by its size)."""
    layers = layers_of(model)
    if not layers:
        return
    momenta = [layer.momentum for layer in layers]
    before = [(layer.moving_mean.numpy(), layer.moving_variance.numpy()) for layer in layers]
    sums = [np.zeros(2 * layer.moving_mean.shape[0]) for layer in layers]
    seen = 0
    try:
        for layer, (mean, variance) in zip(layers, before):  # the moving statistics become the batch's own
            layer.momentum = 0.0
            layer.moving_mean.assign(np.zeros_like(mean))  # 0 x 0, not 0 x a NaN they might hold
            layer.moving_variance.assign(np.ones_like(variance))
        for x, _ in pictures:
            model(x, training=True)
            n = int(x.shape[0])
            for total, found in zip(sums, statistics_of(layers)):
                total += n * found
            seen += n
    finally:
        for layer, momentum in zip(layers, momenta):
            layer.momentum = momentum
    if not seen:  # no picture: the statistics as they were
        for layer, (mean, variance) in zip(layers, before):
            layer.moving_mean.assign(mean)
            layer.moving_variance.assign(variance)
        return
    for layer, total in zip(layers, sums):
        mean, variance = np.split(total / seen, 2)
        layer.moving_mean.assign(mean)
        layer.moving_variance.assign(variance)
