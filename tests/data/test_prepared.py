"""The prepared-data format shared by preprocess, train, evaluate and the tools: shards of
fixed-length records and the folder's description."""

import json

import numpy as np
import pytest

from pipeline.data import prepared
from pipeline.errors import DataError


def splits_of(n=10, width=3):
    x = np.arange(n * width, dtype=np.int32).reshape(n, width)
    y = np.arange(n, dtype=np.int32) % 4
    return {"train": (x[:6], y[:6]), "val": (x[6:8], y[6:8]), "test": (x[8:], y[8:])}


def write(folder, splits=None, **details):
    return prepared.write_arrays(
        folder, splits or splits_of(), input_="sequences", class_names=["a", "b", "c", "d"], details=details
    )


def test_prepared_folder_round_trips(tmp_path):
    write(tmp_path / "out", vocab_size=90)
    found = prepared.read(tmp_path / "out")
    assert (found.input, found.shape, found.num_classes, found.details) == ("sequences", (3,), 4, {"vocab_size": 90})
    for name, (x, y) in splits_of().items():
        got_x, got_y = found.head(name, 100)
        assert np.array_equal(got_x, x) and np.array_equal(got_y, y) and got_y.dtype == np.int32
        assert found.samples(name) == len(y)
        assert found.split(name).class_counts == np.bincount(y, minlength=4).tolist()
    found.check(*prepared.SPLITS)
    assert found.head("train", 2)[0].tolist() == splits_of()["train"][0][:2].tolist()


def test_samples_given_in_any_order_are_written_in_their_places(tmp_path, monkeypatch):
    monkeypatch.setattr(prepared, "SHARD_BYTES", 3 * 16)  # three records of four int32 a shard
    with prepared.Writer(tmp_path / "out") as writer:
        split = writer.split("train", 8, (3,), "sequences", 4)
        for place in (5, 0, 7, 2, 1, 6, 3, 4):
            split.add(place, place % 4, np.full(3, place, np.int32))
        done = split.close()
        writer.finish({"train": done}, input_="sequences", shape=(3,), class_names=list("abcd"), details={})
    found = prepared.read(tmp_path / "out")
    assert [s.samples for s in found.split("train").shards] == [3, 3, 2]
    x, y = found.head("train", 8)
    assert x[:, 0].tolist() == list(range(8)) and y.tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "stats.json",
        "train-00000-of-00003.bin",
        "train-00001-of-00003.bin",
        "train-00002-of-00003.bin",
    ]


def test_a_failed_write_leaves_the_previous_folder(tmp_path):
    write(tmp_path / "out", vocab_size=1)
    with pytest.raises(TypeError):
        write(tmp_path / "out", vocab_size=object())  # not JSON
    assert prepared.read(tmp_path / "out").details == {"vocab_size": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_shard_missing_cut_short_or_corrupt_is_named(tmp_path):
    write(tmp_path / "out")
    found = prepared.read(tmp_path / "out")
    shard = tmp_path / "out" / found.split("train").shards[0].file
    whole = shard.read_bytes()
    shard.write_bytes(whole[:-5])
    with pytest.raises(
        DataError, match=rf"^{shard}: cut short \(91 bytes, expected 96\); run the preprocess stage again$"
    ):
        found.check("train")
    shard.write_bytes(whole[:-1] + bytes([whole[-1] ^ 1]))
    with pytest.raises(DataError, match=rf"^{shard}: corrupt \(sha256 [0-9a-f]{{64}}, stats.json records "):
        found.check("train")
    found.check("train", digests=False)  # the size alone: a flipped bit passes
    shard.unlink()
    with pytest.raises(DataError, match=rf"^{shard}: missing; run the preprocess stage again$"):
        found.check("train")


def test_a_description_of_another_format_or_none_is_named(tmp_path):
    with pytest.raises(DataError, match=r"stats\.json: missing; run the preprocess stage first"):
        prepared.read(tmp_path)
    (tmp_path / "stats.json").write_text(json.dumps({"input": "sequences", "num_classes": 4}))
    with pytest.raises(DataError, match=r"expected prepared data of format .*got None \(an older version wrote it\)"):
        prepared.read(tmp_path)
    write(tmp_path / "out")
    raw = json.loads((tmp_path / "out" / "stats.json").read_text())
    raw["samples"]["train"] = 7
    (tmp_path / "out" / "stats.json").write_text(json.dumps(raw))
    with pytest.raises(DataError, match=r"train: its shards hold another number of samples than 7"):
        prepared.read(tmp_path / "out")
    del raw["shards"]
    (tmp_path / "out" / "stats.json").write_text(json.dumps(raw))
    with pytest.raises(DataError, match=r"not a prepared folder's description \(KeyError: 'shards'\)"):
        prepared.read(tmp_path / "out")


def test_the_digest_is_of_the_samples_not_the_shards(tmp_path, monkeypatch):
    write(tmp_path / "one")
    monkeypatch.setattr(prepared, "SHARD_BYTES", 16)
    write(tmp_path / "many")
    one, many = prepared.read(tmp_path / "one"), prepared.read(tmp_path / "many")
    assert len(many.split("train").shards) == 6 and len(one.split("train").shards) == 1
    assert one.digest("train")[0] == many.digest("train")[0]
    assert one.digest("train")[1].tolist() == splits_of()["train"][1].tolist()
    assert one.digest("train")[0] != one.digest("val")[0]
    assert one.shards_digest("train") != many.shards_digest("train")


def test_balanced_class_weights_are_n_over_classes_times_count(tmp_path):
    y = np.array([0] * 6 + [1] * 3 + [2] * 1 + [3] * 2, dtype=np.int32)
    x = np.zeros((len(y), 3), np.int32)
    found = write(tmp_path / "out", {"train": (x, y), "val": (x[:2], y[[0, 6]])})
    weights = found.class_weights("train")
    assert weights == pytest.approx([12 / (4 * 6), 12 / (4 * 3), 12 / (4 * 1), 12 / (4 * 2)])
    # the description's counts are those of the labels in the shards
    assert found.split("train").class_counts == np.bincount(found.digest("train")[1], minlength=4).tolist()
    sklearn = pytest.importorskip("sklearn.utils.class_weight")  # scikit-learn's own "balanced"
    assert weights == pytest.approx(sklearn.compute_class_weight("balanced", classes=np.arange(4), y=y).tolist())
    # a class the split lacks has no such weight: one error naming it, not a silent 0
    lacking = r"stats\.json: class 'c' \(and 1 more\) has no sample in the val split.*stratify: true"
    with pytest.raises(DataError, match=lacking):
        found.class_weights("val")
