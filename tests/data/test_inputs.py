"""tf.data input pipelines over the prepared shards, and how a dataset's samples reach its model."""

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

import tensorflow as tf  # noqa: E402
from support.models import described, reuters_model  # noqa: E402

from pipeline.config.keys.model_table import MobileNetV2Settings  # noqa: E402
from pipeline.data import prepared  # noqa: E402
from pipeline.data.inputs import (  # noqa: E402
    image_size_for,
    make_dataset,
    model_inputs,
    prepare_images,
    worker_ranges,
)
from pipeline.kinds.image_folders import ImageFoldersFacts  # noqa: E402
from pipeline.kinds.labelled_texts import full_length_facts  # noqa: E402
from pipeline.training import models  # noqa: E402

# the facts of the grey pictures of 28 pixels a side these tests write
GREY = ImageFoldersFacts(28, "grey", "folders", images_sha256=None)


def numbers(folder, n=100, shard_records=None, monkeypatch=None):
    """A prepared folder whose train split's sample i is [i, i] with label i % 4."""
    if shard_records is not None:
        monkeypatch.setattr(prepared, "SHARD_BYTES", shard_records * 12)
    x = np.repeat(np.arange(n, dtype=np.int32)[:, None], 2, axis=1)
    return prepared.write_arrays(
        folder, {"train": (x, x[:, 0] % 4)}, input_="sequences", class_names=list("abcd"),
        facts=full_length_facts(2, n),
    )  # fmt: skip


def samples(ds) -> list[int]:
    return np.concatenate([b[0].numpy()[:, 0] for b in ds]).tolist()


def test_shuffle_gives_a_new_order_every_epoch_and_sees_every_sample(tmp_path, monkeypatch):
    data = numbers(tmp_path / "p", shard_records=30, monkeypatch=monkeypatch)
    assert len(data.split("train").shards) == 4
    ds = make_dataset(data, "train", batch_size=10, shuffle=True, seed=1, shuffle_buffer=8)
    first, second = samples(ds), samples(ds)
    assert sorted(first) == sorted(second) == list(range(100))
    assert first != second
    again = samples(make_dataset(data, "train", batch_size=10, shuffle=True, seed=1, shuffle_buffer=8))
    assert again == first  # seeded: the same order in another pipeline
    assert samples(make_dataset(data, "train", batch_size=30, shuffle=False)) == list(range(100))
    labels = np.concatenate([b[1].numpy() for b in ds])
    assert labels.dtype == np.int32


def test_a_buffer_as_large_as_the_split_gives_the_order_of_a_whole_shuffle(tmp_path):
    """A buffer at least the split's size shuffles it as one the exact size does: what keeps a
    dataset's order when its buffer grows past it."""
    data = numbers(tmp_path / "p", n=50)
    exact = samples(make_dataset(data, "train", batch_size=50, shuffle=True, seed=3, shuffle_buffer=50))
    larger = samples(make_dataset(data, "train", batch_size=50, shuffle=True, seed=3, shuffle_buffer=10000))
    assert exact == larger


def test_each_worker_reads_its_own_equal_share(tmp_path, monkeypatch):
    data = numbers(tmp_path / "p", n=101, shard_records=40, monkeypatch=monkeypatch)
    shards = [str(p) for p in data.shard_paths("train")]
    assert worker_ranges(data, "train", 0, 2) == [(shards[0], 0, 40), (shards[1], 0, 10)]
    assert worker_ranges(data, "train", 1, 2) == [(shards[1], 10, 30), (shards[2], 0, 20)]
    first = samples(make_dataset(data, "train", batch_size=7, shuffle=False, worker=0, workers=2))
    second = samples(make_dataset(data, "train", batch_size=7, shuffle=False, worker=1, workers=2))
    assert first == list(range(50)) and second == list(range(50, 100))  # the 101st: read by none
    ds = make_dataset(data, "train", batch_size=7, shuffle=True, seed=2, worker=1, workers=2)
    assert sorted(samples(ds)) == list(range(50, 100))
    assert ds.options().experimental_distribute.auto_shard_policy == tf.data.experimental.AutoShardPolicy.OFF


def test_drop_remainder_and_limit(tmp_path):
    data = numbers(tmp_path / "p", n=10)
    batches = [
        b[0].numpy()[:, 0].tolist()
        for b in make_dataset(data, "train", batch_size=4, shuffle=False, drop_remainder=True)
    ]
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert samples(make_dataset(data, "train", batch_size=4, shuffle=False, limit=5)) == [0, 1, 2, 3, 4]


def test_images_are_scaled_resized_and_expanded_in_the_pipeline(tmp_path):
    x = np.zeros((4, 28, 28), np.uint8)
    x[:, 0, 0] = 255
    out = prepare_images(tf.constant(x), 32).numpy()
    assert out.shape == (4, 32, 32, 3) and out.dtype == np.float32
    assert out.min() == -1.0 and out.max() <= 1.0 and out.max() > 0
    data = prepared.write_arrays(
        tmp_path / "img", {"test": (x, np.array([0, 1, 2, 1], np.uint8))}, input_="images",
        class_names=list("abc"), facts=GREY,
    )  # fmt: skip
    ((batch, labels),) = list(make_dataset(data, "test", batch_size=4, shuffle=False, image_size=32))
    assert np.allclose(batch.numpy(), out) and labels.numpy().tolist() == [0, 1, 2, 1]


def test_the_prepared_description_says_whether_a_dataset_is_images():
    images = models.mobilenet_v2(
        MobileNetV2Settings(32, 1.0, 8, 0.9, None), prepared.Prepared(Path(), "images", (28, 28), list("ab"), {}, GREY)
    )
    sequences = reuters_model(max_len=20, vocab_size=50)
    pictures = prepared.Prepared(described(20, 50).folder, "images", (28, 28), list("ab"), {}, GREY)
    assert image_size_for(pictures, images) == 32
    assert image_size_for(described(20, 50), sequences) is None
    digits = np.full((2, 28, 28), 255, np.uint8)
    assert model_inputs(digits, 32).shape == (2, 32, 32, 3)
    words = np.ones((2, 20), np.int32)
    assert model_inputs(words, None) is words


def test_a_tap_checks_the_shards_and_takes_the_digest_as_the_model_reads_them(tmp_path, monkeypatch):
    """Batches that straddle shards (30 records a shard, 7 a batch): the tap's digest and labels
    are `Prepared.digest`'s, with no read of its own; a flipped bit is named by its shard once
    the stream has passed it; a stream stopped short is said."""
    data = numbers(tmp_path / "p", shard_records=30, monkeypatch=monkeypatch)
    assert len(data.split("train").shards) == 4

    def streamed():
        tap = data.tap("train")
        return tap, samples(make_dataset(data, "train", batch_size=7, shuffle=False, tap=tap))

    tap, got = streamed()
    assert got == list(range(100))
    digest, labels = tap.finish()
    assert (digest, labels.tolist()) == (data.digest("train")[0], data.digest("train")[1].tolist())
    # a stream stopped short (given here by hand: tf.data reads ahead of a `take`)
    short = data.tap("train")
    size = data.record_bytes
    raw = b"".join(path.read_bytes() for path in data.shard_paths("train"))
    short.update(np.array([raw[i * size : (i + 1) * size] for i in range(40)], dtype=object))
    with pytest.raises(prepared.DataError, match=r"train-00001-of-00004\.bin: not read to its end \(20 record"):
        short.finish()
    shard = tmp_path / "p" / data.split("train").shards[2].file
    whole = shard.read_bytes()
    shard.write_bytes(whole[:40] + bytes([whole[40] ^ 1]) + whole[41:])
    with pytest.raises(prepared.DataError, match=rf"^{shard}: corrupt \(sha256 [0-9a-f]{{64}}, stats\.json records "):
        streamed()[0].finish()
