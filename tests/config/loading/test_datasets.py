"""pipeline/config/loading/datasets.py: the datasets are what the params file declares, each by its kind
and reader; each reader gives the same shape of result; a name declared in one place and not
another is one error naming both."""

import numpy as np
import pytest
import yaml
from support.datasets import make_mnist_archive, make_reuters_npz, make_word_index
from support.processes import run_command
from support.project import ROOT, write_params

from pipeline.config.keys import training
from pipeline.config.loading import datasets
from pipeline.config.loading.loader import load_params, names, read_yaml
from pipeline.errors import ConfigError
from pipeline.kinds import image_folders, labelled_texts


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
    assert found.input == dataset.of_kind.form == {"reuters": "sequences", "mnist": "images"}[name]
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
    assert texts.classes()["preprocess"] is labelled_texts.TextTablePreprocessConfig
    assert texts.classes()["train"] is training.TRAIN_CONFIGS["labelled_texts"] and texts.of_kind.form == "sequences"
    pictures = datasets.Dataset("shapes", "image_folders", "folders")
    assert pictures.classes()["preprocess"] is image_folders.ImageFoldersPreprocessConfig
    assert pictures.classes()["train"] is training.TRAIN_CONFIGS["image_folders"] and pictures.of_kind.form == "images"
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
        (
            "kind",
            "spreadsheets",
            r"preprocess\.mnist\.kind: expected one of 'labelled_texts', 'image_folders' or 'tables', "
            "got 'spreadsheets'",
        ),
        ("reader", "table", r"preprocess\.mnist\.reader: expected 'folders' or 'digits' for kind 'image_folders'"),
        ("kind", ["image_folders"], r"preprocess\.mnist\.kind: expected .* got \['image_folders'\]$"),
        ("reader", {"a": 1}, r"preprocess\.mnist\.reader: expected 'folders' or 'digits' .* got \{'a': 1\}$"),
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


# --------------------------------------------------------------------------- a dataset's name
# Each thing that carries a dataset's name, asked through its own code: None when it takes the
# name, else what it said.


def set_param_refuses(name, tmp_path):
    """`dvc exp run -S train.<name>.epochs=3`: DVC's own rewrite of the params file (Hydra's
    override grammar, then OmegaConf), read back as this pipeline reads it."""
    from dvc.utils.hydra import apply_overrides

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"train": {name: {"epochs": 1}}}))
    try:
        apply_overrides(path, [f"train.{name}.epochs=3"])
    except Exception as exc:  # noqa: BLE001 - what DVC says is the answer
        return str(exc).splitlines()[0]
    got = read_yaml(path)
    return None if got == {"train": {name: {"epochs": 3}}} else f"rewritten as {got}"


def dvc_stage_refuses(name, _tmp_path):
    """dvc.yaml's foreach stage `evaluate@<name>`: DVC's rule for stage names, and its reading
    of the target back into stage and key."""
    from dvc.parsing import split_group_name
    from dvc.stage.utils import is_valid_name

    if not is_valid_name(name):
        return "not a valid stage name"
    return None if split_group_name(f"evaluate@{name}") == ("evaluate", name) else "another stage and key"


def path_refuses(name, tmp_path):
    """data/raw/<name>/ and data/raw/<name>.manifest.json: one path component, and a file name
    on Windows too."""
    from pathlib import PureWindowsPath

    if not name or "/" in name or "\\" in name or name in (".", ".."):
        return "not one path component"
    if PureWindowsPath(name).is_reserved():
        return "a Windows device name"
    try:
        (tmp_path / "raw" / name).mkdir(parents=True)
        (tmp_path / "raw" / f"{name}.manifest.json").write_text("{}")
    except OSError as exc:
        return exc.strerror
    return None


def mlflow_refuses(name, _tmp_path):
    """MLflow's experiment and registered model `<name>` (in a database or a file store, and
    as models:/<name>@champion), its param keys train.<name>.* and tag keys
    dvc.data.data/prepared/<name>."""
    from mlflow.store.artifact.utils.models import _parse_model_uri
    from mlflow.store.model_registry.file_store import _validate_model_name as file_store_model_name
    from mlflow.utils import validation

    checks = (
        lambda: validation._validate_experiment_name(name),
        lambda: validation._validate_model_name(name),
        lambda: file_store_model_name(name),
        lambda: validation._validate_param_name(f"train.{name}.epochs"),
        lambda: validation._validate_tag_name(f"dvc.data.data/prepared/{name}"),
    )
    for check in checks:
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - MLflow's refusal is the answer
            return str(exc)
    parsed = _parse_model_uri(f"models:/{name}@champion")
    return None if (parsed.name, parsed.alias) == (name, "champion") else f"models:/ URI read as {parsed}"


def yaml_refuses(name, _tmp_path):
    """A key of params.yaml, read back by PyYAML as the same string."""
    try:
        read = yaml.safe_load(f"{name}: 0")
    except yaml.YAMLError:
        return "invalid YAML"
    return None if read == {name: 0} else f"read as {next(iter(read))!r}"


TOOLS = {
    "-S": set_param_refuses,
    "stage": dvc_stage_refuses,
    "path": path_refuses,
    "mlflow": mlflow_refuses,
    "yaml": yaml_refuses,
}

ACCEPTED = ["reuters", "mnist", "news_2024", "my-photos", "_private", "A", "x9", "Z_z-1", "a" * 64]


@pytest.mark.parametrize("name", ACCEPTED)
def test_a_name_the_rule_takes_is_taken_by_everything_that_carries_it(name, tmp_path):
    assert datasets.name_problem(name) is None
    for tool, refuses in TOOLS.items():
        (tmp_path / tool).mkdir()
        assert refuses(name, tmp_path / tool) is None, tool


# Each refused name with (one of) the tools that refuse it: the rule refuses nothing that all
# of them take, apart from its length bound and names equal but for case (below).
REFUSED = [
    ("my data", "-S"),  # Hydra's grammar: no spaces in a key
    ("a=b", "-S"),
    ("a,b", "-S"),  # a sweep's separator
    ("a[0]", "-S"),
    ("a{b}", "-S"),
    ("a(b)", "-S"),
    ("a'b", "-S"),
    ('a"b', "-S"),
    ("a@b", "-S"),  # Hydra's package separator; DVC's foreach join
    ("a.b", "-S"),  # another level of the dotted key
    ("a+b", "-S"),
    ("a~b", "-S"),
    ("a:b", "-S"),
    ("-a", "-S"),  # a key starts with a letter, '_' or '$'
    ("1a", "-S"),
    ("é", "-S"),  # ASCII letters only
    ("café", "-S"),
    ("a\tb", "-S"),
    ("", "-S"),
    ("a$b", "stage"),  # Hydra takes '$'; DVC's stage names do not
    ("$a", "stage"),
    ("a#b", "stage"),
    ("a%b", "stage"),
    ("a.b", "stage"),
    ("a@b", "stage"),
    ("a/b", "path"),
    ("..", "path"),
    ("con", "path"),
    ("NUL", "path"),
    ("com1", "path"),
    ("lpt9", "path"),
    ("a/b", "mlflow"),
    ("a:b", "mlflow"),
    ("a%b", "mlflow"),  # the file store's registered models
    ("a$b", "mlflow"),  # a param or tag key
    ("a b", "-S"),
    ("yes", "yaml"),  # YAML 1.1's booleans and null, as PyYAML reads them
    ("On", "yaml"),
    ("off", "yaml"),
    ("true", "yaml"),
    ("null", "yaml"),
    ("yes", "-S"),  # DVC writes it back unquoted: a boolean key
]


@pytest.mark.parametrize(("name", "tool"), REFUSED)
def test_a_name_the_rule_refuses_is_refused_by_what_would_carry_it(name, tool, tmp_path):
    assert datasets.name_problem(name) is not None
    assert TOOLS[tool](name, tmp_path) is not None, f"{tool} takes {name!r}"


def test_the_rules_device_names_are_windows_own():
    from pathlib import PureWindowsPath

    assert all(PureWindowsPath(name).is_reserved() for name in datasets.DEVICE_NAMES)
    assert all(not PureWindowsPath(n).is_reserved() for n in ("COM0", "LPT0", "CON1", "console"))


def renamed(tmp_path, old, new):
    """The shipped params with dataset `old` renamed `new` in every section."""
    from pipeline.config.commands.params_doc import format_params

    raw = yaml.safe_load(write_params(tmp_path).read_text())
    for section in datasets.STAGE_SECTIONS:
        raw[section] = {new if name == old else name: value for name, value in raw[section].items()}
    path = tmp_path / "params.yaml"
    path.write_text(format_params(raw))
    return path


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("my data", "' ' is not one of them"),
        ("news.2024", "'.' is not one of them"),
        ("-photos", "it starts with '-'"),
        ("Con", "it is a Windows device name, no file name there"),
        ("a" * 65, "it has 65 characters"),
    ],
)
def test_a_bad_name_is_one_error_naming_the_file_the_key_and_the_rule(tmp_path, name, why):
    path = renamed(tmp_path, "mnist", name)
    with pytest.raises(ConfigError) as raised:
        load_params(path, "reuters")
    assert str(raised.value) == (
        f"{path}: download.{name}: expected a dataset name of 1 to 64 ASCII letters, digits, '_' or '-', "
        f"starting with a letter or '_', got {name!r}: {why}"
    )


def test_a_name_yaml_reads_as_no_string_is_named_too(tmp_path):
    path = renamed(tmp_path, "mnist", "__placeholder__")
    path.write_text(path.read_text().replace("__placeholder__:", "on:"))
    with pytest.raises(
        ConfigError, match=r": download\.True: expected a dataset name .*, got True: YAML reads it as a bool"
    ):
        load_params(path, "reuters")


def test_names_equal_but_for_case_are_refused(tmp_path):
    path = renamed(tmp_path, "mnist", "Reuters")
    with pytest.raises(ConfigError) as raised:
        load_params(path, "reuters")
    assert str(raised.value) == (
        f"{path}: download.Reuters: expected a dataset name apart from download.reuters by more than case "
        "(one folder of data/raw/ on a case-insensitive file system)"
    )


@pytest.mark.parametrize("stage", ["download", "preprocess"])
def test_a_stage_stops_on_a_bad_name_at_load_before_any_work(tmp_path, stage):
    """The check is the params file's: whichever dataset a stage was asked for, nothing runs."""
    renamed(tmp_path, "mnist", "my photos")
    args = {"download": ["--out", "raw", "--manifest", "raw.json"], "preprocess": ["--raw", "raw", "--out", "prep"]}
    result, code, imported = run_command([stage, "reuters", *args[stage], "--params", "params.yaml"], cwd=tmp_path)
    assert (code, imported) == (2, set()), result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: params.yaml: download.my photos: expected a dataset name of 1 to 64 ASCII letters, digits, "
        "'_' or '-', starting with a letter or '_', got 'my photos': ' ' is not one of them"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]
