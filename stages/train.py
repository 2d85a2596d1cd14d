"""train: fit the dataset's model under a tf.distribute strategy; log the run to MLflow.

On several workers (MultiWorkerMirroredStrategy) every worker trains, and only the chief
logs to MLflow and writes the outputs. A killed run resumes from its last finished epoch
(kept in --backup-dir, not a DVC out) and continues the same MLflow run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import click

from pipeline import log
from pipeline.config.loader import load_params
from pipeline.runtime import environment
from pipeline.tracking import probe, runs
from pipeline.training import cluster, distribute
from stages._common import dataset_argument, params_option, path_option


@click.command("train")
@dataset_argument
@path_option("--data", "Folder written by the preprocess stage.")
@path_option("--model-dir", "Folder to write model.keras and run.json (the MLflow run) to.")
@path_option("--history", "CSV of per-epoch metrics, for dvc plots.")
@path_option("--summary", "JSON of the training's results (best epoch, final losses and accuracies), for dvc metrics.")
@path_option("--curves", "PNG of the learning curves (loss and accuracy per epoch), for dvc plots.")
@click.option(
    "--measurements",
    type=click.Path(path_type=Path),
    default=None,
    help="JSON of what the run measured (time, throughput, peak memory, device counts), for dvc metrics.",
)
@click.option(
    "--machine",
    type=click.Path(path_type=Path),
    default=None,
    help="JSON of the machine the figures were measured on (CPU, instruction sets, GPUs, versions, date).",
)
@click.option(
    "--backup-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder for per-epoch backups, to resume a killed run (removed when training ends).",
)
@params_option
def command(dataset, data, model_dir, history, summary, curves, measurements, machine, backup_dir, params_path):
    """Train a dataset's model with tf.distribute; log to MLflow."""
    params = load_params(params_path, dataset)
    cfg = params.train
    from pipeline.data import arrays  # NumPy: after the config is checked

    # what needs no TensorFlow first: a wrong cluster, devices or data, or a tracking store that
    # cannot take the run (a single process logs: it is the chief), stops the stage at once
    distribute.check_before_tensorflow(cfg, where=f"train.{dataset}")
    splits, stats = arrays.load_prepared(data, ("train", "val"))

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
    ) as run:
        run.log_setup(params, setup.figures(), data, splits)
        result = trainer.train(
            cfg,
            splits=splits,
            stats=stats,
            strategy=setup.strategy,
            backup=backup,
            on_epoch=run.log_epoch,
            verbose=2 if log.shows_progress() else 0,
        )
        digest = trainer.weights_digest(result.model)
        if facts["workers"] > 1:  # the same final weights on every worker
            log.result(f"{dataset} [{setup.task}]: final weights sha256 {digest}")
        if setup.chief:
            model_sha256 = trainer.write_outputs(
                result,
                figures=setup.figures(),
                run_ids=run.ids,
                model_dir=model_dir,
                history=history,
                summary=summary,
                curves=curves,
                title=f"{dataset}: {name}",
                measurements=measurements,
                machine=machine,
                machine_facts=environment.machine() if machine else None,
            )
            run.log_training(result, weights_sha256=digest, model_sha256=model_sha256, history=history, curves=curves)
    backup.finish()
    if setup.chief:
        log.result(_result_line(dataset, cfg.epochs, facts, result, run.run_id))


def _result_line(dataset: str, epochs: int, facts: dict, result, run_id: Optional[str]) -> str:
    best, trained = result.summary["best_epoch"], result.summary["epochs_trained"]
    stopped = f"; stopped early, {epochs} at most" if trained < epochs else ""
    val_accuracy = result.history[best - 1]["val_accuracy"] if best else result.summary["final_val_accuracy"]
    return (
        f"{dataset}: {facts['replicas']} replica(s) on {facts['workers']} worker(s), {facts['strategy']}, "
        f"{result.samples_per_second:.0f} samples/s, best epoch {best} of {trained} "
        f"(val accuracy {val_accuracy:.4f}{stopped}); MLflow run {run_id}"
    )
