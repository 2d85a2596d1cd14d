"""The click options that the `pipeline` group's commands and the stages share."""

from __future__ import annotations

from pathlib import Path

import click

params_option = click.option(
    "--params",
    "params_path",
    type=click.Path(path_type=Path),
    default=Path("params.yaml"),
    show_default=True,
    help="The params file (defaults live there and nowhere else).",
)
