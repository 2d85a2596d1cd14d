"""pipeline/config/keys/training.py: a kind's train section names one model of its table and holds the
settings of each model it may switch to, required only of the one it names."""

import dataclasses
import typing

from pipeline.config.keys.model_table import MODELS
from pipeline.config.keys.training import TRAIN_CONFIGS, TrainConfig
from pipeline.kinds.known import KINDS

TextsTrainConfig = TRAIN_CONFIGS["labelled_texts"]


def test_each_kind_takes_the_models_of_its_table_by_name_and_their_settings_as_optional_keys():
    assert set(TRAIN_CONFIGS) == set(KINDS)
    for kind, cls in TRAIN_CONFIGS.items():
        table = MODELS[KINDS[kind].models]
        assert issubclass(cls, TrainConfig)
        hints = typing.get_type_hints(cls)
        assert typing.get_args(hints["model"]) == tuple(table)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for name, model in table.items():
            assert fields[name].metadata["optional_key"] is True
            assert typing.get_args(hints[name]) == (model.settings, type(None))
        assert not fields["epochs"].metadata["optional_key"]


def test_a_section_without_its_models_settings_says_which_key_is_missing():
    values = {f.name: None for f in dataclasses.fields(TextsTrainConfig)}
    cfg = TextsTrainConfig(**{**values, "model": "mlp"})
    assert cfg.settings is None
    assert cfg.disagreement() == "mlp: missing key (model is mlp: its settings)"
