"""The datasets. Each module (`reuters`, `mnist`) offers the same entry point,
`prepare(raw_dir, cfg) -> ({split: (x, y)}, stats)` and `assets(raw_dir) -> {file name: JSON
document}` (what a model of the dataset needs besides the splits), and records in the stats what its inputs
are (`"input"`: "sequences" or "images") for the stages after it."""

from __future__ import annotations

from pathlib import Path

from pipeline.data import mnist, reuters

# the module of each dataset of schema.DATASETS
MODULES = {"reuters": reuters, "mnist": mnist}


def prepare(dataset: str, raw_dir: Path | str, cfg) -> tuple[dict, dict]:
    """The splits and stats of `dataset` from its download folder."""
    return MODULES[dataset].prepare(raw_dir, cfg)


def assets(dataset: str, raw_dir: Path | str) -> dict:
    """The JSON documents the prepared folder keeps beside the splits (Reuters' word index)."""
    return MODULES[dataset].assets(raw_dir)
