"""Arguments every stage shares."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.config import DATASETS

dataset_argument = click.argument("dataset", metavar="DATASET", type=click.Choice(DATASETS))
params_option = click.option(
    "--params", "params_path", type=click.Path(path_type=Path), default=Path("params.yaml"),
    show_default=True, help="The params file (defaults live there and nowhere else).",
)


def path_option(name: str, help: str):
    return click.option(name, type=click.Path(path_type=Path), required=True, help=help)
