"""pipeline/config/loading/build.py: a params mapping built into the schema's objects, key by key, and the
keys that must agree checked across; the search spaces are left to search_space, which builds
each value a space can draw with it (tests/config/loading/test_loader.py: the file as a whole)."""

from __future__ import annotations

import copy

import pytest
import yaml
from support.project import ROOT

from pipeline.config.keys.training import TRAIN_CONFIGS
from pipeline.config.loading import build, templates
from pipeline.errors import ConfigError
from pipeline.kinds.image_folders import ImageFoldersPreprocessConfig

RAW = templates.stages_of(yaml.safe_load((ROOT / "params.yaml").read_text()))  # `add` is the loader's


def test_every_section_is_built_for_every_dataset():
    built = build.sections(copy.deepcopy(RAW))
    assert isinstance(built["train"]["reuters"], TRAIN_CONFIGS["labelled_texts"])
    assert set(built) == set(RAW) and all(list(per) == ["reuters", "mnist"] for per in built.values())


def test_the_datasets_are_whatever_the_file_declares_in_every_section():
    raw = copy.deepcopy(RAW)
    for stage in raw:  # a third dataset, of image folders read by the generic reader
        raw[stage]["shapes"] = copy.deepcopy(raw[stage]["mnist"])
    raw["preprocess"]["shapes"].update(reader="folders", color="rgb", image_size=64)
    for stage in raw:  # and no Reuters
        del raw[stage]["reuters"]
    built = build.sections(raw)
    assert all(list(per) == ["mnist", "shapes"] for per in built.values())
    shapes = built["preprocess"]["shapes"]
    assert isinstance(shapes, ImageFoldersPreprocessConfig) and (shapes.reader, shapes.color) == ("folders", "rgb")
    assert isinstance(built["train"]["shapes"], TRAIN_CONFIGS["image_folders"])
    del raw["evaluate"]["shapes"]
    with pytest.raises(
        ConfigError, match=r"^params.yaml: download\.shapes is declared, but evaluate\.shapes is not: declare both$"
    ):
        build.sections(raw)


def test_a_top_k_is_left_to_the_stages_that_know_the_classes():
    raw = copy.deepcopy(RAW)
    raw["evaluate"]["mnist"]["top_k"] = raw["serve"]["mnist"]["top_k"] = 11  # MNIST has 10 classes
    assert build.sections(raw)["serve"]["mnist"].top_k == 11  # pipeline evaluate refuses it


@pytest.mark.parametrize("section", [{}, None, ["reuters"]])
def test_a_stage_section_is_a_mapping_of_datasets(section):
    raw = copy.deepcopy(RAW)
    raw["serve"] = section
    with pytest.raises(ConfigError, match=r"^params.yaml: serve: expected a mapping of datasets, got "):
        build.sections(raw)


def test_the_search_spaces_are_left_to_search_space():
    raw = copy.deepcopy(RAW)
    raw["tune"]["reuters"]["space"][0].update(low=-1.0)  # learning_rate: log_uniform from -1
    build.sections(raw)  # the space's own check is search_space.check's (the loader runs both)


def test_keys_that_disagree_name_the_key():
    raw = copy.deepcopy(RAW)
    raw["train"]["reuters"]["conv1d"]["conv_kernel_sizes"] = [5]
    with pytest.raises(
        ConfigError,
        match=r"params.yaml: train\.reuters\.conv1d\.conv_kernel_sizes: expected one kernel "
        r"size per conv_filters \(2\), got 1",
    ):
        build.sections(raw)


@pytest.mark.parametrize(
    "parts, expected",
    [
        (["train", "reuters", "epochs"], None),
        (["train", "reuters", "epoch"], (2, " (did you mean 'epochs'?)")),
        (["train", "reuters", "epochs", "deeper"], (3, "")),
        (["nothing"], (0, "")),
    ],
)
def test_the_first_missing_key_of_a_dotted_path_and_its_nearest_name(parts, expected):
    assert build.missing_key(RAW, parts) == expected


def test_one_datasets_section_is_built_with_the_checks_across_its_sections():
    built = build.sections(copy.deepcopy(RAW))
    train = copy.deepcopy(RAW["train"]["reuters"])
    train["epochs"] = 3
    assert build.dataset_section(train, "train", "reuters", built, "params.yaml").epochs == 3
    train["epochs"] = 0
    with pytest.raises(ConfigError, match=r"^params.yaml: train\.reuters\.epochs: expected a positive integer, got 0$"):
        build.dataset_section(train, "train", "reuters", built, "params.yaml")
    train["epochs"], train["conv1d"]["conv_kernel_sizes"] = 3, [5]
    with pytest.raises(ConfigError, match=r"^params.yaml: train\.reuters\.conv1d\.conv_kernel_sizes: expected one"):
        build.dataset_section(train, "train", "reuters", built, "params.yaml")
    raw = copy.deepcopy(RAW)
    raw["preprocess"]["mnist"]["validation_split"] = 0
    raw["train"]["mnist"]["early_stopping"]["monitor"] = "loss"
    built = build.sections(raw)
    train = copy.deepcopy(raw["train"]["mnist"])
    train["early_stopping"]["monitor"] = "val_loss"
    with pytest.raises(ConfigError, match=r"preprocess\.mnist\.validation_split is 0: monitor loss or set a split$"):
        build.dataset_section(train, "train", "mnist", built, "params.yaml")
