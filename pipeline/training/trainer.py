"""Training under a tf.distribute strategy, with Keras `fit` or a custom `strategy.run` loop:
seeds and precision, batch sizes that suit the replicas, the learning-rate schedule, the best
epoch, and the figures of the run. What is backed up for a resume is `pipeline.training.resume`'s."""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import keras
import numpy as np
import tensorflow as tf

from pipeline.data.inputs import image_size_for, make_dataset
from pipeline.io import atomic_outputs, write_csv, write_json
from pipeline.runtime import usage
from pipeline.training import batchnorm, cluster, model_folder, plots
from pipeline.training.custom_loop import CustomLoop
from pipeline.training.early_stopping import BestEpoch, kept_epoch
from pipeline.training.models import build_model, compile_model
from pipeline.training.resume import Backup

if TYPE_CHECKING:
    from pipeline.config.keys.training import AnyTrainConfig, TrainConfig
    from pipeline.data.prepared import Prepared
    from pipeline.training import lifecycle

log = logging.getLogger(__name__)

# what each epoch computed (history.csv, for dvc plots: the same bytes when a run reproduces);
# each epoch's times and throughput go to MLflow with these (a history row holds both)
HISTORY_COLUMNS = ("epoch", "loss", "accuracy", "val_loss", "val_accuracy", "learning_rate")
# what the train stage measured (--measurements: numbers, for `dvc metrics show` in the
# workspace; neither git nor dvc.lock records them)
DEVICE_COUNTS = ("replicas", "workers", "logical_devices", "physical_gpus")


def lr_at_epoch(base: float, decay_epochs, factor: float, epoch: int) -> float:
    """The learning rate of 0-based `epoch` under the step schedule: `base`, times `factor` once
    per decay epoch passed.

    A decay epoch d takes effect after d epochs, so `[30]` with 40 epochs trains 30 epochs at
    the base rate and 10 at base * factor.
    """
    return base * factor ** sum(1 for d in decay_epochs if epoch >= d)


def cosine_lr_at_epoch(base: float, factor: float, epochs: int, epoch: int) -> float:
    """The learning rate of 0-based `epoch` under the cosine schedule: `base` at the first
    epoch, down a half cosine to `base * factor` at the last of `epochs`."""
    done = epoch / (epochs - 1) if epochs > 1 else 0.0
    return base * (factor + (1.0 - factor) * 0.5 * (1.0 + math.cos(math.pi * min(done, 1.0))))


@dataclass
class TrainResult:
    model: keras.Model
    history: list[dict]
    global_batch_size: int
    train_seconds: float
    samples_per_second: float
    peak_rss_mb: float  # the process's, at the end of training
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


def whole_batches(n: int, batch: int, replicas: int) -> tuple[int, bool]:
    """(batch size, drop_remainder) for `n` samples of each worker's own share, across
    workers. tf.distribute hands each replica in turn its part of a worker's batch, so a
    partial last batch leaves a replica without a sample: no batch is partial. The largest
    batch up to `batch` that divides `n` (a multiple of `replicas`) when one does, else `batch`
    with the partial one dropped."""
    exact = [size for size in range(replicas, min(batch, n) + 1, replicas) if n % size == 0]
    if exact and (exact[-1] == batch or n < batch):
        return exact[-1], False
    return min(batch, n - n % replicas) or replicas, True


def global_batch_size(cfg: TrainConfig, replicas: int) -> int:
    """The batch of one step across all replicas: the params give it per replica."""
    return cfg.batch_size_per_replica * replicas


@dataclass
class Compiled:
    """A model compiled under its strategy, and its input pipelines (what `prepare` gives)."""

    model: keras.Model
    train_ds: tf.data.Dataset
    val_ds: Optional[tf.data.Dataset]
    global_batch_size: int
    train_samples: int
    step_batch: int  # the batch a training step takes: the global batch, or a smaller split whole
    # each class's weight in the training loss (`class_weights`), or None: every sample weighs 1
    class_weights: Optional[list[float]] = None


def class_weights(cfg: AnyTrainConfig, prepared: Prepared) -> Optional[list[float]]:
    """Each class's weight in the training loss, by class index, as `cfg.class_weight` says:
    balanced, the training split's `Prepared.class_weights` (n / (classes x the class's count);
    a DataError for a class without a training sample); none, None: training is given no
    weights at all, the same step as before the key existed."""
    return prepared.class_weights("train") if cfg.class_weight == "balanced" else None


def prepare(cfg: AnyTrainConfig, *, prepared: Prepared, strategy, pretrained: Optional[Path] = None) -> Compiled:
    """Seeds, precision, `cfg.model` built (from the weights in `pretrained`, the download
    stage's folder, when its settings say so) and compiled under `strategy`, and the training
    and validation datasets streamed from the prepared shards (`prepared`, checked first): what a
    training and a benchmark (`pipeline.tools.bench`) share. Across workers each reads its own
    share of the shards. The class weights are the whole training split's on every worker."""
    prepared.check("train", "val")
    weights = class_weights(cfg, prepared)
    keras.utils.set_random_seed(cfg.seed)
    if cfg.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.mixed_precision.set_dtype_policy(cfg.precision)
    replicas = strategy.num_replicas_in_sync
    global_batch = global_batch_size(cfg, replicas)
    with strategy.scope():
        model = build_model(cfg, prepared, pretrained)
        compile_model(model, cfg)
    image_size = image_size_for(prepared, model)
    worker, workers = cluster.input_worker(strategy)
    # each worker reads an equal share (all of it on one host), in batches of the global size
    # that tf.distribute splits among every replica
    share = prepared.samples("train") // workers
    batch, drop = (train_batches if workers == 1 else whole_batches)(share, global_batch, replicas)
    if drop:
        log.info(
            "the last %d sample(s) of each shuffled epoch are left out, so that every one of %d "
            "replicas gets a sample in each step",
            share % batch,
            replicas,
        )
    train_ds = make_dataset(
        prepared,
        "train",
        batch_size=batch,
        shuffle=True,
        seed=cfg.seed,
        shuffle_buffer=cfg.shuffle_buffer,
        image_size=image_size,
        drop_remainder=drop,
        worker=worker,
        workers=workers,
    )
    val_ds = _validation(prepared, global_batch, replicas, image_size, worker, workers)
    return Compiled(model, train_ds, val_ds, global_batch, share * workers, batch, weights)


def _validation(
    prepared: Prepared, global_batch: int, replicas: int, image_size: Optional[int], worker: int, workers: int
) -> Optional[tf.data.Dataset]:
    """The validation split's dataset (None without one): batches that split evenly among the
    replicas on one host (`even_batch`), whole ones across workers (`whole_batches`)."""
    share = prepared.samples("val") // workers if "val" in prepared.splits else 0
    if not share:
        return None
    batch, drop = (
        (even_batch(share, global_batch, replicas), False)
        if workers == 1
        else whole_batches(share, global_batch, replicas)
    )
    if drop:
        log.info("validation: the last %d sample(s) of each worker's share are left out", share % batch)
    return make_dataset(
        prepared,
        "val",
        batch_size=batch,
        shuffle=False,
        image_size=image_size,
        drop_remainder=drop,
        worker=worker,
        workers=workers,
    )


def callbacks_in_order(*, recorder, statistics, schedule, keeper, backup, stopper, publisher, observer=None) -> list:
    """A training's Keras callbacks, by name, in the one order that works (None: not in this
    training). Keras calls them in list order at every hook, and each one relies on those
    before it:

    1. `recorder` (resume.EpochRecorder): the epoch's row, and on a resume the rows of the
       epochs restored; everything after it decides from those rows. Its training time ends
       where the validation begins, before `statistics`.
    2. `statistics` (batchnorm.EpochStatistics): the BatchNormalization layers' statistics
       recomputed with the epoch's weights, before the validation split is evaluated (or, with
       none, before the best epoch is kept and the epoch backed up).
    An `observer` (a benchmark's instrument, `train`'s `observer`) comes next: it sees each
    epoch's weights as the evaluate stage would take them, and before the keeper may put others back.
    3. `schedule`: the learning rate of the epoch about to begin (fit; the custom loop sets it).
    4. `keeper` (early_stopping): a new best epoch's weights, kept before the backup saves the
       epoch, so that whichever epoch a resume restores, its best epoch's weights exist.
    5. `backup`: the finished epoch saved (Keras' BackupAndRestore, or the custom loop's
       checkpoint); at the start, it restores a killed run and sets its first epoch.
    6. `stopper` (early_stopping): after the backup, whose restore it reads at the start; it
       ends the run once the patience is spent (a restored run that had stopped trains none).
    7. `publisher` (resume.EpochPublisher): last, it hands MLflow each epoch once every worker
       has backed it up, so that a killed and resumed run logs each epoch exactly once.
    """
    chain = (recorder, statistics, observer, schedule, keeper, backup, stopper, publisher)
    return [c for c in chain if c is not None]


def train(
    cfg: AnyTrainConfig,
    *,
    prepared: Prepared,
    strategy,
    backup: Optional[Backup] = None,
    on_epoch=None,
    verbose: int = 2,
    pretrained: Optional[Path] = None,
    observer: Optional[keras.callbacks.Callback] = None,
) -> TrainResult:
    """Build, compile and train `cfg.model` under `strategy` (`cfg.loop`: fit or custom).

    `on_epoch(epoch, row)` hears of each finished epoch once. With an enabled `backup`, each
    finished epoch is backed up, and a run that was killed resumes from its last finished
    epoch; the caller calls `backup.finish()` after a finished run. `cfg.early_stopping` may
    end the run early and put the best epoch's weights back (`pipeline.training.early_stopping`).
    `verbose` 0 shows no per-epoch progress (Keras' lines, the custom loop's bar). `observer`, a
    Keras callback, is told of each finished epoch with its statistics recomputed
    (`callbacks_in_order`; benchmarks/test_by_epoch.py).
    """
    backup = backup or Backup(None, strategy)
    compiled = prepare(cfg, prepared=prepared, strategy=strategy, pretrained=pretrained)
    model = compiled.model
    hooks = backup.hooks(model, cfg.loop, compiled.train_samples, on_epoch)
    initial_epoch = hooks.initial_epoch
    best = BestEpoch(
        cfg.early_stopping,
        hooks.recorder,
        epochs=cfg.epochs,
        folder=backup.best_folder,
        initial_epoch=initial_epoch if cfg.loop == "custom" else None,
    )
    lr_for_epoch, schedule = _schedule(cfg)
    callbacks = callbacks_in_order(
        statistics=batchnorm.epoch_statistics(cfg, prepared, model),
        recorder=hooks.recorder,
        schedule=schedule,
        keeper=best.keeper,
        backup=hooks.backup,
        stopper=best.stopper,
        publisher=hooks.publisher,
        observer=observer,
    )
    _run(cfg, compiled, strategy, callbacks, initial_epoch, lr_for_epoch, verbose)
    return _result(compiled, hooks.recorder.rows, best.restore(model), cfg.early_stopping.restore_best_weights)


def _run(cfg: AnyTrainConfig, compiled: Compiled, strategy, callbacks, initial_epoch: int, lr_for_epoch, verbose: int):
    """The epochs, by `cfg.loop`: Keras' fit, or the custom loop (which sets each epoch's
    learning rate itself); both weigh each training sample's loss by its class's weight when
    `compiled.class_weights` has them."""
    weights = compiled.class_weights
    if cfg.loop == "fit":
        # no class_weight argument at all without weights: the same fit as before the key existed
        weighted = {} if weights is None else {"class_weight": dict(enumerate(weights))}
        # shuffle=False: the dataset reshuffles itself each epoch (fit cannot shuffle a tf.data dataset)
        compiled.model.fit(
            compiled.train_ds,
            validation_data=compiled.val_ds,
            epochs=cfg.epochs,
            callbacks=callbacks,
            verbose=verbose,
            shuffle=False,
            **weighted,
        )
        return
    loop = CustomLoop(compiled.model, strategy, jit_compile=cfg.jit_compile, class_weights=weights, loss_name=cfg.loss)
    loop.fit(
        compiled.train_ds,
        compiled.val_ds,
        epochs=cfg.epochs,
        initial_epoch=initial_epoch,
        callbacks=callbacks,
        lr_for_epoch=lr_for_epoch,
        progress=None if verbose else False,
    )


def _schedule(cfg: AnyTrainConfig):
    """The learning rate of each epoch, or None when it stays `learning_rate` throughout; and
    the Keras callback that sets it for `fit` (None for the custom loop, which sets each epoch's
    rate itself)."""

    def lr_for_epoch(epoch: int) -> float:
        if cfg.lr_schedule == "cosine":
            return cosine_lr_at_epoch(cfg.learning_rate, cfg.lr_decay_factor, cfg.epochs, epoch)
        return lr_at_epoch(cfg.learning_rate, cfg.lr_decay_epochs, cfg.lr_decay_factor, epoch)

    if cfg.lr_schedule == "step" and not cfg.lr_decay_epochs:
        return None, None
    schedule = None
    if cfg.loop == "fit":
        schedule = keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr_for_epoch(epoch))
    return lr_for_epoch, schedule


def _result(compiled: Compiled, rows: list[dict], best_epoch: int, restored: bool) -> TrainResult:
    """What a finished training gives back: the model, its per-epoch rows, figures, summary (the
    best epoch by the monitor, and the one whose weights the model holds: that one where
    `restored`, else the last)."""
    model = compiled.model
    train_seconds = float(sum(r["epoch_train_seconds"] for r in rows))
    # without a validation split, no val_ figures (as Keras' History has none), not NaN
    validated = (
        {}
        if compiled.val_ds is None
        else {
            "final_val_loss": rows[-1]["val_loss"],
            "final_val_accuracy": rows[-1]["val_accuracy"],
        }
    )
    return TrainResult(
        model=model,
        history=rows,
        global_batch_size=compiled.global_batch_size,
        train_seconds=train_seconds,
        samples_per_second=compiled.train_samples * len(rows) / train_seconds if train_seconds else 0.0,
        peak_rss_mb=usage.peak_rss_mb(),
        summary={
            "final_loss": rows[-1]["loss"],
            "final_accuracy": rows[-1]["accuracy"],
            **validated,
            "best_epoch": best_epoch,
            "kept_epoch": kept_epoch(best_epoch, len(rows), restored),
            "epochs_trained": len(rows),
            "params_count": int(model.count_params()),
        },
    )


def measured(result: TrainResult, figures: dict) -> dict:
    """The train stage's measurements: time, throughput (also of the epochs after the first,
    which traces the step functions, when there are any), peak memory, device counts."""
    later = [row["epoch_samples_per_second"] for row in result.history[1:]]
    steady = {"steady_samples_per_second": sum(later) / len(later)} if later else {}
    return {
        "train_seconds": result.train_seconds,
        "samples_per_second": result.samples_per_second,
        **steady,
        "peak_rss_mb": round(result.peak_rss_mb),
        **{key: figures[key] for key in DEVICE_COUNTS},
    }


def weights_digest(model: keras.Model) -> str:
    """sha256 of all weights, to show that every worker ended with the same model."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()


def write_outputs(
    result: TrainResult,
    outputs: lifecycle.Outputs,
    *,
    figures: dict,
    run_ids: dict,
    title: str,
    machine_facts: Optional[dict] = None,
) -> str:
    """The train stage's files. What the run computed, the same bytes whenever it reproduces:
    the model with its MLflow run ids (`model_folder`), the per-epoch history (for dvc plots),
    the summary of results (for dvc metrics) and the learning curves. What it measured, apart:
    with `outputs.measurements`, time, throughput, peak memory and device counts; with
    `outputs.machine`, `machine_facts` (`pipeline.runtime.environment.machine()`: the host,
    versions, date). All of them or none. Returns the model file's digest."""
    extra = [path for path in (outputs.measurements, outputs.machine) if path is not None]
    with atomic_outputs(
        outputs.model_dir, outputs.history, outputs.summary, outputs.curves, *extra, folders=[outputs.model_dir]
    ) as (model_tmp, history_tmp, summary_tmp, curves_tmp, *extra_tmp):
        model_sha256 = model_folder.save(model_tmp, result.model, run_ids)
        write_csv(history_tmp, result.history, HISTORY_COLUMNS, digits=6)
        write_json(summary_tmp, {"global_batch_size": result.global_batch_size, **result.summary})
        plots.learning_curves(result.history, curves_tmp, title)
        staged = dict(zip(extra, extra_tmp))
        if outputs.measurements is not None:
            write_json(staged[outputs.measurements], measured(result, figures))
        if outputs.machine is not None:
            write_json(staged[outputs.machine], machine_facts)
    return model_sha256
