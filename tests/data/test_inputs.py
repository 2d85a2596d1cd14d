"""tf.data input pipelines, and how a dataset's samples reach its model."""

import numpy as np
import pytest

pytestmark = pytest.mark.slow

import tensorflow as tf  # noqa: E402
from helpers import reuters_model  # noqa: E402

from pipeline.data.inputs import image_size_for, make_dataset, model_inputs, prepare_images  # noqa: E402
from pipeline.training import models  # noqa: E402


def test_shuffle_gives_a_new_order_every_epoch_and_sees_every_sample():
    x = np.arange(100, dtype=np.int32)
    ds = make_dataset(x, x, batch_size=10, shuffle=True, seed=1)
    first = np.concatenate([b[0].numpy() for b in ds])
    second = np.concatenate([b[0].numpy() for b in ds])
    assert sorted(first) == sorted(second) == list(range(100))
    assert first.tolist() != second.tolist()
    unshuffled = np.concatenate([b[0].numpy() for b in make_dataset(x, x, batch_size=30, shuffle=False)])
    assert unshuffled.tolist() == list(range(100))


def test_images_are_scaled_resized_and_expanded_in_the_pipeline():
    x = np.zeros((4, 28, 28), np.uint8)
    x[:, 0, 0] = 255
    out = prepare_images(tf.constant(x), 32).numpy()
    assert out.shape == (4, 32, 32, 3) and out.dtype == np.float32
    assert out.min() == -1.0 and out.max() <= 1.0 and out.max() > 0


def test_drop_remainder_and_sharding_by_data():
    x = np.arange(10, dtype=np.int32)
    batches = [b[0].numpy().tolist() for b in make_dataset(x, x, batch_size=4, shuffle=False, drop_remainder=True)]
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7]]
    ds = make_dataset(x, x, batch_size=4, shuffle=False)
    assert ds.options().experimental_distribute.auto_shard_policy == tf.data.experimental.AutoShardPolicy.DATA


def test_the_prepared_stats_say_whether_a_dataset_is_images():
    images = models.mobilenet_v2(img_size=32, num_classes=10, alpha=1.0, dense_units=8, batchnorm_momentum=0.9)
    sequences = reuters_model(max_len=20, vocab_size=50)
    assert image_size_for({"input": "images"}, images) == 32
    assert image_size_for({"input": "sequences"}, sequences) is None
    digits = np.full((2, 28, 28), 255, np.uint8)
    assert model_inputs(digits, 32).shape == (2, 32, 32, 3)
    words = np.ones((2, 20), np.int32)
    assert model_inputs(words, None) is words
