"""Arguments every stage shares."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.options import params_option  # noqa: F401 (the stages' own, too)


def _note_dataset(ctx: click.Context, _param, value: str) -> str:
    ctx.meta["pipeline.dataset"] = value  # for the line `pipeline` prints when the stage is done
    return value


dataset_argument = click.argument("dataset", metavar="DATASET", callback=_note_dataset)


def path_option(name: str, help: str):
    return click.option(name, type=click.Path(path_type=Path), required=True, help=help)
