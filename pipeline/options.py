"""The click options that the `pipeline` group's commands and the stages share, each defined
once: a command takes the option from here, never a copy of it."""

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

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")

data_option = click.option(
    "--data", type=click.Path(path_type=Path), default=None, help="The prepared data.  [default: data/prepared/DATASET]"
)


def set_option(scope: str, example: str):
    """-S/--set KEY=VALUE, repeatable: a param set `scope` (for this measurement, in the new
    sections), as `dvc exp run -S` sets it; `example` is a key of the command's own."""
    return click.option(
        "-S",
        "--set",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        help=f"Set a param {scope}, as `dvc exp run -S` does (e.g. {example}). Repeatable.",
    )


def dataset_option(*, multiple: bool = False):
    """--dataset: whose train.<dataset> devices and strategy a command applies (one dataset);
    with `multiple`, the datasets a command checks, repeatable, every dataset by default."""
    return click.option(
        "--dataset",
        "datasets" if multiple else "dataset",
        multiple=multiple,
        help="Check this dataset's model only (repeatable).  [default: every dataset]"
        if multiple
        else "Apply this dataset's train.<dataset>.devices and strategy from the params file.  "
        "[default: its first dataset]",
    )


host_option = click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to serve on (0.0.0.0: every interface, as in a container).",
)
