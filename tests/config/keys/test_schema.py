"""pipeline/config/keys/schema.py: every key has its meaning and check, no default; the objects are frozen
and flatten to the dotted keys MLflow logs."""

import dataclasses

import pytest
from support.configs import field_cases
from support.project import ROOT

from pipeline.config.loading.loader import load_params


@pytest.mark.parametrize("cls,f", field_cases(), ids=lambda x: getattr(x, "__name__", getattr(x, "name", "")))
def test_every_key_has_a_help_text(cls, f):
    text = f.metadata.get("help")
    assert text and text.strip(), f"{cls.__name__}.{f.name} has no help text: give its _spec(...) a help="
    assert text.endswith((".", ")")), f"{cls.__name__}.{f.name}: end the help text with a full stop"
    assert "the seeds" not in text  # the project says "the reference tutorials"
    assert "<" not in text and "|" not in text.replace("train|training", "").replace("test|testing", "")


def test_no_key_has_a_default():
    """Defaults live in params.yaml only: a key the file lacks is an error, not a fallback."""
    for cls, f in field_cases():
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, (
            f"{cls.__name__}.{f.name} has a default: put it in params.yaml"
        )


def test_config_objects_are_frozen():
    params = load_params(ROOT / "params.yaml", "reuters")
    with pytest.raises(AttributeError):
        params.train.epochs = 3  # type: ignore[misc]  # the point: a frozen dataclass refuses it


def test_flat_keys_cover_nested_values():
    flat = load_params(ROOT / "params.yaml", "reuters").flat()
    assert flat["train.reuters.devices.logical_devices"] is None
    assert flat["download.reuters.files.0.url"].endswith("reuters.npz")
    assert flat["train.reuters.lr_decay_epochs"] == []


def test_the_flat_params_hold_the_settings_of_the_model_trained_only():
    """What MLflow compares: a Conv1D run shows no bag-of-words settings, and the other way round."""
    flat = load_params(ROOT / "params.yaml", "reuters").flat()
    assert flat["train.reuters.conv1d.embedding_dim"] == 7 and flat["train.reuters.model"] == "conv1d"
    assert not [key for key in flat if key.startswith("train.reuters.mlp.")]
    flat = load_params(ROOT / "params.yaml", "reuters", ["train.reuters.model=mlp"]).flat()
    assert "train.reuters.mlp.output_mode" in flat and not [key for key in flat if ".conv1d." in key]


def test_every_metric_a_promotion_compares_has_its_direction():
    import typing

    from pipeline.config.keys.schema import PROMOTE_METRICS, PromoteConfig

    metrics = typing.get_args(typing.get_type_hints(PromoteConfig)["metric"])
    assert list(metrics) == list(PROMOTE_METRICS)
    assert [PromoteConfig(metric=m, margin=0).maximize for m in metrics] == [True, False, True, True]
