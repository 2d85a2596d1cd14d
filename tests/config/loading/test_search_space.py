"""tune.<ds>.space: every dimension checked against train.<ds> when the params file is read (one
line naming the dimension, exit code 2), drawn for a trial, and written as `-S` overrides that
both `pipeline` and DVC read back as the same values."""

import copy

import pytest
import yaml
from support.processes import run_command
from support.project import ROOT, write_params

from pipeline.config.loading import datasets, search_space, templates
from pipeline.config.loading.loader import apply_overrides, load_params, validate
from pipeline.errors import ConfigError


@pytest.fixture
def raw():
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def dim(**fields) -> dict:
    return {"key": "learning_rate", "kind": "log_uniform", "low": 0.001, "high": 0.01, "values": None, **fields}


def error_of(raw, *dims) -> str:
    raw = copy.deepcopy(raw)
    raw["tune"]["reuters"]["space"] = list(dims)
    with pytest.raises(ConfigError) as info:
        validate(raw, source="params.yaml")
    assert info.value.exit_code == 2 and "\n" not in str(info.value)
    return str(info.value)


def test_the_shipped_spaces_are_valid():
    for dataset in ("reuters", "mnist"):
        space = load_params(ROOT / "params.yaml", dataset).tune.space
        assert space and all(d.key for d in space)


@pytest.mark.parametrize(
    "fields,message",
    [
        (
            {"key": "learning_rat"},
            "params.yaml: tune.reuters.space[0].key: train.reuters has no param "
            "'learning_rat' (did you mean 'learning_rate'?)",
        ),
        (
            {"key": "early_stopping.patiense"},
            "tune.reuters.space[0].key: train.reuters.early_stopping has no param "
            "'patiense' (did you mean 'patience'?)",
        ),
        ({"key": "early_stopping"}, "train.reuters.early_stopping is a section: name one of its keys"),
        ({"key": "devices.intra_op_threads"}, "devices.intra_op_threads is set once per worker"),
        ({"key": "strategy", "kind": "choice", "low": None, "high": None, "values": ["mirrored"]}, "once per worker"),
        ({"low": 0.02}, "tune.reuters.space[0]: expected low < high, got low 0.02 and high 0.01"),
        ({"low": 0.0}, "log_uniform needs low > 0, got 0"),
        ({"high": None}, "log_uniform takes low and high, and no values"),
        ({"kind": "choice"}, "a choice takes values (a list) and no low or high"),
        ({"kind": "int", "key": "conv1d.embedding_dim", "low": 4.5, "high": 9}, "int takes whole numbers"),
        (
            {"kind": "uniform", "low": -0.5, "high": 0.5},
            "tune.reuters.space[0]: learning_rate=-0.5 can be drawn, and "
            "the config rejects it: train.reuters.learning_rate: expected a "
            "positive number, got -0.5",
        ),
        (
            {"key": "conv1d.embedding_dim", "kind": "uniform", "low": 4, "high": 9},
            "conv1d.embedding_dim=4.0 can be drawn, and the config rejects it",
        ),
        (
            {"key": "optimizer", "kind": "choice", "low": None, "high": None, "values": ["adam", "lion"]},
            "optimizer=lion can be drawn",
        ),
        (  # a model of another kind, or one whose settings the section lacks
            {"key": "model", "kind": "choice", "low": None, "high": None, "values": ["conv1d", "small_convnet"]},
            "model=small_convnet can be drawn, and the config rejects it: train.reuters.model: expected 'conv1d' or",
        ),
    ],
)
def test_a_bad_dimension_is_one_line_naming_it(raw, fields, message):
    assert message in error_of(raw, dim(**fields))


def test_a_drawn_value_is_checked_against_the_datasets_other_sections(raw):
    """The keys that must agree (build._check_across) judge a drawn value too: a monitor that
    needs the validation split preprocess does not hold, kernel sizes not one per filter count."""
    raw["preprocess"]["reuters"]["validation_split"] = 0
    raw["train"]["reuters"]["early_stopping"]["monitor"] = "loss"
    monitor = dim(key="early_stopping.monitor", kind="choice", low=None, high=None, values=["loss", "val_loss"])
    assert error_of(raw, monitor) == (
        "params.yaml: tune.reuters.space[0]: early_stopping.monitor=val_loss can be drawn, and the config "
        "rejects it: train.reuters.early_stopping.monitor: val_loss needs a validation split, and "
        "preprocess.reuters.validation_split is 0: monitor loss or set a split"
    )
    kernels = dim(key="conv1d.conv_kernel_sizes", kind="choice", low=None, high=None, values=[[5, 3], [5]])
    assert "sizes=[5] can be drawn, and the config rejects it: train.reuters.conv1d.conv_kernel_sizes: " in (
        error_of(raw, kernels)
    )


def test_loading_builds_each_section_once_and_a_train_section_per_drawable_value(monkeypatch):
    """A stage's load builds the datasets' sections once, and no template; pipeline add's and
    pipeline params' check builds each template's too (under its placeholder name); each value a
    space can draw builds its dataset's train section alone (not the file again)."""
    from pipeline.config.loading import build

    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    built: list[str] = []
    whole = []
    real_build, real_sections = build._build, build.sections

    def counted(cls, value, path, *rest, **named):
        if "." in path and "." not in path.split(".", 1)[1] and "[" not in path:  # a stage's section
            built.append(path)
        return real_build(cls, value, path, *rest, **named)

    def counted_sections(*args):
        whole.append(args)
        return real_sections(*args)

    monkeypatch.setattr(build, "_build", counted)
    monkeypatch.setattr(build, "sections", counted_sections)
    params = load_params(ROOT / "params.yaml", "reuters")
    assert len(whole) == 1  # a stage's load: the datasets' sections, not the add templates
    once = [f"{stage}.{ds}" for ds in raw["train"] for stage in datasets.STAGE_SECTIONS]
    spaces = [(ds, raw["tune"][ds]["space"]) for ds in raw["train"]]

    def drawn(spaces):
        return [f"train.{ds}" for ds, space in spaces for d in space for _ in d["values"] or (d["low"], d["high"])]

    assert drawn(spaces) and sorted(built) == sorted(once + drawn(spaces))
    assert params.train.epochs > 0
    whole.clear()
    built.clear()
    validate(raw)  # pipeline add's and pipeline params': the datasets', then each template's
    assert len(whole) == 1 + len(raw["add"])
    once += [f"{stage}.{templates.PLACEHOLDER}" for _ in raw["add"] for stage in datasets.STAGE_SECTIONS]
    spaces += [(templates.PLACEHOLDER, template["tune"]["space"]) for template in raw["add"].values()]
    assert sorted(built) == sorted(once + drawn(spaces))


def test_a_key_twice_and_an_empty_space(raw):
    assert "tune.reuters.space[1].key: learning_rate is in the space twice" in error_of(raw, dim(), dim())
    assert "tune.reuters.space: expected a non-empty list of dimensions, got []" in error_of(raw)


def test_a_bad_space_stops_the_command_before_tensorflow(tmp_path):
    write_params(tmp_path, {"tune.reuters.space": [dim(high=-1.0)]})
    result, code, imported = run_command(["tune", "reuters"], cwd=tmp_path)
    assert code == 2 and "tensorflow" not in imported
    assert result.stderr.splitlines() == [
        "error: params.yaml: tune.reuters.space[0]: expected low < high, got low 0.001 and high -1"
    ]


class Drawn:
    """A trial that draws the lowest value of each range, the last of each choice."""

    def suggest_float(self, name, low, high, log=False):
        return low

    def suggest_int(self, name, low, high):
        return low

    def suggest_categorical(self, name, choices):
        return choices[-1]


def test_a_trials_values_become_overrides_the_config_reads_back(raw):
    raw["tune"]["reuters"]["space"] = [
        dim(low=4e-05),
        dim(key="conv1d.conv_filters", kind="choice", low=None, high=None, values=[[8, 4], [16, 8]]),
        dim(key="early_stopping.patience", kind="int", low=2, high=5),
        dim(key="optimizer", kind="choice", low=None, high=None, values=["nadam", "adam"]),
    ]
    space = validate(raw)["tune"]["reuters"].space
    values = search_space.suggest(Drawn(), space)
    assert values == {
        "learning_rate": 4e-05,
        "conv1d.conv_filters": [16, 8],
        "early_stopping.patience": 2,
        "optimizer": "adam",
    }
    sets = search_space.overrides("reuters", values)
    assert sets == [
        "train.reuters.learning_rate=4.0e-05",
        "train.reuters.conv1d.conv_filters=[16, 8]",
        "train.reuters.early_stopping.patience=2",
        "train.reuters.optimizer=adam",
    ]
    train = validate(apply_overrides(copy.deepcopy(raw), sets))["train"]["reuters"]
    assert (train.learning_rate, train.settings.conv_filters, train.early_stopping.patience, train.optimizer) == (
        4e-05,
        (16, 8),
        2,
        "adam",
    )
    # Optuna keeps a list choice as its JSON text: a finished trial's params decode back
    assert search_space.decode(space, {"conv1d.conv_filters": "[16, 8]", "learning_rate": 4e-05}) == {
        "conv1d.conv_filters": [16, 8],
        "learning_rate": 4e-05,
    }


def test_dvc_writes_a_small_value_that_the_config_reads_as_a_number(tmp_path):
    """`dvc exp run -S train.reuters.learning_rate=4.0e-05` (a tuned rate) writes `4e-05`, which
    YAML 1.1 reads as a string: the params are read with YAML 1.2's floats."""
    from dvc.utils.hydra import apply_overrides as dvc_apply

    path = write_params(tmp_path)
    dvc_apply(str(path), [search_space.overrides("reuters", {"learning_rate": 4e-05})[0]])
    assert "learning_rate: 4e-05" in path.read_text()
    assert load_params(path, "reuters").train.learning_rate == 4e-05


def test_the_space_as_json_names_what_identifies_it(raw):
    space = validate(raw)["tune"]["reuters"].space
    text = search_space.as_json(space)
    assert search_space.as_json(space) == text and "learning_rate" in text
    raw["tune"]["reuters"]["space"][0]["high"] = 0.02
    assert search_space.as_json(validate(raw)["tune"]["reuters"].space) != text


def test_the_model_is_a_dimension_like_any_other(raw):
    """A study may search over the model: each value names a model whose settings the train
    section holds."""
    raw["tune"]["reuters"]["space"].append(
        {"key": "model", "kind": "choice", "low": None, "high": None, "values": ["conv1d", "mlp"]}
    )
    validate(raw)
    del raw["train"]["reuters"]["mlp"]
    with pytest.raises(ConfigError, match=r"model=mlp can be drawn, and the config rejects it: train\.reuters\.mlp"):
        validate(raw)
