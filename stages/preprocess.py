"""preprocess: raw files -> compact arrays (int32 sequences, uint8 images) and a stats file."""

from __future__ import annotations

import click

from pipeline.config import load_params
from stages._common import dataset_argument, params_option, path_option


@click.command("preprocess")
@dataset_argument
@path_option("--raw", "Folder written by the download stage.")
@path_option("--out", "Folder to write train/val/test .npz files and stats.json to.")
@params_option
def command(dataset, raw, out, params_path):
    """Turn DATASET's downloaded files into arrays with train, validation and test splits."""
    from pipeline.data import arrays
    from pipeline.io import atomic_dir, write_json

    cfg = load_params(params_path, dataset).preprocess
    if dataset == "reuters":
        from pipeline.data import reuters

        splits, stats = reuters.prepare(*reuters.load_raw(raw), cfg)
    else:
        from pipeline.data import mnist

        splits, stats = mnist.prepare(mnist.read_archive(mnist.find_archive(raw), cfg.image_size), cfg)
    with atomic_dir(out) as tmp:
        for split, (x, y) in splits.items():
            arrays.save_split(tmp, split, x, y)
        write_json(tmp / "stats.json", stats)
    click.echo(f"{dataset}: " + ", ".join(f"{k} {v}" for k, v in stats["samples"].items()))
