"""`pipeline promote`: a registered version made the champion, the alias `pipeline serve` serves,
if it passes the gate (pipeline.serving.registry); exit 1 when it does not."""

from __future__ import annotations

import sys

import click

from pipeline.config.loading.loader import load_params
from pipeline.options import params_option
from pipeline.serving import registry
from pipeline.tracking import probe


@click.command("promote")
@click.argument("dataset")
@click.argument("version", type=click.IntRange(min=1), required=False)
@click.option("--force", is_flag=True, help="Move the alias whatever the version scores (a rollback).")
@params_option
def promote_command(dataset, version, force, params_path):
    """Make a registered version of DATASET the champion (the alias `pipeline serve` serves).

    VERSION is a version of the registered model DATASET (evaluate registers each model it
    evaluates); by default the best by promote.DATASET.metric. The alias moves only if the
    version beats the champion by promote.DATASET.margin on the same test split, and the
    reason is printed when it does not (exit 1); --force moves it anyway."""
    cfg = load_params(params_path, dataset).promote
    probe.check_tracking()
    decision = registry.promote(dataset, cfg, version, force)
    click.echo(decision.message)
    if decision.refused:
        sys.exit(1)
