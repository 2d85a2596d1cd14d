"""The one dataset interface: `prepare(dataset, raw_dir, cfg)` for every dataset."""

import numpy as np
import pytest

from fixtures import make_mnist_archive, make_reuters_npz, make_word_index
from helpers import write_params
from pipeline.config import load_params
from pipeline.schema import DATASETS
from pipeline.data import prepare


def downloaded(dataset, folder):
    if dataset == "reuters":
        make_reuters_npz(folder / "reuters.npz")
        make_word_index(folder / "reuters_word_index.json")
    else:
        make_mnist_archive(folder / "mnist_png.tar.gz")
    return folder


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_dataset_prepares_the_same_shape_of_result(tmp_path, dataset):
    cfg = load_params(write_params(tmp_path), dataset).preprocess  # MNIST's digest: the test archive's
    splits, stats = prepare(dataset, downloaded(dataset, tmp_path), cfg)
    assert set(splits) == {"train", "val", "test"}
    for x, y in splits.values():
        assert len(x) == len(y) > 0 and y.dtype.kind in "iu"  # integer labels
    assert stats["input"] == {"reuters": "sequences", "mnist": "images"}[dataset]
    labels = np.concatenate([y for _, y in splits.values()])
    assert labels.min() >= 0 and labels.max() < stats["num_classes"]


def test_every_dataset_of_the_config_has_its_module():
    from pipeline import data
    from pipeline.schema import DATASETS

    assert list(data.MODULES) == list(DATASETS)
    assert all(callable(module.prepare) for module in data.MODULES.values())
