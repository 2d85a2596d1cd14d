"""`pipeline ui`: MLflow's UI on the project's runs (pipeline.tracking.ui)."""

from __future__ import annotations

import sys

import click

from pipeline.options import host_option
from pipeline.tracking import ui


@click.command("ui")
@host_option
@click.option("--port", type=int, default=5000, show_default=True, help="Port to serve on (MLflow's own).")
def ui_command(host, port):
    """MLflow's UI on this project's runs, on 127.0.0.1.

    The runs in mlflow.db in the repository root, or in the store MLFLOW_TRACKING_URI names
    (a tracking server already serves its UI: its URL is printed), with a link to each
    experiment's runs table (MLflow 3.17 opens an experiment on its GenAI overview until the
    browser's "Model training" switch is on). One worker, no job runners, no access log;
    Ctrl+C stops it."""
    sys.exit(ui.serve(host, port, click.echo))
