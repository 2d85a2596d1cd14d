"""A resumable training run: its backup folder, resume-or-start, and the epoch callbacks.

The train stage's `--backup-dir` holds, for a run that has not finished:

    <backup>/mlflow_run.json      the chief's MLflow run and the params it was started with
    <backup>/history.json         one row per finished epoch (EpochRecorder)
    <backup>/published.json       the last epoch handed to MLflow (EpochPublisher)
    <backup>/fit/                 Keras BackupAndRestore, for `loop: fit`
    <backup>/custom/              checkpoints of model and optimizer, for `loop: custom`
    <backup>/best/                the best epoch's weights (pipeline.training.early_stopping)
    <backup>/<task>/...           the same for each other worker (`worker-1`, ...)

A killed run restarts from its last finished epoch, continues the same MLflow run and logs
each epoch exactly once; a backup made under other params is discarded; a finished run
removes the folder. This module is the only one that names these files.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, TypeVar

import keras
import numpy as np
import tensorflow as tf

from pipeline.errors import DataError
from pipeline.io import write_json
from pipeline.training.cluster import cluster_of, is_chief, task_name

Run = TypeVar("Run")


class Backup:
    """One worker's backup folder of one training run (`folder` None: no backups)."""

    def __init__(self, root: Optional[Path | str], strategy):
        self.strategy = strategy
        self.chief = is_chief(strategy)
        self.root = Path(root) if root is not None else None
        # every worker but the chief keeps its own, inside the chief's
        self.folder = self.root if self.root is None or self.chief else self.root / task_name(strategy)

    @property
    def enabled(self) -> bool:
        return self.folder is not None

    def _file(self, name: str) -> Optional[Path]:
        return self.folder / name if self.folder is not None else None

    def resume_or_start(self, fingerprint: str, open_run: Callable[[Optional[str]], Run]) -> Run:
        """`open_run(run_id)`: the chief reopens the run a killed attempt left (made under the
        same params, `fingerprint`), or starts one (`run_id` None) and records it here."""
        marker = self._file("mlflow_run.json") if self.chief else None
        if marker is not None and marker.is_file():
            saved = json.loads(marker.read_text())
            if saved.get("fingerprint") == fingerprint:
                return open_run(saved["run_id"])
            assert self.root is not None  # a marker lives in the backup folder
            shutil.rmtree(self.root)  # made under other params: start over
        run = open_run(None)
        run_id = getattr(run, "run_id", None)  # None on a worker that logs nothing
        if marker is not None and run_id:
            write_json(marker, {"run_id": run_id, "fingerprint": fingerprint})
        return run

    def hooks(self, model: keras.Model, loop: str, train_samples: int, on_epoch) -> EpochHooks:
        """The callbacks this backup adds to a training of `loop` (`training.callbacks_in_order`
        puts them in their places), and the first epoch to train."""
        recorder = EpochRecorder(train_samples, self._file("history.json"))
        saver, initial_epoch = None, 0
        if self.folder is not None and loop == "fit":
            saver = AtomicBackupAndRestore(str(self.folder / "fit"), delete_checkpoint=False)
        elif self.folder is not None:
            saver = EpochCheckpoint(model, self.folder / "custom", self.strategy)
            initial_epoch = saver.restore()
        publisher = EpochPublisher(recorder, on_epoch, self.strategy, self._file("published.json"))
        return EpochHooks(recorder, saver, publisher, initial_epoch)

    @property
    def best_folder(self) -> Optional[Path]:
        """Where `pipeline.training.early_stopping` keeps the best epoch's weights (None: in memory)."""
        return self._file("best")

    def finish(self) -> None:
        """The run finished: nothing is left to resume."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


@dataclass(frozen=True)
class EpochHooks:
    """What a Backup adds to a training: the epoch recorder (the history every decision reads),
    the backup of each finished epoch (None without a folder), the publisher that hands each
    epoch to MLflow once, and the first epoch to train (the custom loop's restored one)."""

    recorder: EpochRecorder
    backup: Optional[keras.callbacks.Callback]
    publisher: EpochPublisher
    initial_epoch: int


class AtomicBackupAndRestore(keras.callbacks.BackupAndRestore):
    """Keras' BackupAndRestore, whose files are replaced whole: Keras writes the weights file
    in place, so a kill during the write leaves a truncated file that the next run cannot
    open. Here the weights and the epoch marker are written beside, then renamed over the
    old ones (weights first: a kill between the two renames repeats one epoch, and loses
    none)."""

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        weights = os.path.join(self.backup_dir, "incoming.weights.h5")
        self.model.save_weights(filepath=weights, overwrite=True)
        marker = self._training_metadata_path + ".incoming"
        with open(marker, "w") as handle:
            json.dump({"epoch": self._current_epoch, "batch": self._last_batch_seen}, handle)
        os.replace(weights, self._weights_path)
        os.replace(marker, self._training_metadata_path)


class EpochRecorder(keras.callbacks.Callback):
    """Times each epoch (training alone, and with validation) and keeps one row per epoch,
    in the backup too (before the epoch's checkpoint, so a checkpoint never lacks its row)."""

    def __init__(self, train_samples: int, backup: Optional[Path] = None):
        super().__init__()
        self.train_samples = train_samples
        self.backup = backup
        self.rows: list[dict] = json.loads(backup.read_text()) if backup is not None and backup.is_file() else []
        self._resumed = False

    def resume(self, epoch: int) -> None:
        """Keep only the rows of the `epoch` epochs the restored weights have finished (a kill
        between two backups repeats no finished epoch); once, in the first epoch of a process."""
        if not self._resumed:
            self.rows = [r for r in self.rows if r["epoch"] <= epoch]
            self._resumed = True

    def on_epoch_begin(self, epoch, logs=None):
        self.resume(epoch)
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
        self.rows.append(
            {
                "epoch": epoch + 1,
                "loss": float(logs["loss"]),
                "accuracy": float(logs["accuracy"]),
                "val_loss": float(logs.get("val_loss", np.nan)),
                "val_accuracy": float(logs.get("val_accuracy", np.nan)),
                "learning_rate": float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)),
                "epoch_seconds": end - self._start,
                "epoch_train_seconds": train_seconds,
                "epoch_samples_per_second": self.train_samples / train_seconds if train_seconds > 0 else 0.0,
            }
        )
        if self.backup is not None:
            write_json(self.backup, self.rows)


class EpochPublisher(keras.callbacks.Callback):
    """Hands each finished epoch's row to `on_epoch` (MLflow) once it is backed up everywhere.

    It runs after the backup callbacks and publishes only epochs that every worker has saved
    (a collective minimum under MultiWorkerMirroredStrategy), remembering the last one it
    published, so that a killed and resumed run logs each epoch exactly once.
    """

    def __init__(self, recorder: EpochRecorder, on_epoch, strategy, marker: Optional[Path]):
        super().__init__()
        self.recorder, self.on_epoch, self.strategy, self.marker = recorder, on_epoch, strategy, marker
        self.published = json.loads(marker.read_text()) if marker is not None and marker.is_file() else 0
        self._resumed = False

    def _publish(self, through: int) -> None:
        for row in self.recorder.rows:
            if self.published < row["epoch"] <= through:
                if self.on_epoch is not None:
                    self.on_epoch(row["epoch"], row)
                self.published = row["epoch"]
        if self.marker is not None:
            write_json(self.marker, self.published)

    def on_epoch_begin(self, epoch, logs=None):
        if not self._resumed:  # restored epochs whose publishing a kill interrupted
            self._resumed = True
            self._publish(epoch)

    def on_epoch_end(self, epoch, logs=None):
        backed_up = self.marker is not None
        self._publish(common_epoch(self.strategy, epoch + 1) if backed_up else epoch + 1)

    def on_train_end(self, logs=None):
        # Every worker has finished the same epochs: publish what is left (a run that resumed
        # after it had stopped early trains no epoch, and publishes here).
        self._publish(self.recorder.rows[-1]["epoch"] if self.recorder.rows else 0)


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
            raise DataError(
                f"{self.folder}: no checkpoint of epoch {epoch}, the last one every worker "
                f"has; remove the backup folder to start over"
            )
        self.checkpoint.restore(saved[epoch]).expect_partial()
        return epoch

    def on_epoch_end(self, epoch, logs=None):
        self.manager.save(checkpoint_number=epoch + 1)


def common_epoch(strategy, epoch: int) -> int:
    """The smallest of every worker's `epoch` (a collective across workers; local otherwise)."""
    if not cluster_of(strategy)[1]:
        return epoch
    per_replica = strategy.run(lambda: tf.constant([epoch], dtype=tf.int64))
    return int(tf.reduce_min(strategy.gather(per_replica, axis=0)).numpy())
