"""download: fetch a dataset's files (mirror, sha256, retries, resume) into a folder."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline import log
from pipeline.config.loading.loader import load_params
from pipeline.data.fetch import fetch_all, sources_path
from pipeline.io import write_json
from stages._common import dataset_argument, params_option, path_option

# in the folder of pretrained weights: the names of the files it holds (none for most datasets)
PRETRAINED_LIST = "weights.json"


@click.command("download")
@dataset_argument
@path_option("--out", "Folder to write the dataset's files to.")
@path_option(
    "--manifest",
    "JSON file recording each file's name, configured URL, size and sha256 (the same on every host; "
    "where the bytes came from goes to <out>.sources.json, untracked).",
)
@click.option(
    "--pretrained",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder to write the pretrained weights to (download.DATASET.pretrained; empty when there are none).",
)
@params_option
def command(dataset, out, manifest, pretrained, params_path):
    """Download a dataset's files, verified, into a folder."""
    params = load_params(params_path, dataset)
    results = fetch_all(params.download, out)
    weights = [] if pretrained is None else fetch_all(params.download, pretrained, files=params.download.pretrained)
    if pretrained is not None:  # what the folder holds, said in it: never an empty folder for DVC to warn of
        write_json(pretrained / PRETRAINED_LIST, {"dataset": dataset, "files": [r.name for r in weights]})
    # where the bytes came from is this host's: beside the folder, for the training run to record
    # (first: a sources file newer than the manifest names other sha256s, and is not recorded)
    write_json(sources_path(out), {"dataset": dataset, "files": [r.source() for r in results + weights]})
    described = {"dataset": dataset, "files": [r.described() for r in results]}
    if pretrained is not None:
        described["pretrained"] = [r.described() for r in weights]
    write_json(manifest, described)
    unpinned = params.unpinned()
    for r in weights:
        state = "verified" if r.verified else "not pinned"
        log.result(f"{r.name}: {r.bytes} bytes, sha256 {r.sha256} ({state}) from {r.fetched_from}")
    for r in results:
        state = (
            "verified"
            if r.verified
            else f"its images checked by preprocess.{dataset}.images_sha256"
            if not unpinned
            else "not pinned"
        )
        log.result(f"{r.name}: {r.bytes} bytes, sha256 {r.sha256} ({state}) from {r.fetched_from}")
    for line in unpinned:
        log.log.warning("%s", line)
