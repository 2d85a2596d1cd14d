"""The models of each kind, the shared loss and the optimizer set-up of both training loops."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from support.configs import with_settings
from support.models import described, mlp_settings, mobilenet_weights, reuters_model
from support.project import ROOT

from pipeline.config.keys.model_table import MobileNetV2Settings, SmallConvnetSettings
from pipeline.config.keys.training import TRAIN_CONFIGS
from pipeline.config.loading.loader import load_params
from pipeline.data.prepared import Prepared
from pipeline.errors import ConfigError
from pipeline.kinds.image_folders import ImageFoldersFacts
from pipeline.kinds.labelled_texts import INDEX_FROM, full_length_facts

pytestmark = pytest.mark.slow


def pictures(classes: int, side: int = 28, colour: bool = True) -> Prepared:
    shape = (side, side, 3) if colour else (side, side)
    facts = ImageFoldersFacts(side, "rgb" if colour else "grey", "folders", images_sha256=None)
    return Prepared(Path(), "images", shape, [str(d) for d in range(classes)], {}, facts)


from pipeline.training import models  # noqa: E402


def test_reuters_model_is_built_from_the_params_with_the_reference_layers():
    cfg = load_params(ROOT / "params.yaml", "reuters").train
    model = models.build_model(cfg, described(300, 1000))
    kinds = [
        (type(layer).__name__, getattr(layer, "filters", None), getattr(layer, "kernel_size", None))
        for layer in model.layers[1:]
    ]
    assert kinds == [
        ("Embedding", None, None),
        ("Conv1D", 64, (5,)),
        ("MaxPooling1D", None, None),
        ("Conv1D", 32, (3,)),
        ("MaxPooling1D", None, None),
        ("Flatten", None, None),
        ("Dense", None, None),
    ]
    assert model.get_layer("embedding").output_dim == 7
    assert model.output_shape == (None, 46)
    # logits: the last layer has no softmax
    assert model.get_layer("logits").activation.__name__ == "linear"


def test_the_reuters_layers_follow_their_params():
    reuters_cfg = load_params(ROOT / "params.yaml", "reuters").train
    assert isinstance(reuters_cfg, TRAIN_CONFIGS["labelled_texts"])
    cfg = with_settings(reuters_cfg, conv_filters=(16, 8, 4), conv_kernel_sizes=(3, 3, 2), pool_size=3)
    model = models.build_model(cfg, described(100, 50))
    convs = [(layer.filters, layer.kernel_size) for layer in model.layers if type(layer).__name__ == "Conv1D"]
    pools = [layer.pool_size for layer in model.layers if type(layer).__name__ == "MaxPooling1D"]
    assert (convs, pools) == ([(16, (3,)), (8, (3,)), (4, (2,))], [(3,), (3,), (3,)])


def test_mobilenet_model_has_no_top_and_logits():
    model = models.mobilenet_v2(MobileNetV2Settings(32, 1.0, 512, 0.9, None), pictures(10))
    assert model.input_shape == (None, 32, 32, 3)
    assert model.output_shape == (None, 10)
    backbone = model.layers[1]
    assert backbone.name.startswith("mobilenetv2") and backbone.output_shape == (None, 1280)
    assert model.get_layer("dense").units == 512
    assert model.get_layer("logits").activation.__name__ == "linear"
    norms = [layer for layer in backbone.layers if isinstance(layer, models.keras.layers.BatchNormalization)]
    assert norms and {layer.momentum for layer in norms} == {0.9}


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_mobilenet_pointwise_dense_layers_compute_what_keras_mobilenet_computes(alpha):
    keras = models.keras
    reference = keras.applications.MobileNetV2(
        input_shape=(32, 32, 3), alpha=alpha, include_top=False, weights=None, pooling="avg"
    )
    backbone = models.mobilenet_v2(MobileNetV2Settings(32, alpha, 8, 0.9, None), pictures(10)).layers[1]
    assert backbone.count_params() == reference.count_params()
    dense = {layer.name for layer in backbone.layers if type(layer) is keras.layers.Dense}
    pointwise = {
        layer.name for layer in reference.layers if type(layer) is keras.layers.Conv2D and layer.kernel_size == (1, 1)
    }
    assert dense == pointwise and len(dense) == 34  # 17 projects, 16 expands, Conv_1
    assert [type(layer).__name__ for layer in backbone.layers if type(layer) is keras.layers.Conv2D] == ["Conv2D"]
    rng = np.random.default_rng(0)
    for layer in (layer for layer in reference.layers if layer.weights):
        ours = backbone.get_layer(layer.name)
        weights = [rng.normal(0, 0.3, w.shape).astype("float32") for w in layer.get_weights()]
        if isinstance(layer, keras.layers.BatchNormalization):
            weights[3] = np.abs(weights[3]) + 0.5  # a variance
        layer.set_weights(weights)
        ours.set_weights([w.reshape(v.shape) for w, v in zip(weights, ours.get_weights())])
    images = rng.uniform(-1, 1, (4, 32, 32, 3)).astype("float32")
    np.testing.assert_allclose(
        backbone(images, training=False), reference(images, training=False), rtol=1e-4, atol=1e-4
    )


def test_the_mnist_model_follows_its_width_multiplier():
    cfg = load_params(ROOT / "params.yaml", "mnist").train
    assert isinstance(cfg, TRAIN_CONFIGS["image_folders"])
    stats = pictures(10, colour=False)
    widths = {}
    for alpha in (1.0, 0.5):
        model = models.build_model(with_settings(cfg, alpha=alpha, dense_units=16), stats)
        backbone = model.layers[1]
        widths[alpha] = (
            backbone.get_layer("Conv1").filters,
            backbone.get_layer("block_16_project").units,
            backbone.output_shape[-1],
        )
    # Keras rounds each width to a multiple of 8 and keeps the last layer's 1280 for alpha <= 1.
    assert widths == {1.0: (32, 320, 1280), 0.5: (16, 160, 1280)}


def test_imagenet_weights_are_loaded_into_the_backbone_and_carried_over_to_its_dense_layers(tmp_path):
    keras = models.keras
    folder = tmp_path / "pretrained"
    folder.mkdir()
    path = mobilenet_weights(folder / "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_0.35_96_no_top.h5", 0.35)
    reference = keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, include_top=False, weights=None)
    reference.load_weights(str(path))
    model = models.mobilenet_v2(MobileNetV2Settings(32, 0.35, 8, 0.9, "imagenet"), pictures(3), folder)
    backbone = model.layers[1]
    for name in ("Conv1", "block_3_expand", "block_16_project", "Conv_1_bn"):
        for ours, theirs in zip(backbone.get_layer(name).get_weights(), reference.get_layer(name).get_weights()):
            np.testing.assert_array_equal(ours, theirs.reshape(ours.shape))
    # from scratch, the same layers start elsewhere
    scratch = models.mobilenet_v2(MobileNetV2Settings(32, 0.35, 8, 0.9, None), pictures(3), folder).layers[1]
    first = reference.get_layer("Conv1").get_weights()[0]
    assert not np.array_equal(scratch.get_layer("Conv1").get_weights()[0], first)


def test_weights_of_another_width_or_no_weights_file_is_one_line(tmp_path):
    folder = tmp_path / "pretrained"
    folder.mkdir()
    with pytest.raises(ConfigError, match=r"expected the \.h5 file of MobileNetV2's ImageNet weights for alpha 0.5"):
        models.mobilenet_v2(MobileNetV2Settings(32, 0.5, 8, 0.9, "imagenet"), pictures(3), folder)
    mobilenet_weights(folder / "weights_0.35_96_no_top.h5", 0.35)
    with pytest.raises(ConfigError, match=r"weights_0.35_96_no_top.h5: not the weights of this MobileNetV2") as info:
        models.mobilenet_v2(MobileNetV2Settings(32, 0.5, 8, 0.9, "imagenet"), pictures(3), folder)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("features", ["multi_hot", "count", "tf_idf"])
def test_the_bag_of_words_counts_the_first_num_words_and_drops_the_padding(tmp_path, features):
    from pipeline.data import prepared

    x = np.array([[0, 0, 1, 5, 5, 9], [0, 1, 3, 3, 4, 12]], dtype=np.int32)
    y = np.array([0, 1])
    splits = {"train": (x, y), "val": (x, y), "test": (x, y)}
    data = prepared.write_arrays(
        tmp_path / "p", splits, input_="sequences", class_names=["a", "b"], facts=full_length_facts(6, 13)
    )
    model = models.mlp(mlp_settings(num_words=8, output_mode=features), data)
    weighed = "words_idf" if features == "tf_idf" else "bag_of_words"
    out = np.asarray(models.keras.Model(model.input, model.get_layer(weighed).output)(x))
    # IntegerLookup's columns: the out-of-vocabulary bucket (9 and 12 here), then the words 1..7;
    # the padding 0 is its mask, counted nowhere
    counts = np.array([[1, 1, 0, 0, 0, 2, 0, 0], [1, 1, 0, 2, 1, 0, 0, 0]], dtype="float32")
    if features == "multi_hot":
        np.testing.assert_array_equal(out, (counts > 0).astype("float32"))
    elif features == "count":
        np.testing.assert_array_equal(out, counts)
    else:  # the words' inverse document frequency in the training split: ln(3 / (1 + df)) + 1
        df = np.array([2, 0, 1, 1, 1, 0, 0])  # the words 1..7
        idf = np.log(3 / (1 + df)) + 1
        idf[:INDEX_FROM] = 0  # the marks (ids 1 to 3, below the words): no words, weighed 0
        np.testing.assert_allclose(out[:, 1:], counts[:, 1:] * idf, rtol=1e-6)
        # a word past num_words weighs 0, as a term outside scikit-learn's vocabulary
        np.testing.assert_array_equal(out[:, 0], [0, 0])


def _two_texts(tmp_path):
    from pipeline.data import prepared

    # the start mark 1, then words from 4 (0 padding, 2 out-of-vocabulary, 3 unused)
    x = np.array([[0, 0, 1, 5, 5, 5], [0, 1, 4, 4, 6, 12]], dtype=np.int32)
    y = np.array([0, 1])
    splits = {"train": (x, y), "val": (x, y), "test": (x, y)}
    facts = full_length_facts(6, 13)
    return x, prepared.write_arrays(tmp_path / "p", splits, input_="sequences", class_names=["a", "b"], facts=facts)


@pytest.mark.parametrize("features", ["count", "tf_idf"])
def test_sublinear_tf_weighs_a_word_said_c_times_as_one_plus_ln_c(tmp_path, features):
    x, data = _two_texts(tmp_path)
    plain_layer, scaled_layer = (
        ("words_idf", "words_idf") if features == "tf_idf" else ("bag_of_words", "words_sublinear_tf")
    )
    plain, scaled = (
        np.asarray(models.keras.Model(m.input, m.get_layer(layer).output)(x))
        for m, layer in (
            (models.mlp(mlp_settings(output_mode=features), data), plain_layer),
            (models.mlp(mlp_settings(output_mode=features, sublinear_tf=True), data), scaled_layer),
        )
    )
    # the word 5 three times in the first text, 4 twice in the second, each in one text of two
    idf = np.log(3 / 2) + 1 if features == "tf_idf" else 1.0
    np.testing.assert_allclose(plain[[0, 1], [5, 4]], [3 * idf, 2 * idf], rtol=1e-6)
    np.testing.assert_allclose(scaled[[0, 1], [5, 4]], [(1 + np.log(3)) * idf, (1 + np.log(2)) * idf], rtol=1e-6)
    np.testing.assert_allclose(scaled[:, 6], plain[:, 6], rtol=1e-6)  # once: 1 + ln 1 = 1
    # the start mark: counted, or, as no word, weighed 0 by TF-IDF
    np.testing.assert_array_equal(scaled[:, 1], [0, 0] if features == "tf_idf" else [1, 1])
    assert np.count_nonzero(scaled) == np.count_nonzero(plain)  # 0 stays 0


def test_l2_penalises_the_kernel_of_every_dense_layer(tmp_path):
    x, data = _two_texts(tmp_path)
    model = models.mlp(mlp_settings(units=(4,), l2=0.01), data)
    kernels = [model.get_layer(name).kernel for name in ("dense1", "logits")]
    expected = sum(0.01 * float(np.sum(np.square(np.asarray(k)))) for k in kernels)
    np.testing.assert_allclose(float(sum(np.asarray(v) for v in model.losses)), expected, rtol=1e-5)
    assert not models.mlp(mlp_settings(units=(4,)), data).losses


def test_squared_hinge_sums_each_class_against_the_rest():
    logits = np.array([[2.0, -0.5, 0.3], [0.0, 0.0, 0.0]], dtype="float32")
    per_sample = np.asarray(models.loss("squared_hinge", reduction=None)(np.array([0, 2]), logits))
    # the first: its class past +1 (0), class 1 short of -1 by 0.5, class 2 by 1.3; the second: 1 each
    np.testing.assert_allclose(per_sample, [0.5**2 + 1.3**2, 3.0], rtol=1e-6)
    mean = float(models.loss("squared_hinge")(np.array([[0], [2]]), logits))  # labels as a column, as fit's
    np.testing.assert_allclose(mean, per_sample.mean(), rtol=1e-6)


def test_small_convnet_takes_the_pictures_at_their_prepared_size():
    model = models.small_convnet(
        SmallConvnetSettings((8, 16), 32, 0.2, 0.9, 0.0, 0.0, "none", 0.0, 0.0, 0), pictures(4, side=12)
    )
    assert model.input_shape == (None, 12, 12, 3) and model.output_shape == (None, 4)
    pools = [layer.name for layer in model.layers if isinstance(layer, models.keras.layers.MaxPooling2D)]
    assert pools == ["pool1", "pool2"]  # 12 -> 6 -> 3: both blocks pool while the side is above 4
    assert model.get_layer("logits").activation.__name__ == "linear"


def test_small_convnet_has_the_same_weights_at_any_side_from_8_to_128():
    """Global pooling: the head is the last block's filters whatever the picture's side, so a
    larger picture adds no weight for the dense layer to learn."""
    settings = SmallConvnetSettings((8, 16, 32), 32, 0.2, 0.9, 0.1, 0.1, "horizontal", 0.5, 0.0, 0)
    counts = {side: models.small_convnet(settings, pictures(3, side=side)).count_params() for side in (8, 16, 64, 128)}
    assert len(set(counts.values())) == 1, counts


@pytest.mark.parametrize("flip", ["none", "horizontal", "both"])
def test_the_augmentation_changes_pictures_while_training_only(flip):
    settings = SmallConvnetSettings((4,), 8, 0.0, 0.9, 0.2, 0.2, flip, 0.5, 0.5, 0)
    model = models.small_convnet(settings, pictures(2, side=16))
    augmented = [layer.name for layer in model.layers if layer.name.startswith("random_")]
    assert augmented == [
        *(["random_flip"] if flip != "none" else []),
        "random_shift",
        "random_zoom",
        "random_greyscale",
        "random_erasing",
    ]
    head = models.keras.Model(model.input, model.get_layer(augmented[-1]).output)
    x = np.random.default_rng(0).uniform(-1, 1, (4, 16, 16, 3)).astype("float32")
    np.testing.assert_array_equal(np.asarray(head(x, training=False)), x)
    assert not np.allclose(np.asarray(head(x, training=True)), x)


def test_no_augmentation_adds_no_layer():
    model = models.small_convnet(
        SmallConvnetSettings((4,), 8, 0.0, 0.9, 0.0, 0.0, "none", 0.0, 0.0, 0), pictures(2, side=16)
    )
    assert not [layer.name for layer in model.layers if layer.name.startswith("random_")]


def test_grey_pictures_get_no_greyscale_layer():
    settings = SmallConvnetSettings((4,), 8, 0.0, 0.9, 0.0, 0.0, "none", 0.5, 0.0, 0)
    model = models.small_convnet(settings, pictures(2, side=16, colour=False))
    assert not [layer.name for layer in model.layers if layer.name.startswith("random_")]


def test_greyscale_shows_a_share_of_the_colour_pictures_in_grey_while_training():
    settings = SmallConvnetSettings((4,), 8, 0.0, 0.9, 0.0, 0.0, "none", 0.5, 0.0, 0)
    model = models.small_convnet(settings, pictures(2, side=8))
    head = models.keras.Model(model.input, model.get_layer("random_greyscale").output)
    x = np.random.default_rng(0).uniform(-1, 1, (64, 8, 8, 3)).astype("float32")
    np.testing.assert_array_equal(np.asarray(head(x, training=False)), x)
    out = np.asarray(head(x, training=True))
    grey = np.all(np.isclose(out[..., :1], out), axis=(1, 2, 3))  # the three channels equal
    kept = np.all(out == x, axis=(1, 2, 3))
    assert np.all(grey | kept)
    assert 10 < grey.sum() < 54, grey.sum()  # about half of 64 (binomial: outside [11, 53] ~1e-7)


def test_erasing_lays_a_rectangle_of_noise_over_a_share_of_the_pictures_while_training():
    settings = SmallConvnetSettings((4,), 8, 0.0, 0.9, 0.0, 0.0, "none", 0.0, 0.5, 0)
    model = models.small_convnet(settings, pictures(2, side=16, colour=False))
    head = models.keras.Model(model.input, model.get_layer("random_erasing").output)
    x = np.zeros((64, 16, 16, 3), "float32")  # a blank ground: every erased pixel shows
    np.testing.assert_array_equal(np.asarray(head(x, training=False)), x)
    out = np.asarray(head(x, training=True))
    assert out.min() >= -1.0 and out.max() <= 1.0  # the noise within the pictures' scale
    changed = out != 0
    erased = changed.any(axis=(1, 2, 3))
    assert 10 < erased.sum() < 54, erased.sum()  # about half of 64 (binomial: outside [11, 53] ~1e-7)
    for picture in changed[erased].any(axis=-1):  # one rectangle: its rows and columns
        rows, cols = np.flatnonzero(picture.any(axis=1)), np.flatnonzero(picture.any(axis=0))
        assert rows[-1] - rows[0] + 1 == len(rows) and cols[-1] - cols[0] + 1 == len(cols)
        box = picture[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
        assert box.mean() > 0.9  # noise throughout it (a draw of exactly 0 is all it misses)
        assert picture.sum() == box.sum()  # nothing outside it


def test_word_pairs_seen_twice_join_the_bag_weighed_as_the_words(tmp_path):
    from pipeline.data import prepared

    # words 3.. (0 padding, 1 start, 2 out-of-vocabulary); the pair (4, 5) is in both texts, (5, 6)
    # in one only, (1, 4) holds the start mark, (2, 4) the out-of-vocabulary mark: only (4, 5) is kept
    x = np.array([[0, 1, 4, 5, 6, 2, 4], [0, 0, 1, 4, 5, 7, 3]], dtype=np.int32)
    y = np.array([0, 1])
    data = prepared.write_arrays(
        tmp_path / "p",
        {s: (x, y) for s in ("train", "val", "test")},
        input_="sequences",
        class_names=["a", "b"],
        facts=full_length_facts(7, 8),  # the words from 3 on
    )
    model = models.mlp(mlp_settings(output_mode="count", ngrams=2), data)
    bag = models.keras.Model(model.input, model.get_layer("bag_of_words").output)
    out = np.asarray(bag(x))
    # the out-of-vocabulary bucket, the words 1..7, then the one pair kept
    assert out.shape == (2, 1 + 7 + 1)
    np.testing.assert_array_equal(out[:, -1], [1, 1])
    np.testing.assert_array_equal(out[:, 1:8], [[1, 1, 0, 2, 1, 1, 0], [1, 0, 1, 1, 1, 0, 1]])
    tf_idf = models.mlp(mlp_settings(output_mode="tf_idf", ngrams=2), data)
    weighed = np.asarray(models.keras.Model(tf_idf.input, tf_idf.get_layer("words_idf").output)(x))
    # in both texts: the pair's idf is ln(3 / 3) + 1 = 1, as the word 1's; the word 6 is in one
    np.testing.assert_allclose(weighed[:, -1], [1, 1])
    np.testing.assert_allclose(weighed[0, 6], np.log(3 / 2) + 1, rtol=1e-6)
    # TF-IDF as scikit-learn's: each text's vector scaled to unit length before the Dense layers
    unit = np.asarray(models.keras.Model(tf_idf.input, tf_idf.get_layer("words_unit_length").output)(x))
    np.testing.assert_allclose(unit, weighed / np.linalg.norm(weighed, axis=1, keepdims=True), rtol=1e-6)
    assert "words_unit_length" not in [layer.name for layer in model.layers]  # counts as they are


def test_build_model_sizes_the_model_from_the_prepared_stats():
    cfg = load_params(ROOT / "params.yaml", "reuters").train
    model = models.build_model(cfg, described(40, 300))
    assert model.input_shape == (None, 40) and model.output_shape == (None, 46)
    assert model.get_layer("embedding").input_dim == 300


@pytest.mark.parametrize("optimizer,cls", [("nadam", "Nadam"), ("sgd", "SGD"), ("rmsprop", "RMSprop")])
def test_compile_builds_the_named_optimizer_with_its_slots(optimizer, cls):
    cfg = dataclasses.replace(
        load_params(ROOT / "params.yaml", "reuters").train, optimizer=optimizer, learning_rate=0.02
    )
    model = reuters_model(max_len=30, vocab_size=30)
    models.compile_model(model, cfg)
    assert type(model.optimizer).__name__ == cls
    assert float(model.optimizer.learning_rate) == pytest.approx(0.02)
    assert model.optimizer.built  # slots exist before the first step (keras#23085)


def test_weight_decay_shrinks_the_weight_matrices_and_leaves_biases_and_batchnorm_alone():
    keras = models.keras
    cfg = dataclasses.replace(
        load_params(ROOT / "params.yaml", "reuters").train, optimizer="sgd", learning_rate=0.1, weight_decay=0.5
    )
    inputs = keras.Input((3,))
    h = keras.layers.BatchNormalization(name="bn")(keras.layers.Dense(4, name="dense")(inputs))
    model = keras.Model(inputs, keras.layers.Dense(2, name="logits")(h))
    for v in model.trainable_variables:
        v.assign(np.ones(v.shape, np.float32))
    models.compile_model(model, cfg)
    # a step with zero gradients: plain SGD moves nothing, so all that moves is the decay
    model.optimizer.apply_gradients([(np.zeros(v.shape, np.float32), v) for v in model.trainable_variables])
    moved = {v.path: float(np.asarray(v).flat[0]) for v in model.trainable_variables}
    assert moved == {
        "dense/kernel": pytest.approx(1 - 0.1 * 0.5),
        "dense/bias": 1.0,
        "bn/gamma": 1.0,
        "bn/beta": 1.0,
        "logits/kernel": pytest.approx(1 - 0.1 * 0.5),
        "logits/bias": 1.0,
    }
    plain = dataclasses.replace(cfg, weight_decay=0.0)
    assert models.optimizer(plain).weight_decay is None


def test_the_loss_is_on_logits_and_per_sample_without_reduction():
    labels = np.array([0, 1])
    logits = np.array([[2.0, 0.0], [0.0, 2.0]], np.float32)
    per_sample = np.asarray(models.loss(reduction=None)(labels, logits))
    assert per_sample.shape == (2,)
    assert per_sample == pytest.approx(np.log1p(np.exp(-2.0)), rel=1e-5)  # softmax applied to logits
    assert float(models.loss()(labels, logits)) == pytest.approx(per_sample.mean(), rel=1e-6)


def _ages_and_colours(folder):
    """A prepared table of 200 rows: an age (a number) and a colour (a category), the label age > 40."""
    from pipeline.data import prepared
    from pipeline.kinds.tables import CategoricalColumn, NumericColumn, TableFacts

    rng = np.random.default_rng(0)
    ages = rng.normal(40, 10, 200).astype(np.float32)
    colours = rng.integers(2, 5, 200).astype(np.float32)  # category ids 2..4
    x = np.stack([ages, colours], axis=1)
    y = (ages > 40).astype(np.int32)
    columns: list[NumericColumn | CategoricalColumn] = [
        NumericColumn("age", float(ages.mean()), missing=0),
        CategoricalColumn("colour", ["a", "b", "c"], seen=3, unseen={"train": 0}, missing=0),
    ]
    data = prepared.write_arrays(
        folder, {s: (x, y) for s in ("train", "val", "test")}, input_="table_rows",
        class_names=["no", "yes"], facts=TableFacts(columns, "label", ignored=[]),
    )  # fmt: skip
    return x, data


def test_table_mlp_encodes_the_columns_from_the_training_split_and_saves(tmp_path):
    from pipeline.config.keys.model_table import TableMlpSettings

    x, data = _ages_and_colours(tmp_path / "p")
    model = models.table_mlp(TableMlpSettings((8,), 0.0, linear=True), data)
    encoder = model.get_layer("feature_space")
    encoded = np.asarray(encoder([x[:, :1], x[:, 1:].astype(np.int64)]))
    # the number normalised by the training split's mean and variance, then the category one-hot
    number = next(i for i in range(encoded.shape[1]) if not set(np.unique(encoded[:, i])) <= {0.0, 1.0})
    assert abs(encoded[:, number].mean()) < 1e-3 and abs(encoded[:, number].std() - 1) < 1e-2
    assert encoded.shape[1] == 1 + 4  # the ids 2, 3, 4 and one out-of-vocabulary
    assert np.all(np.delete(encoded, number, axis=1).sum(axis=1) == 1)
    path = tmp_path / "m.keras"
    model.save(path)
    again = models.keras.models.load_model(path)
    np.testing.assert_allclose(np.asarray(again(x[:5])), np.asarray(model(x[:5])), rtol=1e-6)


@pytest.mark.parametrize(("units", "linear", "paths"), [((8,), True, 2), ((8,), False, 1), ((), True, 1)])
def test_table_mlp_adds_a_linear_model_of_the_columns_to_the_hidden_layers(tmp_path, units, linear, paths):
    from pipeline.config.keys.model_table import TableMlpSettings

    x, data = _ages_and_colours(tmp_path / "p")
    model = models.table_mlp(TableMlpSettings(units, 0.0, linear=linear), data)
    names = {layer.name for layer in model.layers}
    if paths == 1:  # one Dense layer makes the logits: the hidden layers' or, without any, the columns'
        assert "linear_logits" not in names and model.get_layer("logits").activation.__name__ == "linear"
        return
    encoded = model.get_layer("feature_space")([x[:5, :1], x[:5, 1:].astype(np.int64)])
    wide = np.asarray(model.get_layer("linear_logits")(encoded))
    hidden = np.asarray(model.get_layer("hidden_logits")(model.get_layer("dense1")(encoded)))
    np.testing.assert_allclose(np.asarray(model(x[:5])), wide + hidden, rtol=1e-5, atol=1e-6)
