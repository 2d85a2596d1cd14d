"""tf.data input pipelines over the prepared shards: read (in parallel), shuffle in a bounded
buffer (a new order every epoch), batch, prefetch. Memory holds the shuffle buffer and a few
batches, whatever the size of the split.

Images stay uint8 at their prepared size until here: scaling, resizing and the grey-to-RGB expansion
run per batch inside the pipeline, on the accelerator's side of the prefetch.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional

import numpy as np
import tensorflow as tf

if TYPE_CHECKING:
    from pipeline.data.prepared import Prepared, SplitTap

log = logging.getLogger("pipeline")
# shards read at once when the order is shuffled
PARALLEL_READS = 4


def worker_ranges(prepared: Prepared, split: str, worker: int, workers: int) -> list[tuple[str, int, int]]:
    """(shard path, first record, record count) of the records worker `worker` of `workers`
    reads: an equal, contiguous share of the split (the last `n % workers` records are read by
    none, so that every worker takes the same number of steps)."""
    n = prepared.samples(split)
    share = n // workers
    start, stop = worker * share, (worker + 1) * share
    ranges, offset = [], 0
    for shard, path in zip(prepared.split(split).shards, prepared.shard_paths(split)):
        lo, hi = max(start, offset), min(stop, offset + shard.samples)
        if lo < hi:
            ranges.append((str(path), lo - offset, hi - lo))
        offset += shard.samples
    return ranges


def make_dataset(
    prepared: Prepared,
    split: str,
    *,
    batch_size: int,
    shuffle: bool,
    seed: int = 0,
    shuffle_buffer: int = 1,
    image_size: Optional[int] = None,
    drop_remainder: bool = False,
    worker: int = 0,
    workers: int = 1,
    limit: Optional[int] = None,
    tap: Optional[SplitTap] = None,
) -> tf.data.Dataset:
    """A batched dataset of (features, labels) of a prepared split; `batch_size` is the
    global batch. Across workers (MultiWorkerMirroredStrategy) each reads its own share of the
    records (`worker_ranges`) and tf.data's own sharding is off. `limit`: the first samples
    only. `tap`: shown every batch of records, in order, before they are decoded (the split
    read once: its shards checked and its digest taken as the model reads it)."""
    ranges = worker_ranges(prepared, split, worker, workers)
    if workers > 1:
        left_out = prepared.samples(split) % workers
        if left_out:
            log.info("%s: %d sample(s) read by no worker, so that each of %d reads as many", split, left_out, workers)
    ds = _records(ranges, prepared.record_bytes, shuffle, seed)
    count = sum(n for _, _, n in ranges)
    if limit is not None:
        ds, count = ds.take(limit), min(limit, count)
    # the number of samples, which the records' reader cannot know: Keras counts an epoch's
    # steps from it (unknown, it warns that the input "ran out of data" at the end of each)
    ds = ds.apply(tf.data.experimental.assert_cardinality(count))
    # the records shuffled and batched as they are read, then decoded a batch at a time: one
    # operation per batch, not per sample
    if shuffle:
        ds = ds.shuffle(max(1, shuffle_buffer), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if tap is not None:  # sequential, in order: a tap sees the records as the files hold them
        ds = ds.map(lambda records: _tapped(tap, records))
    decode = _decoder(prepared)
    if image_size is not None:
        ds = ds.map(lambda records: _pictures(decode(records), image_size), num_parallel_calls=tf.data.AUTOTUNE)
    else:
        ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    # Across workers each reads its own records already: tf.data's sharding is off. On one,
    # DATA (a no-op on one worker) keeps tf.distribute splitting each batch evenly among the
    # replicas; under AUTO it fills the first replica's part of a partial last batch first,
    # and leaves the next one without a sample (seen on TF 2.21 with records read from files)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.OFF if workers > 1 else tf.data.experimental.AutoShardPolicy.DATA
    )
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


def _records(ranges: list[tuple[str, int, int]], size: int, shuffle: bool, seed: int) -> tf.data.Dataset:
    """The records of `ranges` (shard, first record, count), each `size` bytes: in order, or,
    shuffled, the ranges in a new order every epoch and several read at once."""
    if len(ranges) == 1:  # one shard's records (a dataset up to 64 MiB): read as they are, with
        # no interleave, whose per-record cost is most of an epoch's input time on a small model
        ((path, first, count),) = ranges
        return tf.data.FixedLengthRecordDataset(path, size, header_bytes=first * size, buffer_size=1 << 20).take(count)
    paths, firsts, counts = (list(column) for column in zip(*ranges)) if ranges else ([], [], [])
    pieces = tf.data.Dataset.from_tensor_slices(
        (tf.constant(paths, tf.string), tf.constant(firsts, tf.int64), tf.constant(counts, tf.int64))
    )
    if shuffle:
        pieces = pieces.shuffle(max(1, len(ranges)), seed=seed, reshuffle_each_iteration=True)
    return pieces.interleave(
        lambda path, first, count: tf.data.FixedLengthRecordDataset(
            path, size, header_bytes=first * size, buffer_size=1 << 20
        ).take(count),
        cycle_length=min(PARALLEL_READS, len(ranges)) if shuffle and ranges else 1,
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )


def _tapped(tap: SplitTap, records: tf.Tensor) -> tf.Tensor:
    seen = tf.numpy_function(tap.update, [records], tf.string, stateful=True)
    seen.set_shape(records.shape)
    return seen


def _decoder(prepared: Prepared):
    """A batch of records -> (samples, labels), as the prepared split holds them."""
    dtype = tf.as_dtype(prepared.kind.dtype)  # of the values and the label
    shape = list(prepared.shape)
    label_dtype = tf.as_dtype(prepared.label_dtype)

    def decode(records):
        values = tf.io.decode_raw(records, dtype, little_endian=True)
        return tf.reshape(values[:, 1:], [-1, *shape]), tf.cast(values[:, 0], label_dtype)

    return decode


def _pictures(batch: tuple, image_size: int) -> tuple:
    images, labels = batch
    return prepare_images(images, image_size), labels


def image_size_for(prepared: Prepared, model) -> Optional[int]:
    """The size a dataset's pictures are resized to for `model` (its input's), or None when its
    samples are not pictures: the prepared data's form says which."""
    return int(model.input_shape[1]) if prepared.kind.pictures else None


def model_inputs(x: np.ndarray, image_size: Optional[int]) -> np.ndarray:
    """Samples as the model receives them (images scaled and resized; sequences as they are)."""
    return prepare_images(tf.constant(x), image_size).numpy() if image_size is not None else x


def prepare_images(images: tf.Tensor, image_size: int) -> tf.Tensor:
    """uint8 [batch, h, w] (grey) or [batch, h, w, 3] (RGB) -> float32 [batch, size, size, 3]
    scaled to [-1, 1]."""
    grey = images.shape.rank == 3
    images = tf.cast(images, tf.float32) / 127.5 - 1.0
    if grey:
        images = images[..., tf.newaxis]
    if images.shape[1] != image_size or images.shape[2] != image_size:
        images = tf.image.resize(images, (image_size, image_size))
    return tf.image.grayscale_to_rgb(images) if grey else images
