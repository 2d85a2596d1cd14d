"""The prepared-data folder shared by preprocess, train and evaluate."""

import numpy as np
import pytest

from pipeline.data import arrays
from pipeline.errors import DataError


def splits_of(n=10):
    x = np.arange(n * 3, dtype=np.int32).reshape(n, 3)
    y = np.arange(n, dtype=np.int32) % 4
    return {"train": (x[:6], y[:6]), "val": (x[6:8], y[6:8]), "test": (x[8:], y[8:])}


def test_prepared_folder_round_trips(tmp_path):
    arrays.save_prepared(tmp_path / "out", splits_of(), {"num_classes": 4, "input": "sequences"})
    splits, stats = arrays.load_prepared(tmp_path / "out")
    assert stats == {"num_classes": 4, "input": "sequences"}
    for name, (x, y) in splits_of().items():
        assert np.array_equal(splits[name][0], x) and np.array_equal(splits[name][1], y)
    only, _ = arrays.load_prepared(tmp_path / "out", ("train",))
    assert list(only) == ["train"]


def test_a_failed_save_leaves_the_previous_folder(tmp_path):
    arrays.save_prepared(tmp_path / "out", splits_of(), {"num_classes": 4})
    with pytest.raises(TypeError):
        arrays.save_prepared(tmp_path / "out", splits_of(), {"num_classes": object()})  # not JSON
    assert arrays.load_prepared(tmp_path / "out")[1] == {"num_classes": 4}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_missing_and_malformed_splits_name_the_file(tmp_path):
    with pytest.raises(DataError, match=r"train\.npz: missing; run the preprocess stage first"):
        arrays.load_split(tmp_path, "train")
    np.savez(tmp_path / "val.npz", a=np.zeros(2))
    with pytest.raises(DataError, match=r"val\.npz: expected arrays 'x' and 'y', found \['a'\]"):
        arrays.load_split(tmp_path, "val")
    (tmp_path / "test.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match=r"test\.npz: cannot read"):
        arrays.load_split(tmp_path, "test")


def test_validation_hold_out_is_seeded_and_disjoint():
    train, val = arrays.split_validation(100, 0.1, seed=3)
    assert len(val) == 10 and len(train) == 90 and not set(train) & set(val)
    assert np.array_equal(arrays.split_validation(100, 0.1, seed=3)[1], val)
    assert not np.array_equal(arrays.split_validation(100, 0.1, seed=4)[1], val)
    assert arrays.class_counts(np.array([0, 2, 2]), 4) == [1, 0, 2, 0]
