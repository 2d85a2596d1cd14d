"""preprocess: raw files -> compact arrays (int32 sequences, uint8 images), a stats file, and
what a model needs to read raw inputs (a dataset of texts' word index)."""

from __future__ import annotations

import click

from pipeline import log
from pipeline.config import datasets
from pipeline.config.loader import load_params
from stages._common import dataset_argument, params_option, path_option


@click.command("preprocess")
@dataset_argument
@path_option("--raw", "Folder written by the download stage.")
@path_option("--out", "Folder to write train/val/test .npz files and stats.json to.")
@params_option
def command(dataset, raw, out, params_path):
    """Turn downloaded files into train/val/test arrays."""
    from pipeline.data import arrays  # NumPy: after the config is checked

    cfg = load_params(params_path, dataset).preprocess
    splits, stats, assets = datasets.of(cfg, dataset).prepare(raw, cfg)
    arrays.save_prepared(out, splits, stats, assets)
    log.result(f"{dataset}: " + ", ".join(f"{k} {v}" for k, v in stats["samples"].items()))
