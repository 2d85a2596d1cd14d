"""`pipeline compare`: MLflow runs side by side, what differs among them, as text, JSON or CSV
(pipeline.tracking.compare)."""

from __future__ import annotations

import click

from pipeline.options import json_option
from pipeline.tracking import compare


@click.command("compare")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option("--all", "show_all", is_flag=True, help="Show the params and tags that are equal too.")
@json_option
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV: section, key, one column per run.")
def compare_command(runs, show_all, as_json, as_csv):
    """MLflow runs side by side: what differs among them, and their metrics.

    RUN is a run id, a run name or a DVC experiment name (`dvc exp show`), in the tracking
    store MLFLOW_TRACKING_URI names (unset: mlflow.db in the repository root). Shown: the
    params (stage params, device counts, strategy) and lineage tags (commit, data hashes,
    versions, host) whose values differ among the runs, and every metric (a run's last value;
    system metrics left out)."""
    if as_json and as_csv:
        raise click.UsageError("give --json or --csv, not both")
    form = "json" if as_json else "csv" if as_csv else "text"
    click.echo(compare.render(compare.compare(runs, show_all=show_all), form), nl=False)
