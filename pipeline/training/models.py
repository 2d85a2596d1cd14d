"""The models, by name, and their training set-up (optimizer, loss, metrics) for both loops.

Each model ends in a Dense layer of logits (no softmax): the loss takes logits."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import keras
import numpy as np

from pipeline.config.keys.model_table import MODELS
from pipeline.errors import ConfigError
from pipeline.training import subwords

if TYPE_CHECKING:
    from pipeline.config.keys.model_table import (
        Conv1DSettings,
        MlpSettings,
        MobileNetV2Settings,
        SmallConvnetSettings,
        TableMlpSettings,
    )
    from pipeline.config.keys.training import AnyTrainConfig, TrainConfig
    from pipeline.data.prepared import Prepared
    from pipeline.kinds.image_folders import ImageFoldersFacts
    from pipeline.kinds.labelled_texts import LabelledTextsFacts
    from pipeline.kinds.tables import TableFacts


def build_model(cfg: AnyTrainConfig, prepared: Prepared, pretrained: Optional[Path] = None) -> keras.Model:
    """The model `cfg.model` names (its kind's table, pipeline/config/keys/model_table.py), built from its
    settings and sized from the prepared data's description; `pretrained`: the folder of the
    weights files the download stage fetched (download.<ds>.pretrained), for a model that starts
    from them."""
    table = MODELS[prepared.kind.models]
    module, _, function = table[cfg.model].builder.partition(":")
    builder = getattr(importlib.import_module(module), function)
    return builder(cfg.settings, prepared, pretrained)


def _logits(h, num_classes: int, l2: float = 0.0):
    # Logits stay float32 under a mixed-precision policy, for a numerically sound loss.
    return keras.layers.Dense(num_classes, name="logits", dtype="float32", kernel_regularizer=_l2(l2))(h)


def _l2(l2: float):
    return keras.regularizers.L2(l2) if l2 else None


def conv1d(
    settings: Conv1DSettings, prepared: Prepared[LabelledTextsFacts], pretrained: Optional[Path] = None
) -> keras.Model:
    """The text model: Embedding, then per block a Conv1D (ReLU) and a MaxPool, Flatten, Dense."""
    inputs = keras.Input(shape=(prepared.shape[0],), dtype="int32", name="tokens")
    h = keras.layers.Embedding(prepared.facts.vocab_size, settings.embedding_dim, name="embedding")(inputs)
    for i, (filters, kernel) in enumerate(zip(settings.conv_filters, settings.conv_kernel_sizes), start=1):
        h = keras.layers.Conv1D(filters, kernel, activation="relu", name=f"conv{i}")(h)
        h = keras.layers.MaxPooling1D(settings.pool_size, name=f"pool{i}")(h)
    h = keras.layers.Flatten(name="flatten")(h)
    return keras.Model(inputs, _logits(h, prepared.num_classes), name="conv1d")


def mlp(
    settings: MlpSettings, prepared: Prepared[LabelledTextsFacts], pretrained: Optional[Path] = None
) -> keras.Model:
    """A bag of words and Dense layers. The bag is Keras' IntegerLookup over the word index's
    first num_words indices (the padding 0 dropped, a rarer word counted as one
    out-of-vocabulary word) and, with ngrams 2, over the most frequent pairs of adjacent words of
    the training split (`_pair_vocabulary`): present or not, counts, or counts weighted by the
    inverse document frequency of the training split (`subwords.tf_idf`; the marks below the
    words, a text's start and a word out of the vocabulary, weigh 0 there); with sublinear_tf,
    each count c as 1 + ln(c); with char_ngrams, beside it the TF-IDF of the words' character
    n-grams (pipeline/training/subwords.py) times char_ngrams_weight. The Dense layers' kernels
    take the L2 penalty `l2`."""
    vocab_size = prepared.facts.vocab_size
    top = vocab_size if settings.num_words is None else min(settings.num_words, vocab_size)
    pairs, first = np.zeros(0, dtype=np.int64), 0
    if settings.ngrams == 2:
        first = prepared.facts.encoding.index_from  # below it: the padding and the marks
        pairs = _pair_vocabulary(prepared, first, top, settings.num_pairs)
    inputs = keras.Input(shape=(prepared.shape[0],), dtype="int32", name="tokens")
    tokens = _with_pairs(inputs, first, top) if settings.ngrams == 2 else inputs
    counted = settings.output_mode == "tf_idf" or (settings.sublinear_tf and settings.output_mode == "count")
    h = keras.layers.IntegerLookup(
        vocabulary=np.concatenate((np.arange(1, top, dtype=np.int64), pairs)),
        mask_token=0,
        num_oov_indices=1,
        output_mode="count" if counted else settings.output_mode,
        name="bag_of_words",
    )(tokens)  # [batch, 1 + terms]: the out-of-vocabulary count first
    if settings.output_mode == "tf_idf":
        idf = _idf(prepared, first, top, pairs)
        idf[: prepared.facts.encoding.index_from] = 0.0  # the marks (ids 1 ..): no words, weighed 0
        h = subwords.tf_idf(h, idf, settings.sublinear_tf, "words")
    elif counted:
        h = subwords.sublinear(h, "words")
    if settings.char_ngrams:
        shortest, longest = settings.char_ngrams
        grams = subwords.bag(inputs, prepared, top, shortest, longest, settings.sublinear_tf)
        grams = keras.layers.Rescaling(settings.char_ngrams_weight, name="char_ngrams_weight")(grams)
        h = keras.layers.Concatenate(name="words_and_ngrams")([h, grams])
        if settings.output_mode == "tf_idf":  # two unit vectors made one, as one vectorizer's of both
            h = keras.layers.UnitNormalization(name="unit_length")(h)
    for i, units in enumerate(settings.units, start=1):
        h = keras.layers.Dense(units, activation="relu", kernel_regularizer=_l2(settings.l2), name=f"dense{i}")(h)
        if settings.dropout:
            h = keras.layers.Dropout(settings.dropout, name=f"dropout{i}")(h)
    return keras.Model(inputs, _logits(h, prepared.num_classes, settings.l2), name="mlp")


def pair_keys(x, first_word: int, top: int):
    """The key of each pair of adjacent words of sequences `x` ([n, length], NumPy or a tensor):
    top + first * top + second, past every word's id, where both are words of the bag (ids from
    `first_word`, past the padding and the marks, and below `top`); 0 (the mask) elsewhere."""
    xp = np if isinstance(x, np.ndarray) else keras.ops
    x = xp.cast(x, "int64") if xp is keras.ops else x.astype(np.int64)
    one, two = x[:, :-1], x[:, 1:]
    words = xp.logical_and(xp.logical_and(one >= first_word, one < top), xp.logical_and(two >= first_word, two < top))
    return xp.where(words, top + one * top + two, 0)


def _with_pairs(tokens, first_word: int, top: int):
    """The sequences' word ids followed by their pairs' keys (`pair_keys`), for one lookup."""
    return keras.ops.concatenate([keras.ops.cast(tokens, "int64"), pair_keys(tokens, first_word, top)], axis=1)


# pairs counted at once while the training split streams by: past this, the pairs seen once so
# far are let go, so that the count's memory stays bounded whatever the split's size
PAIRS_HELD = 1_000_000


def _pair_vocabulary(prepared: Prepared, first_word: int, top: int, most: Optional[int]) -> np.ndarray:
    """The keys (`pair_keys`) of the `most` (None: all) most frequent pairs of adjacent words of
    the training split that it holds twice or more, by falling count (ties by key), streamed
    (`PAIRS_HELD`)."""
    counts: dict[int, int] = {}
    for x, _ in prepared.chunks("train"):
        keys, found = np.unique(pair_keys(x, first_word, top), return_counts=True)
        for key, n in zip(keys.tolist(), found.tolist()):
            if key:
                counts[key] = counts.get(key, 0) + n
        if len(counts) > PAIRS_HELD:
            counts = {key: n for key, n in counts.items() if n >= 2}
    kept = sorted((key for key, n in counts.items() if n >= 2), key=lambda k: (-counts[k], k))[:most]
    return np.array(kept, dtype=np.int64)


def _idf(prepared: Prepared, first_word: int, top: int, pairs: np.ndarray) -> np.ndarray:
    """The inverse document frequency of the words 1 .. top-1, then of the pairs `pairs` (their
    keys, `pair_keys`), in the training split, streamed."""
    order = np.argsort(pairs)
    known = pairs[order]
    df = np.zeros(top + len(pairs), dtype=np.int64)
    n = 0
    for x, _ in prepared.chunks("train"):
        present = np.zeros((len(x), top + len(pairs)), dtype=bool)
        rows = np.repeat(np.arange(len(x)), x.shape[1])
        words = x.reshape(-1)
        keep = (words > 0) & (words < top)
        present[rows[keep], words[keep]] = True
        if len(pairs):
            keys = pair_keys(x, first_word, top).reshape(-1)
            at = np.minimum(np.searchsorted(known, keys), len(known) - 1)
            hit = (keys > 0) & (known[at] == keys)
            present[np.repeat(np.arange(len(x)), x.shape[1] - 1)[hit], top + order[at[hit]]] = True
        df += present.sum(axis=0)
        n += len(x)
    return subwords.smoothed_idf(n, df[1:])


def table_mlp(
    settings: TableMlpSettings, prepared: Prepared[TableFacts], pretrained: Optional[Path] = None
) -> keras.Model:
    """A table's columns (one float32 vector per row, pipeline/data/tabular.py) encoded by Keras'
    FeatureSpace, adapted to the training split as it streams by: each number normalised by the
    split's mean and variance, each category one-hot over the ids the split holds (the missing and
    unseen ones included); then Dense layers of `units` (ReLU) with dropout, and the logits; with
    `linear`, plus a Dense layer of the classes on the encoded columns themselves, whose logits are
    added to the hidden layers' (wide and deep: the linear model a logistic regression is, and what
    the hidden layers learn beside it)."""
    import tensorflow as tf  # the adapting dataset's

    FeatureSpace = keras.utils.FeatureSpace
    columns = prepared.facts.columns
    keys = [f"column_{i}" for i in range(len(columns))]  # the user's names may be no layer names
    features = {
        key: FeatureSpace.float_normalized()
        if column.type == "numeric"
        else FeatureSpace.integer_categorical(max_tokens=None, num_oov_indices=1, output_mode="one_hot")
        for key, column in zip(keys, columns)
    }
    space = FeatureSpace(features, output_mode="concat")
    signature = {
        key: tf.TensorSpec((None, 1), tf.float32 if column.type == "numeric" else tf.int64)
        for key, column in zip(keys, columns)
    }

    def training_split():
        for x, _ in prepared.chunks("train"):
            yield {
                key: x[:, i : i + 1] if column.type == "numeric" else x[:, i : i + 1].astype(np.int64)
                for i, (key, column) in enumerate(zip(keys, columns))
            }

    space.adapt(tf.data.Dataset.from_generator(training_split, output_signature=signature))
    # the encoder takes a list (its dict of inputs, Keras' tracked dict, warns on every call)
    encoder = keras.Model([space.get_inputs()[key] for key in keys], space.get_encoded_features(), name="feature_space")
    inputs = keras.Input(shape=(len(columns),), name="columns")
    parts = [
        inputs[:, i : i + 1] if column.type == "numeric" else keras.ops.cast(inputs[:, i : i + 1], "int64")
        for i, column in enumerate(columns)
    ]
    h = encoded = encoder(parts)
    for i, units in enumerate(settings.units, start=1):
        h = keras.layers.Dense(units, activation="relu", name=f"dense{i}")(h)
        if settings.dropout:
            h = keras.layers.Dropout(settings.dropout, name=f"dropout{i}")(h)
    if not (settings.linear and settings.units):  # no hidden layer: the model is linear already
        return keras.Model(inputs, _logits(h, prepared.num_classes), name="table_mlp")
    # both halves' logits float32, as `_logits`'s, under a mixed-precision policy
    wide = keras.layers.Dense(prepared.num_classes, name="linear_logits", dtype="float32")(encoded)
    deep = keras.layers.Dense(prepared.num_classes, name="hidden_logits", dtype="float32")(h)
    logits = keras.layers.Add(name="logits", dtype="float32")([wide, deep])
    return keras.Model(inputs, logits, name="table_mlp")


def small_convnet(
    settings: SmallConvnetSettings, prepared: Prepared[ImageFoldersFacts], pretrained: Optional[Path] = None
) -> keras.Model:
    """For pictures of 8 to 128 pixels a side, grey or colour, learnt from scratch: the
    augmentation of `augmentation` (training only), then per block two 3x3 convolutions
    (batch-normalised, ReLU) and a 2x2 max pooling while the picture is larger than 4 pixels a
    side; global average pooling (a head of the last block's filters, whatever the picture's
    size), dropout, Dense dense_units, dropout, the logits. The pictures are taken at their
    prepared size, scaled to [-1, 1] by the input pipeline."""
    side = prepared.shape[0]
    inputs = keras.Input(shape=(side, side, 3), name="image")
    colour = len(prepared.shape) == 3
    greyscale = settings.greyscale if colour else 0.0
    h = augmentation(inputs, settings.shift, settings.zoom, settings.flip, greyscale, settings.erasing)
    for i, filters in enumerate(settings.filters, start=1):
        for j in (1, 2):
            h = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False, name=f"conv{i}_{j}")(h)
            h = keras.layers.BatchNormalization(momentum=settings.batchnorm_momentum, name=f"bn{i}_{j}")(h)
            h = keras.layers.ReLU(name=f"relu{i}_{j}")(h)
        if side > 4:
            h = keras.layers.MaxPooling2D(2, name=f"pool{i}")(h)
            side //= 2
    h = keras.layers.GlobalAveragePooling2D(name="pooled")(h)
    if settings.dropout:
        h = keras.layers.Dropout(settings.dropout, name="dropout1")(h)
    h = keras.layers.Dense(settings.dense_units, activation="relu", name="dense")(h)
    if settings.dropout:
        h = keras.layers.Dropout(settings.dropout, name="dropout2")(h)
    return keras.Model(inputs, _logits(h, prepared.num_classes), name="small_convnet")


def augmentation(h, shift: float, zoom: float, flip: str, greyscale: float = 0.0, erasing: float = 0.0):
    """Keras' random layers, which change a picture only while training (evaluation and the
    served model see it as it is): a shift by up to `shift` of the side, a zoom in or out by up
    to `zoom`, a mirror image by `flip` ("none", "horizontal", "vertical", "both"), a colour
    picture shown in grey with probability `greyscale`, a rectangle of noise over the picture
    with probability `erasing`. The edges a shift or zoom uncovers repeat the nearest pixel (a
    picture's ground, as a rule); the pictures come scaled to [-1, 1], and so does the noise."""
    if flip != "none":
        mode = "horizontal_and_vertical" if flip == "both" else flip
        h = keras.layers.RandomFlip(mode, name="random_flip")(h)
    if shift:
        h = keras.layers.RandomTranslation(shift, shift, fill_mode="nearest", name="random_shift")(h)
    if zoom:
        h = keras.layers.RandomZoom(zoom, zoom, fill_mode="nearest", name="random_zoom")(h)
    if greyscale:
        h = keras.layers.RandomGrayscale(greyscale, name="random_greyscale")(h)
    if erasing:  # a (p, p) factor: RandomErasing draws each picture's probability from the range
        h = keras.layers.RandomErasing(factor=(erasing, erasing), value_range=(-1.0, 1.0), name="random_erasing")(h)
    return h


def mobilenet_v2(
    settings: MobileNetV2Settings, prepared: Prepared[ImageFoldersFacts], pretrained: Optional[Path] = None
) -> keras.Model:
    """MobileNetV2 (no top), from scratch or from ImageNet weights, global pooling, Dense, Dense.

    Keras builds MobileNetV2's BatchNormalization layers with momentum 0.999, made for long
    ImageNet runs: trained from scratch for a few epochs, their moving statistics lag so far
    behind the weights that inference-mode accuracy stays at chance. `batchnorm_momentum`
    replaces it.

    Its 1x1 convolutions (each block's expand and project, and the last one) are Dense layers
    on the channel axis: the same function, the same weights and initialisation, but a matrix
    product whose gradient is another one. TensorFlow's CPU kernel for a convolution's input
    gradient takes several times the forward pass; as Dense layers the model trains 1.3-1.4x
    faster on a CPU and keeps both cores busy (docs/benchmarks.md). ImageNet weights are loaded
    into the convolutions, then carried over to the Dense layers.
    """
    size = settings.img_size
    inputs = keras.Input(shape=(size, size, 3), name="image")
    backbone = keras.applications.MobileNetV2(
        input_shape=(size, size, 3), alpha=settings.alpha, include_top=False, weights=None, pooling="avg"
    )
    converted = keras.models.clone_model(backbone, clone_function=_pointwise_as_dense)
    if settings.weights == "imagenet":  # from scratch, the clone keeps its own initialisation
        _load_weights(backbone, pretrained_file(pretrained, settings.alpha))
        for source, layer in zip(backbone.layers, converted.layers):
            layer.set_weights([w.reshape(v.shape) for w, v in zip(source.get_weights(), layer.get_weights())])
    for layer in converted.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = settings.batchnorm_momentum
    h = converted(inputs)
    h = keras.layers.Dense(settings.dense_units, activation="relu", name="dense")(h)
    return keras.Model(inputs, _logits(h, prepared.num_classes), name="mobilenet_v2")


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


def pretrained_file(folder: Optional[Path], alpha: float) -> Path:
    """The weights file of MobileNetV2 of width `alpha` in the download stage's folder of
    pretrained weights: the one .h5 file there, or the one Keras names for this alpha."""
    files = sorted(Path(folder).glob("*.h5")) if folder is not None and Path(folder).is_dir() else []
    if len(files) > 1:
        files = [f for f in files if f"_{alpha:g}_" in f.name or f"_{alpha}_" in f.name]
    if len(files) != 1:
        where = folder if folder is not None else "the train stage's --pretrained folder"
        raise ConfigError(
            f"{where}: expected the .h5 file of MobileNetV2's ImageNet weights for alpha {alpha:g} "
            f"(download.<ds>.pretrained, fetched by the download stage), found {len(files)}"
        )
    return files[0]


def _load_weights(backbone: keras.Model, path: Path) -> None:
    try:
        backbone.load_weights(str(path))
    except (ValueError, OSError) as exc:
        raise ConfigError(
            f"{path}: not the weights of this MobileNetV2 (alpha and the file's must agree; Keras names its "
            f"files ..._<alpha>_<size>_no_top.h5): {exc}"
        ) from None


class SquaredHinge(keras.losses.Loss):
    """Each class against the rest, as a linear SVM's squared hinge (liblinear's default, that of
    scikit-learn's LinearSVC): per sample, over the classes, the square of how far each logit
    falls short of +1 (the sample's class) or of -1 (the others), summed. Sparse labels, as
    SparseCategoricalCrossentropy's."""

    def call(self, y_true, y_pred):
        labels = keras.ops.cast(keras.ops.reshape(y_true, (-1,)), "int32")
        sign = 2.0 * keras.ops.one_hot(labels, y_pred.shape[-1], dtype=y_pred.dtype) - 1.0
        return keras.ops.sum(keras.ops.square(keras.ops.relu(1.0 - sign * y_pred)), axis=-1)


def loss(name: str = "cross_entropy", reduction: Optional[str] = "sum_over_batch_size") -> keras.losses.Loss:
    """The loss `train.<ds>.loss` names, on logits: cross_entropy (sparse categorical) or
    squared_hinge (`SquaredHinge`); `reduction=None` gives per-sample losses (the custom loop
    averages them over the global batch itself)."""
    if name == "squared_hinge":
        return SquaredHinge(reduction=reduction, name="squared_hinge")
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)


def optimizer(cfg: TrainConfig) -> keras.optimizers.Optimizer:
    """The optimizer `cfg.optimizer` names, at `cfg.learning_rate`, with its decoupled weight
    decay (`cfg.weight_decay`, none at 0) on the weight matrices only: a bias or a batch
    normalisation's scale and offset is not a weight the decay should pull to zero."""
    config: dict[str, Any] = {"learning_rate": cfg.learning_rate}
    if cfg.weight_decay:
        config["weight_decay"] = cfg.weight_decay
    built = keras.optimizers.get({"class_name": cfg.optimizer, "config": config})
    if cfg.weight_decay:
        built.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    return built


def compile_model(model: keras.Model, cfg: TrainConfig) -> None:
    """Optimizer (by Keras' name), loss on logits (`loss`) and accuracy, for `fit` and the custom loop.

    Call it inside `strategy.scope()`. XLA and steps_per_execution apply to fit only.
    """
    fit = cfg.loop == "fit"
    model.compile(
        optimizer=optimizer(cfg),
        loss=loss(cfg.loss),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=bool(cfg.jit_compile) if fit else False,
        steps_per_execution=cfg.steps_per_execution if fit else 1,
    )
    # The optimizer's slots are built here, inside the scope: created lazily in the first
    # step they fail under a strategy when that step runs in a loop (steps_per_execution > 1,
    # or the custom loop): "You must feed a value for placeholder tensor" (keras#23085).
    model.optimizer.build(model.trainable_variables)
