"""The params file's `add` section: each kind's template checked as a dataset of that kind when
the file is read (errors name `add.<kind>.<stage>.<key>`), ignored by everything that lists the
datasets, and filled for a new dataset's name."""

import copy

import pytest
import yaml
from support.project import ROOT, write_params

from pipeline.config.loading import datasets, templates
from pipeline.config.loading.loader import apply_overrides, load_params, names, read_params, validate
from pipeline.errors import ConfigError


@pytest.fixture
def raw():
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def error_of(raw, key: str, value) -> str:
    *parents, last = key.split(".")
    node = raw
    for part in parents:
        node = node[int(part) if part.isdigit() else part]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    with pytest.raises(ConfigError) as info:
        validate(raw, source="params.yaml")
    assert info.value.exit_code == 2 and "\n" not in str(info.value)
    return str(info.value)


def test_the_shipped_templates_are_one_per_kind_and_photos_and_valid(raw):
    assert sorted(templates.kinds(raw)) == sorted([*datasets.KINDS, "photos"])
    validate(raw)
    for name, template in raw["add"].items():
        assert list(template) == list(datasets.STAGE_SECTIONS)
        assert template["preprocess"]["kind"] == templates.TEMPLATES[name]
        assert template["download"]["files"] == [{"url": "", "sha256": None}]


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("add.image_folders.train.epochs", 0, "add.image_folders.train.epochs: expected a positive integer, got 0"),
        (
            "add.labelled_texts.preprocess.text_column",
            "",
            'add.labelled_texts.preprocess.text_column: expected a column name, got ""',
        ),
        (
            "add.labelled_texts.preprocess.kind",
            "image_folders",
            "add.labelled_texts.preprocess.kind: expected 'labelled_texts' (the template's kind), got "
            '"image_folders"',
        ),
        (
            "add.image_folders.preprocess.validation_split",
            0,
            "add.image_folders.train.early_stopping.monitor: val_loss needs a validation split, and "
            "add.image_folders.preprocess.validation_split is 0: monitor loss or set a split",
        ),
        (
            "add.image_folders.tune.space.0.key",
            "learnin_rate",
            "add.image_folders.tune.space[0].key: add.image_folders.train has no param 'learnin_rate' "
            "(did you mean 'learning_rate'?)",
        ),
        (
            "add.labelled_texts.tune.space.0.low",
            -1.0,
            "add.labelled_texts.tune.space[0]: log_uniform needs low > 0, got -1",
        ),
        (
            "add.labelled_texts.train.conv1d.conv_kernel_sizes",
            [3],
            "add.labelled_texts.train.conv1d.conv_kernel_sizes: expected one kernel size per conv_filters (2), got 1",
        ),
        ("add.images", {}, 'add.images: unknown key (did you mean "image_folders"?)'),
        ("add.image_folders.serv", {}, 'add.image_folders.serv: unknown key (did you mean "serve"?)'),
        ("add.image_folders.serve", KeyError, "add.image_folders.serve: missing key"),
        ("add.image_folders.evaluate", None, "add.image_folders.evaluate: expected a mapping, got null"),
        (
            "add.image_folders.download.files",
            [],
            "add.image_folders.download.files: expected one file, whose url `pipeline add` sets (--url), got []",
        ),
        (
            "add.image_folders.download.files.0.url",
            "https://example.org/a.zip",
            "add.image_folders.download.files[0].url: expected '' or null (`pipeline add` sets it from --url), "
            'got "https://example.org/a.zip"',
        ),
        (
            "add.image_folders.download.files.0.sha256",
            "0" * 64,
            "add.image_folders.download.files[0].sha256: expected '' or null (`pipeline add` sets it from --sha256)",
        ),
        ("add.image_folders.tune.study", "a b", "add.image_folders.tune.study: expected a study name"),
        ("add", None, "add: expected a mapping of templates (image_folders, labelled_texts, photos, tables) to a new"),
    ],
)
def test_a_bad_default_is_one_line_naming_its_key_in_the_template(raw, key, value, message):
    assert error_of(raw, key, value).startswith(f"params.yaml: {message}")


def test_a_file_without_templates_is_valid_and_the_datasets_ignore_them(raw, tmp_path):
    del raw["add"]
    assert list(validate(raw)["train"]) == ["reuters", "mnist"]
    path = write_params(tmp_path)
    assert names(path) == ["reuters", "mnist"]
    params = load_params(path, "mnist")
    assert not any(key.startswith("add.") for key in params.flat())  # MLflow's params
    assert not any(
        key.startswith("add.") for key in load_params(path, "mnist", ["add.image_folders.train.epochs=2"]).flat()
    )


def test_a_template_is_checked_with_the_whole_file_and_by_no_stage(tmp_path):
    """The whole file's check, which `pipeline params` and `pipeline add` run (one error line from
    each: tests/commands/), checks the templates; a stage's load does not."""
    path = write_params(tmp_path)
    assert (
        load_params(path, "reuters", ["add.labelled_texts.train.epochs=2"]).raw["add"]["labelled_texts"]["train"][
            "epochs"
        ]
        == 2
    )
    bad = "add.labelled_texts.train.epochs=0"
    # a stage's load builds the datasets' sections, not the templates, which no stage reads
    assert load_params(path, "reuters", [bad]).raw["add"]["labelled_texts"]["train"]["epochs"] == 0
    with pytest.raises(ConfigError, match=r"params.yaml: add.labelled_texts.train.epochs: expected a positive"):
        validate(apply_overrides(read_params(path), [bad]), "params.yaml")


def test_fill_makes_a_template_a_datasets_sections(raw):
    template = raw["add"]["labelled_texts"]
    before = copy.deepcopy(template)
    sections = templates.fill(template, "topics", "https://example.org/topics.csv", "a" * 64)
    assert template == before  # a copy
    assert sections["download"]["files"] == [{"url": "https://example.org/topics.csv", "sha256": "a" * 64}]
    assert sections["tune"]["study"] == "topics"
    template["tune"]["study"] = "texts"
    assert templates.fill(template, "topics", "https://example.org/topics.csv")["tune"]["study"] == "texts"
    assert (
        templates.fill(template, "topics", "https://example.org/topics.csv")["download"]["files"][0]["sha256"] is None
    )


def test_stages_of_leaves_the_file_alone(raw):
    stages = templates.stages_of(raw)
    assert list(stages) == list(datasets.STAGE_SECTIONS) and "add" in raw
    assert templates.stages_of([1]) == [1]
