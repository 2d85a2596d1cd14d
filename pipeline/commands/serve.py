"""`pipeline serve`: a dataset's registered model served over HTTP by MLflow's model server
(pipeline.serving.server)."""

from __future__ import annotations

import click

from pipeline.config.loading.loader import load_params
from pipeline.options import host_option, params_option
from pipeline.serving import server


@click.command("serve")
@click.argument("dataset")
@click.option("--alias", default="champion", show_default=True, help="Serve the version this alias points at.")
@click.option(
    "--version", "version", type=click.IntRange(min=1), default=None, help="Serve this version instead of the alias's."
)
@host_option
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=5001,
    show_default=True,
    help="Port to serve on (the MLflow UI has 5000).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Server processes, each with its own copy of the model.",
)
@params_option
def serve_command(dataset, alias, version, host, port, workers, params_path):
    """Serve DATASET's registered model over HTTP with `mlflow models serve`.

    The champion by default (`pipeline promote DATASET` sets it), from the tracking store
    MLFLOW_TRACKING_URI names (unset: mlflow.db here), in this environment
    (--env-manager local). POST /invocations a JSON request: Reuters takes a newswire's
    `text` (or Keras' word-id sequence, `ids`), MNIST a PNG or JPEG `image` (base64) or 28x28
    `pixels`; each row gets its label, probability and top k. Ctrl+C stops it."""
    metric = load_params(params_path, dataset).promote.metric
    server.serve(dataset, alias, version, metric, host, port, workers, click.echo)
