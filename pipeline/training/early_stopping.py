"""The best epoch of a training run, early stopping, and restoring the best epoch's weights,
for both training loops, across a kill and resume and on every worker.

Every decision is a function of the per-epoch history alone (`EpochRecorder.rows`, which a
resumed run gets back from its backup, and whose validation figures are the same on every
worker), so a resumed run and each worker of a multi-worker run decide as one uninterrupted
run would. Two callbacks share the state, on either side of the epoch's backup:

- `keeper` (before the backup) keeps the weights of each new best epoch: in memory, or with a
  backup folder as `best-<epoch>.npz` there. Older files are removed only when a later epoch
  begins, so whichever epoch the backup restores, its best epoch's file exists.
- `stopper` (after the backup) stops training once `patience` epochs have passed without an
  improvement, and skips training altogether when the restored run had already stopped.

After training, `restore` puts the best epoch's weights back into the model (with
`restore_best_weights`), so that the model saved, logged and evaluated is that epoch's.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import keras
import numpy as np

if TYPE_CHECKING:
    from pipeline.config.keys.training import EarlyStoppingConfig

log = logging.getLogger(__name__)


def best_epoch(rows: list[dict], cfg: EarlyStoppingConfig) -> int:
    """The 1-based epoch whose `cfg.monitor` value is best (0 when no epoch has a value): an
    epoch counts as better only by more than `cfg.min_delta`, and the first of equals wins."""
    best, best_value = 0, None
    for row in rows:
        value = row.get(cfg.monitor)
        if value is None or math.isnan(value):
            continue
        if best_value is None or (
            value - cfg.min_delta > best_value if cfg.mode == "max" else value + cfg.min_delta < best_value
        ):
            best, best_value = row["epoch"], value
    return best


def kept_epoch(best: int, trained: int, restore_best_weights: bool) -> int:
    """The 1-based epoch whose weights a model holds after `trained` epochs: the `best` one where
    its weights are restored (`best` 0, no epoch with a figure: the last), else the last."""
    return best if restore_best_weights and best else trained


def should_stop(rows: list[dict], cfg: EarlyStoppingConfig) -> bool:
    """True when the last `cfg.patience` epochs brought no improvement (never with patience null)."""
    if cfg.patience is None or not rows:
        return False
    return rows[-1]["epoch"] - best_epoch(rows, cfg) >= cfg.patience


class BestEpoch:
    """One training run's best epoch: its two callbacks, and the restore at the end."""

    def __init__(
        self,
        cfg: EarlyStoppingConfig,
        recorder,
        *,
        epochs: int,
        folder: Optional[Path] = None,
        initial_epoch: Optional[int] = None,
    ):
        self.cfg = cfg
        self.recorder = recorder
        self.epochs = epochs
        self.folder = Path(folder) if folder is not None else None
        self.initial_epoch = initial_epoch  # None: Keras fit's own, once its backup has restored
        self.weights: Optional[list] = None  # the best epoch's, without a folder
        self.keeper, self.stopper = _Keeper(self), _Stopper(self)

    @property
    def best(self) -> int:
        return best_epoch(self.recorder.rows, self.cfg)

    def _file(self, epoch: int) -> Path:
        assert self.folder is not None  # kept on disk only when there is a folder
        return self.folder / f"best-{epoch}.npz"

    def keep(self, model: keras.Model, epoch: int) -> None:
        if not self.cfg.restore_best_weights:
            return
        weights = model.get_weights()
        if self.folder is None:
            self.weights = weights
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        incoming = self.folder / "incoming.npz"
        with open(incoming, "wb") as handle:
            np.savez(handle, *weights)
        os.replace(incoming, self._file(epoch))

    def prune(self) -> None:
        """Remove the kept weights of every epoch but the best one."""
        if self.folder is None or not self.folder.is_dir():
            return
        keep = self._file(self.best).name
        for path in self.folder.glob("best-*.npz"):
            if path.name != keep:
                path.unlink()

    def restore(self, model: keras.Model) -> int:
        """Put the best epoch's weights into `model` when that is asked for and it is not the
        last epoch; return the best epoch."""
        best = self.best
        rows = self.recorder.rows
        last = rows[-1]["epoch"] if rows else 0
        stopped = last < self.epochs
        if self.cfg.restore_best_weights and 0 < best < last:
            if self.folder is not None:
                with np.load(self._file(best)) as saved:
                    weights = [saved[f"arr_{i}"] for i in range(len(saved.files))]
            else:
                assert self.weights is not None  # kept in memory at the best epoch
                weights = self.weights
            model.set_weights(weights)
        if stopped or best != last:
            value = next(r[self.cfg.monitor] for r in rows if r["epoch"] == best) if best else math.nan
            # -v only: the stage's result line gives the best epoch and the epochs trained, and a
            # failing stage's stderr is its one error line
            log.debug(
                "%s after epoch %d of %d; best %s %.4f at epoch %d%s",
                "stopped early" if stopped else "trained",
                last,
                self.epochs,
                self.cfg.monitor,
                value,
                best,
                ", whose weights the model now has" if self.cfg.restore_best_weights and 0 < best < last else "",
            )
        return best


class _Keeper(keras.callbacks.Callback):
    def __init__(self, state: BestEpoch):
        super().__init__()
        self.state = state

    def on_epoch_begin(self, epoch, logs=None):
        # The recorder (first in the list) has dropped any epoch the backup did not restore.
        self.state.prune()

    def on_epoch_end(self, epoch, logs=None):
        if self.state.best == epoch + 1:
            self.state.keep(self.model, epoch + 1)


class _Stopper(keras.callbacks.Callback):
    def __init__(self, state: BestEpoch):
        super().__init__()
        self.state = state

    def on_train_begin(self, logs=None):
        state = self.state
        # After the backup's own on_train_begin: under fit, Keras' BackupAndRestore has set the
        # model's `_initial_epoch` (how fit learns where a restored run goes on from).
        start = state.initial_epoch
        if start is None:
            start = getattr(self.model, "_initial_epoch", None) or 0
        state.recorder.resume(start)
        if should_stop(state.recorder.rows, state.cfg):
            # The restored run had already stopped: train no further epoch.
            self.model.stop_training = True
            self.model._initial_epoch = state.epochs

    def on_epoch_end(self, epoch, logs=None):
        if should_stop(self.state.recorder.rows, self.state.cfg):
            self.model.stop_training = True
