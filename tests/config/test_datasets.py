"""pipeline/config/datasets.py: the datasets are what the params file declares, each by its kind
and reader; each reader gives the same shape of result; a name declared in one place and not
another is one error naming both."""

import numpy as np
import pytest
import yaml
from fixtures import make_mnist_archive, make_reuters_npz, make_word_index
from helpers import ROOT, write_params

from pipeline.config import datasets, schema
from pipeline.config.loader import load_params, names, read_yaml
from pipeline.errors import ConfigError


def downloaded(dataset, folder):
    if dataset == "reuters":
        make_reuters_npz(folder / "reuters.npz")
        make_word_index(folder / "reuters_word_index.json")
    else:
        make_mnist_archive(folder / "mnist_png.tar.gz")
    return folder


@pytest.mark.parametrize("name", ["reuters", "mnist"])
def test_every_shipped_dataset_prepares_what_its_kind_says(tmp_path, name):
    cfg = load_params(write_params(tmp_path), name).preprocess  # MNIST's digest: the test archive's
    dataset = datasets.of(cfg, name)
    assert isinstance(cfg, dataset.classes()["preprocess"])
    found = dataset.prepare(downloaded(name, tmp_path), tmp_path / "prepared", cfg)
    assert set(found.splits) == {"train", "val", "test"}
    splits = {split: found.head(split, 10**6) for split in found.splits}
    for x, y in splits.values():
        assert len(x) == len(y) > 0 and y.dtype.kind in "iu"  # integer labels
    assert found.input == dataset.inputs == {"reuters": "sequences", "mnist": "images"}[name]
    labels = np.concatenate([y for _, y in splits.values()])
    assert labels.min() >= 0 and labels.max() < found.num_classes == len(found.class_names)
    assert len(set(found.class_names)) == found.num_classes
    assets = {p.name for p in found.folder.iterdir()} - {"stats.json"} - {s.file for s in found.split("train").shards}
    assets -= {s.file for split in ("val", "test") for s in found.split(split).shards}
    assert assets == ({"reuters_word_index.json"} if name == "reuters" else set())
    if name == "mnist":
        assert found.class_names == [str(d) for d in range(10)]


def test_the_shipped_files_declare_the_two_datasets_in_the_same_order():
    assert names(ROOT / "params.yaml") == ["reuters", "mnist"]
    for stage in read_yaml(ROOT / "dvc.yaml")["stages"].values():
        assert stage["foreach"] == ["reuters", "mnist"]


def test_each_kind_and_reader_takes_its_own_sections():
    texts = datasets.Dataset("news", "labelled_texts", "table")
    assert texts.classes()["preprocess"] is schema.TextTablePreprocessConfig
    assert texts.classes()["train"] is schema.TextsTrainConfig and texts.inputs == "sequences"
    pictures = datasets.Dataset("shapes", "image_folders", "folders")
    assert pictures.classes()["preprocess"] is schema.ImageFoldersPreprocessConfig
    assert pictures.classes()["train"] is schema.ImagesTrainConfig and pictures.inputs == "images"
    assert list(pictures.classes()) == [*datasets.COMMON, "preprocess", "train"]
    assert set(pictures.classes()) == set(datasets.STAGE_SECTIONS)


def raw_params():
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def test_a_name_one_stage_section_lacks_is_one_error_naming_both():
    raw = raw_params()
    raw["train"]["shapes"] = raw["train"]["mnist"]
    with pytest.raises(ConfigError, match=r"^p: train\.shapes is declared, but download\.shapes is not: declare both$"):
        datasets.declared(raw, "p")
    raw = raw_params()
    del raw["tune"]["mnist"]
    with pytest.raises(ConfigError, match=r"^p: download\.mnist is declared, but tune\.mnist is not: declare both$"):
        datasets.declared(raw, "p")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("kind", "tables", r"preprocess\.mnist\.kind: expected 'labelled_texts' or 'image_folders', got 'tables'"),
        ("reader", "table", r"preprocess\.mnist\.reader: expected 'folders' or 'digits' for kind 'image_folders'"),
    ],
)
def test_an_unknown_kind_or_reader_is_named(key, value, message):
    raw = raw_params()
    raw["preprocess"]["mnist"][key] = value
    with pytest.raises(ConfigError, match=message):
        datasets.declared(raw, "p")


def test_dvc_yamls_foreach_and_the_params_file_must_name_the_same_datasets(tmp_path):
    params = write_params(tmp_path)
    pipeline_file = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    pipeline_file["stages"]["train"]["foreach"] = ["reuters", "mnist", "shapes"]
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(pipeline_file))
    with pytest.raises(ConfigError) as raised:
        load_params(params, "reuters")
    assert str(raised.value) == (
        f"{tmp_path / 'dvc.yaml'}: stages.train.foreach lists 'shapes', which {params} does not declare "
        "(no preprocess.shapes): declare both"
    )
    pipeline_file["stages"]["train"]["foreach"] = ["reuters"]
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(pipeline_file))
    with pytest.raises(ConfigError, match=r"'mnist' is declared, but .*dvc\.yaml's stages\.train\.foreach does not"):
        load_params(params, "reuters")


def test_an_unknown_dataset_is_a_config_error_naming_the_declared_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown dataset 'cifar': .*params\.yaml declares reuters, mnist$"):
        load_params(write_params(tmp_path), "cifar")
