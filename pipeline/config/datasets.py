"""The datasets, one object each: its name (params sections, dvc.yaml's foreach, MLflow's
experiment and registered model), what its samples are, its classes, the module of
`pipeline.data` that reads its download folder, and its sections' classes in the schema.
Everything that differs between datasets asks this object rather than testing a name: a new
dataset is its reader module and one entry of REGISTRY."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal

from pipeline.config import schema
from pipeline.errors import ConfigError

if TYPE_CHECKING:
    from pipeline.config.schema import PreprocessConfig


@dataclass(frozen=True)
class Dataset:
    name: str
    title: str  # as the docs and the benchmarks page write it
    inputs: Literal["sequences", "images"]  # what the prepared splits hold (stats.json's "input")
    num_classes: int  # what a top k is judged against before any data or store is read
    reader: str  # its module of pipeline.data: prepare(raw_dir, cfg), assets(raw_dir), class_names(n)
    preprocess: type  # its preprocess and train sections' classes (the other sections are alike)
    train: type

    def module(self) -> ModuleType:
        # imported when asked: NumPy and Pillow stay off the paths that only read the config
        return importlib.import_module(self.reader)

    def prepare(self, raw_dir: Path | str, cfg: PreprocessConfig) -> tuple[dict, dict]:
        """The splits ({split: (x, y)}) and stats of the download folder `raw_dir`."""
        return self.module().prepare(raw_dir, cfg)

    def assets(self, raw_dir: Path | str) -> dict:
        """The JSON documents the prepared folder keeps beside the splits (Reuters' word index)."""
        return self.module().assets(raw_dir)

    def class_names(self) -> list[str]:
        """The label of each class, as a served model answers with it."""
        return self.module().class_names(self.num_classes)


REGISTRY = (
    Dataset(
        "reuters",
        "Reuters",
        "sequences",
        46,
        "pipeline.data.reuters",
        schema.ReutersPreprocessConfig,
        schema.ReutersTrainConfig,
    ),
    Dataset(
        "mnist", "MNIST", "images", 10, "pipeline.data.mnist", schema.MnistPreprocessConfig, schema.MnistTrainConfig
    ),
)
DATASETS = tuple(d.name for d in REGISTRY)

# every section of the params file: stage -> dataset -> its class
SCHEMA: dict[str, dict[str, type]] = {
    "download": {d.name: schema.DownloadConfig for d in REGISTRY},
    "preprocess": {d.name: d.preprocess for d in REGISTRY},
    "train": {d.name: d.train for d in REGISTRY},
    "evaluate": {d.name: schema.EvaluateConfig for d in REGISTRY},
    "serve": {d.name: schema.ServeConfig for d in REGISTRY},
    "promote": {d.name: schema.PromoteConfig for d in REGISTRY},
    "tune": {d.name: schema.TuneConfig for d in REGISTRY},
}


def get(name: str) -> Dataset:
    """The dataset called `name`; a ConfigError listing the others."""
    for dataset in REGISTRY:
        if dataset.name == name:
            return dataset
    raise ConfigError(f"unknown dataset {name!r}: expected one of {', '.join(DATASETS)}")
