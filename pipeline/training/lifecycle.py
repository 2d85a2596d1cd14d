"""A training run from start to end, as the train stage runs it: the checks that need no
TensorFlow, the devices and strategy, the MLflow run (resumed with the backup of a killed
run), the training, and on the chief the outputs and the run's results. The stage parses its
paths and calls `run`.

On several workers (MultiWorkerMirroredStrategy) every worker trains on its own share of the
shards, and only the chief logs to MLflow and writes the outputs. A killed run resumes from its
last finished epoch (kept in the backup folder, not a DVC out) and continues the same MLflow run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from pipeline import log
from pipeline.data import prepared
from pipeline.runtime import environment
from pipeline.tracking import probe, runs
from pipeline.training import cluster, distribute

if TYPE_CHECKING:
    from pipeline.config.keys.schema import DatasetParams
    from pipeline.config.keys.training import EarlyStoppingConfig
    from pipeline.training.trainer import TrainResult


@dataclass(frozen=True)
class Outputs:
    """The train stage's files: what the run computed (the model folder, the per-epoch history,
    the summary, the learning curves) and, optional, what it measured (`measurements`) and the
    machine it ran on (`machine`); `trainer.write_outputs` writes them all or none."""

    model_dir: Path
    history: Path
    summary: Path
    curves: Path
    measurements: Optional[Path] = None
    machine: Optional[Path] = None


def run(
    params: DatasetParams, *, prepared_dir: Path, outputs: Outputs, backup_dir: Optional[Path], pretrained=None
) -> None:
    """Train `params.dataset` on the prepared folder `prepared_dir` (from the weights in `pretrained`,
    the download stage's folder, when the model's settings say so) and write `outputs` (chief)."""
    dataset, cfg = params.dataset, params.train
    # what needs no TensorFlow first: a wrong cluster, devices or data, or a tracking store that
    # cannot take the run (a single process logs: it is the chief), stops the stage at once
    distribute.check_before_tensorflow(cfg, where=f"train.{dataset}")
    description = prepared.read(prepared_dir)
    description.check("train", "val", digests=False)
    if cluster.detect_cluster() is None:
        probe.check_tracking()
    from pipeline.training import resume, trainer  # TensorFlow: only once it trains

    setup = distribute.setup(cfg, where=f"train.{dataset}")  # before any tensor
    facts = setup.facts
    name = runs.run_name(dataset, cfg.loop, facts["replicas"], facts["workers"], cfg.precision)
    backup = resume.Backup(backup_dir, setup.strategy)
    fingerprint = json.dumps(params.flat(), sort_keys=True, default=str)
    with backup.resume_or_start(
        fingerprint, lambda run_id: runs.TrainingRun.open(dataset, name, chief=setup.chief, run_id=run_id)
    ) as training_run:
        training_run.log_setup(params, setup.figures(), description)
        with cluster.peers_watched(setup.strategy, resume=resume_hint(backup_dir)):
            result = trainer.train(
                cfg,
                prepared=description,
                strategy=setup.strategy,
                backup=backup,
                on_epoch=training_run.log_epoch,
                verbose=2 if log.shows_progress() else 0,
                pretrained=pretrained,
            )
        digest = trainer.weights_digest(result.model)
        if facts["workers"] > 1:  # the same final weights on every worker
            log.result(f"{dataset} [{setup.task}]: final weights sha256 {digest}")
        if setup.chief:
            model_sha256 = trainer.write_outputs(
                result,
                outputs,
                figures=setup.figures(),
                run_ids=training_run.ids,
                title=f"{dataset}: {name}",
                machine_facts=environment.machine() if outputs.machine else None,
            )
            training_run.log_training(
                result,
                weights_sha256=digest,
                model_sha256=model_sha256,
                history=outputs.history,
                curves=outputs.curves,
            )
    backup.finish()
    if setup.chief:
        log.result(result_line(dataset, cfg.epochs, facts, result, training_run.run_id, cfg.early_stopping))


def resume_hint(backup_dir: Optional[Path], env=None) -> str:
    """What resumes a run whose worker was lost: the stage run again on every worker (a
    requeued Slurm job does it), from the backup of the last finished epoch when there is one."""
    env = os.environ if env is None else env
    if env.get("SLURM_JOB_ID"):
        again = "the job's requeue (sbatch --requeue) or the stage run again"
    else:
        again = "the stage run again on every worker"
    if backup_dir is None:
        return f"{again} starts the training over (no --backup-dir)"
    return f"{again} resumes it from the backup of its last finished epoch ({backup_dir})"


def result_line(
    dataset: str,
    epochs: int,
    facts: dict,
    result: TrainResult,
    run_id: Optional[str],
    stopping: Optional[EarlyStoppingConfig] = None,
) -> str:
    """The line the train stage ends with: where it trained, how fast, and the epoch whose weights
    the model has: the best one by `stopping`'s monitor, or the last one where `stopping` does not
    restore the best (then the best is named beside it)."""
    summary = result.summary
    best, kept, trained = summary["best_epoch"], summary["kept_epoch"], summary["epochs_trained"]
    stopped = f"; stopped early, {epochs} at most" if trained < epochs else ""
    monitor = None if stopping is None or stopping.restore_best_weights else stopping.monitor
    if "final_val_accuracy" not in summary:
        validation = "no validation split"
    else:
        validation = f"val accuracy {result.history[kept - 1]['val_accuracy']:.4f}"
    if monitor is None:
        which = f"best epoch {best} of {trained}"
    else:
        which = f"last epoch {trained} of {trained}"
        validation += f"; best {monitor} at epoch {best}" if best and best != trained else ""
    return (
        f"{dataset}: {facts['replicas']} replica(s) on {facts['workers']} worker(s), {facts['strategy']}, "
        f"{result.samples_per_second:.0f} samples/s, {which} ({validation}{stopped}); MLflow run {run_id}"
    )
