"""pipeline/config/datasets.py: one object per dataset, which every stage and command asks; each
dataset's reader gives the same shape of result, and what its object says agrees with it."""

import numpy as np
import pytest
from fixtures import make_mnist_archive, make_reuters_npz, make_word_index
from helpers import write_params

from pipeline.config import datasets, schema
from pipeline.config.datasets import DATASETS, SCHEMA
from pipeline.config.loader import load_params
from pipeline.errors import ConfigError


def downloaded(dataset, folder):
    if dataset == "reuters":
        make_reuters_npz(folder / "reuters.npz")
        make_word_index(folder / "reuters_word_index.json")
    else:
        make_mnist_archive(folder / "mnist_png.tar.gz")
    return folder


@pytest.mark.parametrize("name", DATASETS)
def test_every_dataset_prepares_what_its_object_says(tmp_path, name):
    dataset = datasets.get(name)
    cfg = load_params(write_params(tmp_path), name).preprocess  # MNIST's digest: the test archive's
    assert isinstance(cfg, dataset.preprocess)
    splits, stats = dataset.prepare(downloaded(name, tmp_path), cfg)
    assert set(splits) == {"train", "val", "test"}
    for x, y in splits.values():
        assert len(x) == len(y) > 0 and y.dtype.kind in "iu"  # integer labels
    assert stats["input"] == dataset.inputs
    assert stats["num_classes"] == dataset.num_classes
    labels = np.concatenate([y for _, y in splits.values()])
    assert labels.min() >= 0 and labels.max() < dataset.num_classes
    assert len(dataset.class_names()) == dataset.num_classes == len(set(dataset.class_names()))
    assert set(dataset.assets(tmp_path)) == ({"reuters_word_index.json"} if name == "reuters" else set())


def test_the_schema_has_every_section_for_every_dataset_in_the_registrys_order():
    assert DATASETS == ("reuters", "mnist")  # dvc.yaml's foreach, in its order
    assert all(list(per_dataset) == list(DATASETS) for per_dataset in SCHEMA.values())
    assert list(SCHEMA) == [*schema.STAGES, "serve", "promote", "tune"]
    assert SCHEMA["train"]["mnist"] is datasets.get("mnist").train


def test_an_unknown_dataset_is_a_config_error_naming_the_others():
    with pytest.raises(ConfigError, match=r"unknown dataset 'cifar': expected one of reuters, mnist"):
        datasets.get("cifar")
