"""The models, by name, and their training set-up (optimizer, loss, metrics) for both loops.

Each model ends in a Dense layer of logits (no softmax): the loss takes logits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

import keras

if TYPE_CHECKING:
    from pipeline.config.schema import AnyTrainConfig, TrainConfig
    from pipeline.data.prepared import Prepared as PreparedData


def conv1d(
    *,
    max_len: int,
    vocab_size: int,
    num_classes: int,
    embedding_dim: int,
    conv_filters: Sequence[int],
    conv_kernel_sizes: Sequence[int],
    pool_size: int,
) -> keras.Model:
    """The text model: Embedding, then per block a Conv1D (ReLU) and a MaxPool, Flatten, Dense."""
    inputs = keras.Input(shape=(max_len,), dtype="int32", name="tokens")
    h = keras.layers.Embedding(vocab_size, embedding_dim, name="embedding")(inputs)
    for i, (filters, kernel) in enumerate(zip(conv_filters, conv_kernel_sizes), start=1):
        h = keras.layers.Conv1D(filters, kernel, activation="relu", name=f"conv{i}")(h)
        h = keras.layers.MaxPooling1D(pool_size, name=f"pool{i}")(h)
    h = keras.layers.Flatten(name="flatten")(h)
    # Logits stay float32 under a mixed-precision policy, for a numerically sound loss.
    logits = keras.layers.Dense(num_classes, name="logits", dtype="float32")(h)
    return keras.Model(inputs, logits, name="conv1d")


def mobilenet_v2(
    *, img_size: int, num_classes: int, alpha: float, dense_units: int, batchnorm_momentum: float
) -> keras.Model:
    """MobileNetV2 from scratch (no top, no pretrained weights), global pooling, Dense, Dense.

    Keras builds MobileNetV2's BatchNormalization layers with momentum 0.999, made for long
    ImageNet runs: trained from scratch for a few epochs, their moving statistics lag so far
    behind the weights that inference-mode accuracy stays at chance. `batchnorm_momentum`
    replaces it.

    Its 1x1 convolutions (each block's expand and project, and the last one) are Dense layers
    on the channel axis: the same function, the same weights and initialisation, but a matrix
    product whose gradient is another one. TensorFlow's CPU kernel for a convolution's input
    gradient takes several times the forward pass; as Dense layers the model trains 1.3-1.4x
    faster on a CPU and keeps both cores busy (docs/benchmarks.md).
    """
    inputs = keras.Input(shape=(img_size, img_size, 3), name="image")
    backbone = keras.applications.MobileNetV2(
        input_shape=(img_size, img_size, 3), alpha=alpha, include_top=False, weights=None, pooling="avg"
    )
    backbone = keras.models.clone_model(backbone, clone_function=_pointwise_as_dense)
    for layer in backbone.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = batchnorm_momentum
    h = backbone(inputs)
    h = keras.layers.Dense(dense_units, activation="relu", name="dense")(h)
    logits = keras.layers.Dense(num_classes, name="logits", dtype="float32")(h)
    return keras.Model(inputs, logits, name="mobilenet_v2")


def _pointwise_as_dense(layer: keras.layers.Layer) -> keras.layers.Layer:
    """A 1x1, stride-1, undilated Conv2D as the Dense layer that computes the same; any other
    layer as a fresh copy of itself."""
    if (
        type(layer) is keras.layers.Conv2D
        and tuple(layer.kernel_size) == (1, 1)
        and tuple(layer.strides) == (1, 1)
        and tuple(layer.dilation_rate) == (1, 1)
        and layer.groups == 1
        and layer.data_format == "channels_last"
    ):
        return keras.layers.Dense(
            layer.filters,
            activation=layer.activation,
            use_bias=layer.use_bias,
            kernel_initializer=layer.kernel_initializer,
            bias_initializer=layer.bias_initializer,
            kernel_regularizer=layer.kernel_regularizer,
            name=layer.name,
            dtype=layer.dtype_policy,
        )
    return layer.__class__.from_config(layer.get_config())


def build_model(cfg: AnyTrainConfig, data: PreparedData) -> keras.Model:
    """Build the model that `cfg.model` names, sized from the prepared data's description."""
    if cfg.model == "conv1d":
        return conv1d(
            max_len=data.shape[0],
            vocab_size=data.details["vocab_size"],
            num_classes=data.num_classes,
            embedding_dim=cfg.embedding_dim,
            conv_filters=cfg.conv_filters,
            conv_kernel_sizes=cfg.conv_kernel_sizes,
            pool_size=cfg.pool_size,
        )
    if cfg.model == "mobilenet_v2":
        return mobilenet_v2(
            img_size=cfg.img_size,
            num_classes=data.num_classes,
            alpha=cfg.alpha,
            dense_units=cfg.dense_units,
            batchnorm_momentum=cfg.batchnorm_momentum,
        )
    raise ValueError(f"unknown model {cfg.model!r}")


def loss(reduction: Optional[str] = "sum_over_batch_size") -> keras.losses.Loss:
    """Sparse categorical cross-entropy on logits; `reduction=None` gives per-sample losses
    (the custom loop averages them over the global batch itself)."""
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)


def compile_model(model: keras.Model, cfg: TrainConfig) -> None:
    """Optimizer (by Keras' name), loss on logits and accuracy, for `fit` and the custom loop.

    Call it inside `strategy.scope()`. XLA and steps_per_execution apply to fit only.
    """
    fit = cfg.loop == "fit"
    model.compile(
        optimizer=keras.optimizers.get({"class_name": cfg.optimizer, "config": {"learning_rate": cfg.learning_rate}}),
        loss=loss(),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=bool(cfg.jit_compile) if fit else False,
        steps_per_execution=cfg.steps_per_execution if fit else 1,
    )
    # The optimizer's slots are built here, inside the scope: created lazily in the first
    # step they fail under a strategy when that step runs in a loop (steps_per_execution > 1,
    # or the custom loop): "You must feed a value for placeholder tensor" (keras#23085).
    model.optimizer.build(model.trainable_variables)
