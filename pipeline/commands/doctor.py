"""`pipeline doctor`: this host checked before a run, a line per check with its fix
(pipeline.tools.doctor); exit 1 when a check fails."""

from __future__ import annotations

import sys

import click

from pipeline.options import dataset_option, json_option, params_option
from pipeline.tools import doctor


@click.command("doctor")
@dataset_option()
@params_option
@json_option
def doctor_command(dataset, params_path, as_json):
    """Check this host before a run: problems and their fixes.

    Git, DVC, the MLflow tracking store, disk, GPUs, driver and library versions, shared
    memory and the strategy, one line each: pass, warn or fail with its fix. Exits 1 if any
    check fails."""
    results = doctor.run_checks(params_path, dataset)
    click.echo(doctor.report(results, as_json))
    if any(c.status == "fail" for c in results):
        sys.exit(1)
