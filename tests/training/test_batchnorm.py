"""BatchNormalization's statistics recomputed from the training pictures, augmented as in training."""

import numpy as np
import pytest

pytestmark = pytest.mark.slow

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from pipeline.training import batchnorm  # noqa: E402


def greyscaling_model() -> keras.Model:
    inputs = keras.Input(shape=(6, 6, 3))
    h = keras.layers.RandomGrayscale(1.0, name="random_greyscale")(inputs)
    h = keras.layers.Conv2D(2, 3, use_bias=False, name="conv")(h)
    h = keras.layers.BatchNormalization(momentum=0.9, name="bn")(h)
    h = keras.layers.GlobalAveragePooling2D()(h)
    return keras.Model(inputs, keras.layers.Dense(2)(h))


def test_the_statistics_are_the_batches_means_of_the_pictures_augmented_as_in_training():
    model = greyscaling_model()
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (10, 6, 6, 3)).astype("float32")
    x[..., 0] += 2.0  # colour: the pictures in grey have other statistics
    pictures = tf.data.Dataset.from_tensor_slices((x, np.zeros(10, "int32"))).batch(4)  # 4, 4, 2
    batchnorm.recompute(model, pictures)
    grey = np.asarray(model.get_layer("random_greyscale")(x, training=True))
    assert not np.allclose(grey, x)
    conv = np.asarray(model.get_layer("conv")(grey))
    means = [conv[a:b].mean(axis=(0, 1, 2)) for a, b in ((0, 4), (4, 8), (8, 10))]
    variances = [conv[a:b].var(axis=(0, 1, 2)) for a, b in ((0, 4), (4, 8), (8, 10))]
    weights = np.array([4, 4, 2]) / 10
    bn = model.get_layer("bn")
    np.testing.assert_allclose(bn.moving_mean.numpy(), np.average(means, axis=0, weights=weights), rtol=1e-5)
    np.testing.assert_allclose(bn.moving_variance.numpy(), np.average(variances, axis=0, weights=weights), rtol=1e-4)
    assert bn.momentum == 0.9  # put back


def test_a_model_without_batchnormalization_is_left_alone():
    inputs = keras.Input(shape=(4,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    before = [w.copy() for w in model.get_weights()]
    batchnorm.recompute(model, tf.data.Dataset.from_tensor_slices((np.ones((2, 4), "float32"), [0, 1])).batch(2))
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def test_statistics_that_went_wrong_are_replaced_and_none_left_when_no_picture_comes():
    model = greyscaling_model()
    bn = model.get_layer("bn")
    bn.moving_mean.assign([np.nan, np.inf])
    x = np.random.default_rng(1).uniform(-1, 1, (4, 6, 6, 3)).astype("float32")
    batchnorm.recompute(model, tf.data.Dataset.from_tensor_slices((x, np.zeros(4, "int32"))).batch(4))
    assert np.all(np.isfinite(bn.moving_mean.numpy()))
    before = bn.moving_mean.numpy(), bn.moving_variance.numpy()
    batchnorm.recompute(model, tf.data.Dataset.from_tensor_slices((x, np.zeros(4, "int32"))).take(0).batch(4))
    np.testing.assert_array_equal(bn.moving_mean.numpy(), before[0])
    np.testing.assert_array_equal(bn.moving_variance.numpy(), before[1])


def test_the_layers_of_nested_models_are_found_in_order():
    inner_in = keras.Input(shape=(4,))
    inner = keras.Model(inner_in, keras.layers.BatchNormalization(name="inner_bn")(inner_in))
    inputs = keras.Input(shape=(4,))
    h = keras.layers.BatchNormalization(name="outer_bn")(inputs)
    model = keras.Model(inputs, keras.layers.BatchNormalization(name="last_bn")(inner(h)))
    assert [layer.name for layer in batchnorm.layers_of(model)] == ["outer_bn", "inner_bn", "last_bn"]
