"""A `strategy.run` training loop: the same model, optimizer, history and logging as `fit`.

Per-example losses are averaged with `tf.nn.compute_average_loss` over the global batch of
each step (the samples of all replicas, so a short last batch is weighted right), regular-
ization losses are scaled with `tf.nn.scale_regularization_loss`, and loss sums, correct counts
and sample counts are reduced across replicas with `strategy.reduce`. This loop also works
under `MultiWorkerMirroredStrategy`, where Keras 3 `fit` does not (keras-team/keras#20585).

With class weights (`train.<ds>.class_weight: balanced`) each training sample's loss is
multiplied by its class's weight before that average, sum(w_i x l_i) / global batch, as Keras
`fit(class_weight=...)` weighs it; the epoch's training loss is then sum(w_i x l_i) / n, and its
accuracy is not weighted (the figures `fit` reports: its compiled `metrics` take no sample
weights). Validation is unweighted, as in `fit`. Without class weights the step is the one it
was before they existed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from pipeline.training.models import loss

SUM = tf.distribute.ReduceOp.SUM


class CustomLoop:
    """Train a model compiled by `models.compile_model` with `strategy.run`; the optimizer is
    the model's own, built there. `class_weights`: each class's weight in the training loss
    (by class index), or None: every sample weighs 1; `loss_name`: train.<ds>.loss."""

    def __init__(
        self,
        model: keras.Model,
        strategy,
        *,
        jit_compile: bool = False,
        class_weights: Optional[Sequence[float]] = None,
        loss_name: str = "cross_entropy",
    ):
        self.model = model
        self.strategy = strategy
        self.optimizer = model.optimizer
        self.loss_obj = loss(loss_name, reduction=None)  # per sample: averaged over the global batch below
        # float32, as Keras' fit makes its class weights a tensor
        self.class_weights = None if class_weights is None else tf.constant(list(class_weights), tf.float32)
        self._replica_train = tf.function(self._train_on_replica, jit_compile=jit_compile)
        self._replica_eval = tf.function(self._eval_on_replica, jit_compile=jit_compile)

    def _sums(self, labels, logits, per_example):
        """(sum of the per-example losses, weighted ones when the step weighs them; right
        answers; samples)."""
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
        correct = tf.reduce_sum(tf.cast(tf.equal(predicted, tf.cast(labels, tf.int32)), tf.float32))
        count = tf.cast(tf.shape(labels)[0], tf.float32)
        return tf.reduce_sum(per_example), correct, count

    def _train_on_replica(self, x, y):
        context = tf.distribute.get_replica_context()
        local = tf.cast(tf.shape(y)[0], tf.float32)
        global_batch = tf.cast(context.all_reduce(SUM, local), tf.int32)
        weights = None if self.class_weights is None else tf.gather(self.class_weights, tf.cast(y, tf.int32))
        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            per_example = self.loss_obj(y, tf.cast(logits, tf.float32))
            if weights is not None:
                per_example = per_example * weights
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            if self.model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(self.model.losses))
            # Loss scaling under mixed_float16 (compile wraps the optimizer in a
            # LossScaleOptimizer); a no-op otherwise.
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return self._sums(y, logits, per_example)

    def _eval_on_replica(self, x, y):
        logits = self.model(x, training=False)
        return self._sums(y, logits, self.loss_obj(y, tf.cast(logits, tf.float32)))

    @tf.function(reduce_retracing=True)
    def train_step(self, batch):
        sums = self.strategy.run(self._replica_train, args=batch)
        return [self.strategy.reduce(SUM, v, axis=None) for v in sums]

    @tf.function(reduce_retracing=True)
    def eval_step(self, batch):
        sums = self.strategy.run(self._replica_eval, args=batch)
        return [self.strategy.reduce(SUM, v, axis=None) for v in sums]

    def _run_epoch(self, dataset, step, bar=None) -> tuple[float, float]:
        totals = np.zeros(3)
        for batch in dataset:
            totals += [float(v) for v in step(batch)]
            if bar is not None:
                bar.update(1)
                bar.set_postfix(
                    loss=f"{totals[0] / totals[2]:.4f}", accuracy=f"{totals[1] / totals[2]:.4f}", refresh=False
                )
        return totals[0] / max(totals[2], 1), totals[1] / max(totals[2], 1)

    def fit(
        self,
        train_ds: tf.data.Dataset,
        val_ds: Optional[tf.data.Dataset],
        *,
        epochs: int,
        initial_epoch: int = 0,
        callbacks=(),
        lr_for_epoch: Optional[Callable[[int], float]] = None,
        progress: Optional[bool] = None,
    ) -> None:
        """Train epochs `initial_epoch`..`epochs - 1` (fewer when a callback sets the model's
        `stop_training`), calling the Keras callbacks' train and epoch hooks."""
        from tqdm import tqdm

        if progress is None:
            progress = sys.stderr.isatty()
        dist_train = self.strategy.experimental_distribute_dataset(train_ds)
        dist_val = self.strategy.experimental_distribute_dataset(val_ds) if val_ds is not None else None
        steps = int(train_ds.cardinality()) if int(train_ds.cardinality()) > 0 else None
        self.model.stop_training = False
        for callback in callbacks:
            callback.set_model(self.model)
        for callback in callbacks:
            callback.on_train_begin()
        for epoch in range(initial_epoch, epochs):
            if self.model.stop_training:  # a callback stopped the run (early stopping)
                break
            if lr_for_epoch is not None:
                self.optimizer.learning_rate = lr_for_epoch(epoch)
            for callback in callbacks:
                callback.on_epoch_begin(epoch)
            with tqdm(
                total=steps, desc=f"epoch {epoch + 1}/{epochs}", unit="step", disable=not progress, leave=True
            ) as bar:
                loss, accuracy = self._run_epoch(dist_train, self.train_step, bar)
            logs = {"loss": loss, "accuracy": accuracy}
            if dist_val is not None:
                for callback in callbacks:
                    callback.on_test_begin()
                logs["val_loss"], logs["val_accuracy"] = self._run_epoch(dist_val, self.eval_step)
            for callback in callbacks:
                callback.on_epoch_end(epoch, logs)
        for callback in callbacks:
            callback.on_train_end()
