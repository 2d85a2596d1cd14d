"""train: fit the dataset's model under a tf.distribute strategy; log the run to MLflow.

On several workers (MultiWorkerMirroredStrategy) every worker trains, and only the chief
logs to MLflow and writes the outputs. A killed run resumes from its last finished epoch
(kept in --backup-dir, not a DVC out) and continues the same MLflow run.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import click

from pipeline.config import load_params
from stages._common import dataset_argument, params_option, path_option


@click.command("train")
@dataset_argument
@path_option("--data", "Folder written by the preprocess stage.")
@path_option("--model-dir", "Folder to write model.keras and run.json (the MLflow run) to.")
@path_option("--history", "CSV of per-epoch metrics, for dvc plots.")
@path_option("--summary", "JSON of training figures (time, throughput, devices), for dvc metrics.")
@path_option("--curves", "PNG of the learning curves (loss and accuracy per epoch), for dvc plots.")
@click.option("--backup-dir", type=click.Path(path_type=Path), default=None,
              help="Folder for per-epoch backups, to resume a killed run (removed when training ends).")
@params_option
def command(dataset, data, model_dir, history, summary, curves, backup_dir, params_path):
    """Train DATASET's model on every device the host has (see params train.<dataset>)."""
    params = load_params(params_path, dataset)
    cfg = params.train
    # Devices must be configured, and a multi-worker strategy made, before any tensor.
    from pipeline import distribute

    where = f"train.{dataset}"
    info = distribute.configure_devices(cfg.devices, where=f"{where}.devices")
    strategy = distribute.strategy_for(cfg, info, where=where)
    devices = distribute.describe(strategy, info)
    chief = distribute.is_chief(strategy)

    import mlflow

    from pipeline import plots, tracking, training
    from pipeline.data import arrays
    from pipeline.io import atomic_dir, atomic_file, read_json, write_json

    splits = {s: arrays.load_split(data, s) for s in ("train", "val")}
    stats = read_json(data / "stats.json")
    if backup_dir is not None and not chief:
        backup_dir = backup_dir / distribute.task_name(strategy)  # a worker's own, removed below
    fingerprint = json.dumps(params.flat(), sort_keys=True, default=str)
    name = tracking.run_name(dataset, cfg.loop, devices["replicas"], devices["workers"], cfg.precision)
    run = (tracking.start_or_resume_run(dataset, backup_dir, fingerprint, run_name=name) if chief
           else contextlib.nullcontext())
    with run as active:
        if chief:
            mlflow.log_params(params.flat())
            mlflow.log_params({
                "devices.physical_gpus": devices["physical_gpus"],
                "devices.logical_devices": devices["logical_devices"],
                "distribute.replicas": devices["replicas"],
                "distribute.workers": devices["workers"],
                "distribute.strategy": devices["strategy"],
                "distribute.cross_device_ops": devices["cross_device_ops"],
                "train.global_batch_size": cfg.batch_size_per_replica * devices["replicas"],
                "data.train_samples": len(splits["train"][1]),
                "data.val_samples": len(splits["val"][1]),
            })
            mlflow.set_tags({**tracking.lineage_tags([data]), **tracking.framework_tags(),
                             "pipeline.stage": "train", "pipeline.dataset": dataset})
            tracking.log_inputs(dataset, data, splits)

        def log_epoch(epoch, row):
            if chief:
                mlflow.log_metrics({k: v for k, v in row.items() if k != "epoch"}, step=epoch)

        result = training.train(cfg, splits=splits, stats=stats, strategy=strategy,
                                on_epoch=log_epoch, backup_dir=backup_dir)
        digest = training.weights_digest(result.model)
        click.echo(f"{dataset} [{distribute.task_name(strategy)}]: final weights sha256 {digest}")
        if chief:
            figures = {
                "train_seconds": result.train_seconds,
                "samples_per_second": result.samples_per_second,
                "global_batch_size": result.global_batch_size,
                **result.summary,
                **{k: devices[k] for k in ("physical_gpus", "logical_devices", "replicas", "workers",
                                           "strategy", "cross_device_ops")},
            }
            mlflow.log_metrics({"train_seconds": result.train_seconds,
                                "train_samples_per_second": result.samples_per_second})
            mlflow.set_tag("weights.sha256", digest)
            with atomic_dir(model_dir) as tmp:
                result.model.save(tmp / "model.keras")
                write_json(tmp / "run.json", {"run_id": active.info.run_id,
                                              "experiment_id": active.info.experiment_id})
            with atomic_file(history) as tmp:
                training.write_history_csv(result.history, tmp)
            write_json(summary, figures)
            with atomic_file(curves) as tmp:
                plots.learning_curves(result.history, tmp, f"{dataset}: {name}")
            mlflow.log_artifact(str(history))
            mlflow.log_artifact(str(curves), artifact_path="plots")
            signature = training.model_signature(
                result.model, splits["val"][0][:4], getattr(cfg, "img_size", None))
            import mlflow.tensorflow

            mlflow.tensorflow.log_model(result.model, name="model", signature=signature,
                                        pip_requirements=tracking.model_requirements())
    if backup_dir is not None:
        shutil.rmtree(backup_dir, ignore_errors=True)  # finished: nothing to resume
    if chief:
        click.echo(
            f"{dataset}: {devices['replicas']} replica(s) on {devices['workers']} worker(s), "
            f"{devices['strategy']}, {result.samples_per_second:.0f} samples/s, "
            f"val accuracy {result.summary['final_val_accuracy']:.4f}; MLflow run {active.info.run_id}"
        )
