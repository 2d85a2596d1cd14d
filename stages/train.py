"""train: fit the dataset's model under a tf.distribute strategy; log the run to MLflow
(`pipeline.training.lifecycle`: resume, several workers, what the chief writes)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.config.loading.loader import load_params
from pipeline.training import lifecycle
from stages._common import dataset_argument, params_option, path_option


def _optional_path(name: str, help: str):
    return click.option(name, type=click.Path(path_type=Path), default=None, help=help)


@click.command("train")
@dataset_argument
@path_option("--data", "Folder written by the preprocess stage.")
@path_option("--model-dir", "Folder to write model.keras and run.json (the MLflow run) to.")
@path_option("--history", "CSV of per-epoch metrics, for dvc plots.")
@path_option("--summary", "JSON of the training's results (best epoch, final losses and accuracies), for dvc metrics.")
@path_option("--curves", "PNG of the learning curves (loss and accuracy per epoch), for dvc plots.")
@_optional_path(
    "--measurements",
    "JSON of what the run measured (time, throughput, peak memory, device counts), for dvc metrics.",
)
@_optional_path(
    "--machine", "JSON of the machine the figures were measured on (CPU, instruction sets, GPUs, versions, date)."
)
@_optional_path("--backup-dir", "Folder for per-epoch backups, to resume a killed run (removed when training ends).")
@_optional_path(
    "--pretrained", "Folder of the pretrained weights the download stage fetched (download.DATASET.pretrained)."
)
@params_option
def command(
    dataset, data, model_dir, history, summary, curves, measurements, machine, backup_dir, pretrained, params_path
):
    """Train a dataset's model with tf.distribute; log to MLflow."""
    outputs = lifecycle.Outputs(model_dir, history, summary, curves, measurements, machine)
    params = load_params(params_path, dataset)
    lifecycle.run(params, prepared_dir=data, outputs=outputs, backup_dir=backup_dir, pretrained=pretrained)
