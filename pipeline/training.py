"""Training under a tf.distribute strategy, with Keras `fit` or a custom `strategy.run` loop;
per-epoch timing, throughput and backups for resuming a killed run."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from pipeline.data.inputs import make_dataset
from pipeline.models import build_model

HISTORY_COLUMNS = (
    "epoch", "loss", "accuracy", "val_loss", "val_accuracy",
    "learning_rate", "epoch_seconds", "train_seconds", "samples_per_second",
)

OPTIMIZERS = {
    "adam": keras.optimizers.Adam,
    "nadam": keras.optimizers.Nadam,
    "sgd": keras.optimizers.SGD,
    "rmsprop": keras.optimizers.RMSprop,
}


def lr_at_epoch(base: float, decay_epochs, factor: float, epoch: int) -> float:
    """The learning rate of 0-based `epoch`: `base`, times `factor` once per decay epoch passed.

    A decay epoch d takes effect after d epochs, so `[30]` with 40 epochs trains 30 epochs at
    the base rate and 10 at base * factor.
    """
    return base * factor ** sum(1 for d in decay_epochs if epoch >= d)


def loss_fn():
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def compile_model(model: keras.Model, cfg) -> None:
    """Optimizer, loss on logits and accuracy; XLA and steps_per_execution apply to fit."""
    fit = getattr(cfg, "loop", "fit") == "fit"
    model.compile(
        optimizer=OPTIMIZERS[cfg.optimizer](learning_rate=cfg.learning_rate),
        loss=loss_fn(),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=bool(cfg.jit_compile) if fit else False,
        steps_per_execution=cfg.steps_per_execution if fit else 1,
    )


class EpochRecorder(keras.callbacks.Callback):
    """Times each epoch (training alone, and with validation) and keeps one row per epoch,
    in the backup folder too (before the epoch's checkpoint, so a checkpoint never lacks its row)."""

    def __init__(self, train_samples: int, backup_dir: Optional[Path] = None):
        super().__init__()
        self.train_samples = train_samples
        self.backup = Path(backup_dir) / "history.json" if backup_dir is not None else None
        self.rows: list[dict] = []
        if self.backup is not None and self.backup.is_file():
            self.rows = json.loads(self.backup.read_text())
        self._resumed = False

    def on_epoch_begin(self, epoch, logs=None):
        if not self._resumed:
            # The first epoch of this process: keep only the rows of epochs the restored
            # weights have finished (a kill between two backups repeats no finished epoch).
            self.rows = [r for r in self.rows if r["epoch"] <= epoch]
            self._resumed = True
        self._start = time.perf_counter()
        self._train_end = None

    def on_test_begin(self, logs=None):
        # Inside fit, validation starts when the epoch's training steps are done.
        if self._train_end is None:
            self._train_end = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        end = time.perf_counter()
        train_seconds = (self._train_end or end) - self._start
        logs = dict(logs or {})
        row = {
            "epoch": epoch + 1,
            "loss": float(logs["loss"]),
            "accuracy": float(logs["accuracy"]),
            "val_loss": float(logs.get("val_loss", np.nan)),
            "val_accuracy": float(logs.get("val_accuracy", np.nan)),
            "learning_rate": float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)),
            "epoch_seconds": end - self._start,
            "train_seconds": train_seconds,
            "samples_per_second": self.train_samples / train_seconds if train_seconds > 0 else 0.0,
        }
        self.rows.append(row)
        if self.backup is not None:
            self.backup.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.backup.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.rows))
            tmp.replace(self.backup)


class EpochPublisher(keras.callbacks.Callback):
    """Hands each finished epoch's row to `on_epoch` (MLflow) once it is backed up everywhere.

    It runs after the backup callbacks and publishes only epochs that every worker has saved
    (a collective minimum under MultiWorkerMirroredStrategy), remembering the last one it
    published, so that a killed and resumed run logs each epoch exactly once.
    """

    def __init__(self, recorder: EpochRecorder, on_epoch, strategy, backup_dir: Optional[Path], backed_up: bool):
        super().__init__()
        self.recorder, self.on_epoch, self.strategy, self.backed_up = recorder, on_epoch, strategy, backed_up
        self.marker = Path(backup_dir) / "published.json" if backup_dir is not None else None
        self.published = json.loads(self.marker.read_text()) if self.marker and self.marker.is_file() else 0
        self._resumed = False

    def _publish(self, through: int) -> None:
        for row in self.recorder.rows:
            if self.published < row["epoch"] <= through:
                if self.on_epoch is not None:
                    self.on_epoch(row["epoch"], row)
                self.published = row["epoch"]
        if self.marker is not None:
            self.marker.parent.mkdir(parents=True, exist_ok=True)
            self.marker.write_text(json.dumps(self.published))

    def on_epoch_begin(self, epoch, logs=None):
        if not self._resumed:  # restored epochs whose publishing a kill interrupted
            self._resumed = True
            self._publish(epoch)

    def on_epoch_end(self, epoch, logs=None):
        self._publish(common_epoch(self.strategy, epoch + 1) if self.backed_up else epoch + 1)


@dataclass
class TrainResult:
    model: keras.Model
    history: list[dict]
    global_batch_size: int
    train_seconds: float
    samples_per_second: float
    summary: dict = field(default_factory=dict)


def even_batch(n: int, batch: int, replicas: int) -> int:
    """A batch size for evaluating `n` samples on `replicas` replicas without tripping Keras or TF.

    Two upstream limits shape it. Keras 3 builds a model from the first batch reduced across
    replicas (`_maybe_symbolic_build`), which fails ("AddN must have the same size") when that
    batch splits unevenly; and a replica handed an empty slice of a last batch breaks Conv1D
    on the CPU ("input depth must be evenly divisible"). So: a multiple of `replicas`, at
    most `batch`, whose last partial batch (if any) has at least one sample per replica.
    Evaluation results do not depend on the batch size.
    """
    top = min(batch, n) - min(batch, n) % replicas
    for size in range(top, replicas - 1, -replicas):
        rest = n % size
        if rest == 0 or rest >= replicas:
            return size
    return max(1, min(batch, n))


def train_batches(n: int, global_batch: int, replicas: int) -> tuple[int, bool]:
    """(batch size, drop_remainder) for training on `n` samples.

    The global batch, unless the split is smaller than it. When the last batch of an epoch
    would leave some replica without a sample (fewer samples than replicas), that batch is
    dropped: a different handful of samples each epoch, as the order is reshuffled, and said
    so in the log.
    """
    if n < global_batch:
        return even_batch(n, global_batch, replicas), False
    rest = n % global_batch
    return global_batch, 0 < rest < replicas


def train(cfg, *, splits: dict, stats: dict, strategy, on_epoch=None, verbose: int = 2,
          backup_dir: Optional[Path] = None) -> TrainResult:
    """Build, compile and train `cfg.model` under `strategy` (`cfg.loop`: fit or custom).

    The batch size in `cfg` is per replica; the global batch is that times the replicas.
    With `backup_dir`, each finished epoch is backed up there, and a run that was killed
    resumes from its last finished epoch (Keras BackupAndRestore for fit, a checkpoint
    manager for the custom loop); the caller removes the folder after a finished run.
    """
    keras.utils.set_random_seed(cfg.seed)
    if cfg.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.mixed_precision.set_dtype_policy(cfg.precision)
    replicas = strategy.num_replicas_in_sync
    global_batch = cfg.batch_size_per_replica * replicas
    image_size = getattr(cfg, "img_size", None)
    x_train, y_train = splits["train"]
    batch, drop = train_batches(len(y_train), global_batch, replicas)
    if drop:
        print(f"note: the last {len(y_train) % batch} sample(s) of each shuffled epoch are left out, so that "
              f"every one of {replicas} replicas gets a sample in each step")
    train_ds = make_dataset(x_train, y_train, batch_size=batch, shuffle=True, seed=cfg.seed,
                            shuffle_buffer=cfg.shuffle_buffer, image_size=image_size, drop_remainder=drop)
    val_ds = None
    if "val" in splits and len(splits["val"][1]):
        val_ds = make_dataset(*splits["val"], batch_size=even_batch(len(splits["val"][1]), global_batch, replicas),
                              shuffle=False, image_size=image_size)
    with strategy.scope():
        model = build_model(cfg, stats)
        compile_model(model, cfg)
        # Build the optimizer's slots here, inside the scope: created lazily in the first step
        # they fail under a strategy when that step runs in a loop (steps_per_execution > 1,
        # or the custom loop): "You must feed a value for placeholder tensor" (keras#23085).
        model.optimizer.build(model.trainable_variables)
    recorder = EpochRecorder(len(y_train), backup_dir)
    # Last, after the backups: MLflow hears of an epoch once it can no longer be repeated.
    publisher = EpochPublisher(recorder, on_epoch, strategy, backup_dir, backed_up=backup_dir is not None)

    def lr_for_epoch(epoch):
        return lr_at_epoch(cfg.learning_rate, cfg.lr_decay_epochs, cfg.lr_decay_factor, epoch)

    if cfg.loop == "fit":
        callbacks = [recorder]
        if cfg.lr_decay_epochs:
            callbacks.append(keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr_for_epoch(epoch)))
        if backup_dir is not None:
            callbacks.append(keras.callbacks.BackupAndRestore(str(Path(backup_dir) / "fit"), delete_checkpoint=False))
        model.fit(train_ds, validation_data=val_ds, epochs=cfg.epochs, callbacks=[*callbacks, publisher],
                  verbose=verbose)
    else:
        from pipeline.custom_loop import CustomLoop

        loop = CustomLoop(model, strategy, jit_compile=cfg.jit_compile)
        callbacks, initial_epoch = [recorder], 0
        if backup_dir is not None:
            saver = EpochCheckpoint(model, Path(backup_dir) / "custom", strategy)
            initial_epoch = saver.restore()
            callbacks.append(saver)
        loop.fit(train_ds, val_ds, epochs=cfg.epochs, initial_epoch=initial_epoch, callbacks=[*callbacks, publisher],
                 lr_for_epoch=lr_for_epoch if cfg.lr_decay_epochs else None)
    rows = recorder.rows
    train_seconds = float(sum(r["train_seconds"] for r in rows))
    return TrainResult(
        model=model,
        history=rows,
        global_batch_size=global_batch,
        train_seconds=train_seconds,
        samples_per_second=len(y_train) * len(rows) / train_seconds if train_seconds else 0.0,
        summary={
            "final_loss": rows[-1]["loss"],
            "final_accuracy": rows[-1]["accuracy"],
            "final_val_loss": rows[-1]["val_loss"],
            "final_val_accuracy": rows[-1]["val_accuracy"],
            "params_count": int(model.count_params()),
        },
    )


class EpochCheckpoint(keras.callbacks.Callback):
    """The custom loop's backup: model and optimizer state after each finished epoch.

    The last two are kept, so that workers killed between their saves can agree on the last
    epoch every one of them has.
    """

    def __init__(self, model: keras.Model, folder: Path, strategy):
        super().__init__()
        self.folder = Path(folder)
        self.strategy = strategy
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
        self.manager = tf.train.CheckpointManager(self.checkpoint, str(folder), max_to_keep=2)

    def restore(self) -> int:
        """Load the last checkpoint all workers have, if any; return its number of epochs."""
        saved = {int(path.rsplit("-", 1)[1]): path for path in self.manager.checkpoints}
        epoch = common_epoch(self.strategy, max(saved, default=0))
        if epoch == 0:
            return 0
        if epoch not in saved:
            from pipeline.errors import DataError

            raise DataError(f"{self.folder}: no checkpoint of epoch {epoch}, the last one every worker "
                            f"has; remove the backup folder to start over")
        self.checkpoint.restore(saved[epoch]).expect_partial()
        return epoch

    def on_epoch_end(self, epoch, logs=None):
        self.manager.save(checkpoint_number=epoch + 1)


def common_epoch(strategy, epoch: int) -> int:
    """The smallest of every worker's `epoch` (a collective across workers; local otherwise)."""
    from pipeline.distribute import cluster_of

    if not cluster_of(strategy)[1]:
        return epoch
    per_replica = strategy.run(lambda: tf.constant([epoch], dtype=tf.int64))
    return int(tf.reduce_min(strategy.gather(per_replica, axis=0)).numpy())


def model_signature(model: keras.Model, x_sample: np.ndarray, image_size: Optional[int] = None):
    """An MLflow signature from a few samples as the model receives them."""
    from mlflow.models import infer_signature

    from pipeline.data.inputs import prepare_images

    inputs = x_sample
    if image_size is not None:
        inputs = prepare_images(tf.constant(x_sample), image_size).numpy()
    # A plain call, not predict: under MultiWorkerMirroredStrategy predict is a collective
    # step, and the other workers have finished by now.
    return infer_signature(inputs, keras.ops.convert_to_numpy(model(inputs, training=False)))


def write_history_csv(rows: list[dict], path) -> None:
    import csv

    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=HISTORY_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


def weights_digest(model: keras.Model) -> str:
    """sha256 of all weights, to show that every worker ended with the same model."""
    import hashlib

    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()
