"""`pipeline remove`: a dataset taken out of the params file and dvc.yaml, `pipeline add`'s way
back (pipeline.config.commands.declare)."""

from __future__ import annotations

import click

from pipeline.config.commands import declare
from pipeline.options import params_option


@click.command("remove")
@click.argument("name")
@params_option
def remove_command(name, params_path):
    """Take dataset NAME out of the params file and dvc.yaml: `pipeline add`'s way back.

    Its sections, and its name in dvc.yaml's foreach lists, metrics and plots; its files
    (data/, models/, reports/), dvc.lock and its MLflow runs and model are left alone."""
    click.echo(declare.remove(params_path, name))
