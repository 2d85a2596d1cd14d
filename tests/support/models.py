"""Models and prepared datasets' descriptions without files, sized for the tests; a stand-in for
published ImageNet weights."""

from pathlib import Path

from support.configs import with_settings
from support.project import ROOT


def reuters_model(*, max_len: int, vocab_size: int, embedding_dim: int = 4):
    """The Reuters model with params.yaml's layers (models.build_model), sized for small test data."""
    from pipeline.config.keys.training import TRAIN_CONFIGS
    from pipeline.config.loading.loader import load_params
    from pipeline.training import models

    cfg = load_params(ROOT / "params.yaml", "reuters").train
    assert isinstance(cfg, TRAIN_CONFIGS["labelled_texts"])
    return models.build_model(with_settings(cfg, embedding_dim=embedding_dim), described(max_len, vocab_size))


def samples(**counts: int):
    """The description of a prepared dataset that has no files, with these sample counts by
    split: what a run logs of the data it read."""
    from pipeline.data.prepared import Prepared, Split

    splits = {name: Split(n, [n], ()) for name, n in counts.items()}
    return Prepared(Path(), "sequences", (3,), ["a"], splits, {})


def described(max_len: int, vocab_size: int, num_classes: int = 46):
    """The description of a prepared dataset of texts that has no files: what a model is sized from."""
    from pipeline.data.prepared import Prepared
    from pipeline.kinds.labelled_texts import full_length_facts

    names = [str(c) for c in range(num_classes)]
    return Prepared(Path(), "sequences", (max_len,), names, {}, full_length_facts(max_len, vocab_size))


def mobilenet_weights(path: Path, alpha: float) -> Path:
    """A stand-in for Keras' published MobileNetV2 ImageNet weights without top (the same legacy
    HDF5 layout, layer names and shapes, random values), written to `path`."""
    import h5py  # Keras' dependency: only in the tests that build one
    import keras
    from keras.src.legacy.saving import legacy_h5_format

    model = keras.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=alpha, include_top=False, weights=None)
    with h5py.File(path, "w") as handle:
        legacy_h5_format.save_weights_to_hdf5_group(handle, model)
    return path


def mlp_settings(**keys):
    """The mlp model's settings: a hidden layer of 4 units over a multi-hot bag of every word, no
    pairs, n-grams, dropout or penalty, but for `keys`."""
    from pipeline.config.keys.model_table import MlpSettings

    plain = dict(
        num_words=None,
        output_mode="multi_hot",
        sublinear_tf=False,
        ngrams=1,
        num_pairs=None,
        char_ngrams=(),
        char_ngrams_weight=1.0,
        units=(4,),
        dropout=0.0,
        l2=0.0,
    )
    return MlpSettings(**{**plain, **keys})
