"""tf.data input pipelines: shuffle (a new order every epoch), batch, prefetch.

Images stay uint8 at their prepared size until here: scaling, resizing and the grey-to-RGB expansion
run per batch inside the pipeline, on the accelerator's side of the prefetch.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf


def make_dataset(
    x: np.ndarray,
    y: np.ndarray,
    *,
    batch_size: int,
    shuffle: bool,
    seed: int = 0,
    shuffle_buffer: int = 0,
    image_size: Optional[int] = None,
    drop_remainder: bool = False,
) -> tf.data.Dataset:
    """A batched dataset of (features, labels); `batch_size` is the global batch."""
    # No cache(): the arrays are in memory already, and a cached dataset that Keras reads only
    # in part (fit takes one batch to build the model) makes tf.data warn on every run.
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if shuffle:
        buffer = shuffle_buffer or len(y)
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if image_size is not None:
        ds = ds.map(
            lambda images, labels: (prepare_images(images, image_size), labels), num_parallel_calls=tf.data.AUTOTUNE
        )
    # Across workers (MultiWorkerMirroredStrategy) the data are sharded by element (DATA): they
    # are in-memory arrays, with no files to divide, and every worker builds the same seeded
    # order, so each takes its own share of every global batch.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


def image_size_for(stats: dict, model) -> Optional[int]:
    """The size a dataset's images are resized to for `model` (its input's), or None when the
    dataset is not images: the preprocess stats say which it is."""
    return int(model.input_shape[1]) if stats["input"] == "images" else None


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
