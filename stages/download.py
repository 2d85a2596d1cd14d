"""download: fetch a dataset's files (mirror, sha256, retries, resume) into a folder."""

from __future__ import annotations

import os

import click

from pipeline.config import load_params
from stages._common import dataset_argument, params_option, path_option

MIRROR_ENV = "PIPELINE_DATA_MIRROR"


@click.command("download")
@dataset_argument
@path_option("--out", "Folder to write the dataset's files to.")
@path_option("--manifest", "JSON file recording each file's source, size and sha256.")
@params_option
def command(dataset, out, manifest, params_path):
    """Download DATASET's files, verified, into --out."""
    from pipeline.data.fetch import fetch_all
    from pipeline.io import write_json

    cfg = load_params(params_path, dataset).download
    mirror = os.environ.get(MIRROR_ENV) or cfg.mirror
    results = fetch_all(
        cfg.files, out, mirror=mirror, retries=cfg.retries,
        backoff_seconds=cfg.backoff_seconds, timeout_seconds=cfg.timeout_seconds,
    )
    write_json(manifest, {"dataset": dataset, "files": [r.__dict__ for r in results]})
    for r in results:
        state = "verified" if r.verified else "no sha256 configured"
        click.echo(f"{r.name}: {r.bytes} bytes, sha256 {r.sha256} ({state}) from {r.fetched_from}")
