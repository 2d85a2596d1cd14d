"""`pipeline add`: a dataset declared in the params file and dvc.yaml from its kind's template,
with the settings read from its data (pipeline.config.commands.declare)."""

from __future__ import annotations

import click

from pipeline.config.commands import declare
from pipeline.kinds.known import KINDS
from pipeline.options import params_option, set_option


@click.command("add")
@click.argument("name")
@click.option(
    "--kind",
    type=click.Choice(list(KINDS)),
    required=True,
    help="What its samples are: " + "; ".join(f"{kind.name}, {kind.help}" for kind in KINDS.values()) + ".",
)
@click.option("--url", required=True, help="Where its file is published: http://, https:// or file://.")
@click.option("--sha256", metavar="HEX", help="The file's sha256, checked by the download.  [default: none]")
@click.option(
    "--photos",
    is_flag=True,
    help="Image folders of photos: MobileNetV2 from ImageNet weights (add.photos) whatever the pictures' size "
    "(without it, pictures over 128 pixels a side are taken as photos, smaller ones get add.image_folders' small "
    "convnet learnt from scratch).",
)
@set_option("in the new sections", "preprocess.NAME.text_column=summary")
@params_option
def add_command(name, kind, url, sha256, photos, overrides, params_path):
    """Declare a dataset NAME: its sections in the params file, its stages in dvc.yaml.

    KIND says what its samples are (--kind below lists the kinds). It reads the dataset first
    (fetched into a temporary folder, or where a file:// URL names it) and prints each setting
    it chooses from it, with the figure it chose it from: for pictures the side to train at, the
    colour, photos or not; for texts the sequence length, the vocabulary and the linear model's
    penalty; for tables what each column is. For every kind the classes' spread is printed
    beside the template's class_weight, which stands. Each stage section of the params file gets
    a copy of add.KIND (add.photos for photos), the defaults of a new dataset, with --url,
    --sha256, the choices and each -S set (which wins over a choice); dvc.yaml lists NAME in each
    foreach, and its measurements and learning curves. Both files are checked first, and neither
    is written unless both are. Then `dvc repro evaluate@NAME` runs its stages (docs/own-data.md)."""
    click.echo(declare.add(params_path, name, kind, url, sha256, overrides, photos=photos))
