"""preprocess: raw files -> each split as shards of compact records (int32 sequences, uint8
images), streamed, a description (stats.json), and what a model needs to read raw inputs (a
dataset of texts' word index)."""

from __future__ import annotations

import click

from pipeline import log
from pipeline.config.loading import datasets
from pipeline.config.loading.loader import load_params
from stages._common import dataset_argument, params_option, path_option


@click.command("preprocess")
@dataset_argument
@path_option("--raw", "Folder written by the download stage.")
@path_option("--out", "Folder to write the train/val/test shards and stats.json to.")
@params_option
def command(dataset, raw, out, params_path):
    """Turn downloaded files into train/val/test shards."""
    cfg = load_params(params_path, dataset).preprocess
    found = datasets.of(cfg, dataset).prepare(raw, out, cfg)
    log.result(f"{dataset}: " + ", ".join(f"{k} {s.samples}" for k, s in found.splits.items()))
