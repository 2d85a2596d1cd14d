"""`pipeline params`: every key of the params file, its value and its meaning, or the file put
back in the form `dvc exp run -S` writes (pipeline.config.commands.params_doc)."""

from __future__ import annotations

import shutil

import click

from pipeline.config.commands import params_doc
from pipeline.options import params_option


@click.command("params")
@click.argument("dataset", required=False)
@params_option
@click.option("--markdown", is_flag=True, help="Print the table docs/params.md shows (a column per dataset).")
@click.option(
    "--rewrite",
    is_flag=True,
    help="Rewrite the params file in the form `dvc exp run -S` writes it (after a hand edit), "
    "so that an override changes one line.",
)
def params_command(dataset, params_path, markdown, rewrite):
    """Every param, its value and what it means.

    Each key of the params file, the datasets' then the add section's templates (DATASET's
    alone, when given), as `dvc exp run -S` takes it, with its value and its meaning; the
    meanings are the config types' own (pipeline/config/keys/schema.py), which also check them."""
    width = min(shutil.get_terminal_size((100, 24)).columns, 100) - 1
    click.echo(params_doc.command(params_path, dataset, markdown=markdown, rewrite=rewrite, width=width), nl=False)
