import copy

import pytest
import yaml
from support.processes import run_command, subprocess_env
from support.project import ROOT, write_params

from pipeline.config.keys.schema import STAGES
from pipeline.config.loading.loader import load_params, names, params_of, validate
from pipeline.errors import ConfigError
from pipeline.kinds.labelled_texts import ReutersPreprocessConfig


@pytest.fixture
def raw():
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def error_of(raw) -> str:
    with pytest.raises(ConfigError) as info:
        validate(raw, source="params.yaml")
    assert info.value.exit_code == 2
    message = str(info.value)
    assert "\n" not in message
    return message


def test_shipped_params_load_for_every_dataset():
    assert names(ROOT / "params.yaml") == ["reuters", "mnist"]
    for dataset in names(ROOT / "params.yaml"):
        params = load_params(ROOT / "params.yaml", dataset)
        assert params.train.epochs > 0
        flat = params.flat()
        assert all(key.split(".")[1] == dataset for key in flat)
        assert {key.split(".")[0] for key in flat} == set(STAGES)


def test_wrong_type_names_key_and_value(raw):
    raw["train"]["reuters"]["batch_size_per_replica"] = "32x"
    assert error_of(raw) == (
        'params.yaml: train.reuters.batch_size_per_replica: expected a positive integer, got "32x"'
    )


def test_out_of_range(raw):
    raw["preprocess"]["mnist"]["validation_split"] = 1.5
    assert error_of(raw) == "params.yaml: preprocess.mnist.validation_split: expected a number in [0, 1), got 1.5"


def test_bool_is_not_an_integer(raw):
    raw["train"]["mnist"]["epochs"] = True
    assert "train.mnist.epochs: expected a positive integer, got true" in error_of(raw)


def test_unknown_key_suggests_the_close_one(raw):
    raw["train"]["reuters"]["epoch"] = raw["train"]["reuters"].pop("epochs")
    assert error_of(raw) == 'params.yaml: train.reuters.epoch: unknown key (did you mean "epochs"?)'


def test_missing_key(raw):
    del raw["evaluate"]["mnist"]["batch_size"]
    assert error_of(raw) == "params.yaml: evaluate.mnist.batch_size: missing key"


def test_unknown_dataset_and_stage(raw):
    bad = copy.deepcopy(raw)
    bad["train"]["cifar"] = {}
    assert error_of(bad) == "params.yaml: train.cifar is declared, but download.cifar is not: declare both"
    bad = copy.deepcopy(raw)
    bad["trian"] = bad.pop("train")
    assert 'trian: unknown key (did you mean "train"?)' in error_of(bad)


def test_yaml_booleans_in_choices_are_explained(raw):
    raw["preprocess"]["reuters"]["padding"] = False  # what YAML makes of `padding: off`
    message = error_of(raw)
    assert "preprocess.reuters.padding: expected 'pre' or 'post', got false" in message
    assert "quote" in message


def test_nested_list_items_are_checked(raw):
    raw["download"]["reuters"]["files"][1]["sha256"] = "abc"
    assert 'download.reuters.files[1].sha256: expected a 64-digit hex sha256 or null, got "abc"' in error_of(raw)
    raw["download"]["reuters"]["files"][1] = {"url": "ftp://x/y", "sha256": None}
    assert "download.reuters.files[1].url: expected an http://, https:// or file:// URL" in error_of(raw)


def test_device_list_items(raw):
    raw["train"]["reuters"]["devices"]["visible_gpus"] = [0, "1"]
    assert 'train.reuters.devices.visible_gpus[1]: expected null or a list of GPU indices, got "1"' in error_of(raw)
    raw["train"]["reuters"]["devices"]["visible_gpus"] = [0, 0]
    assert "visible_gpus: expected null or a list of GPU indices, got [0, 0]" in error_of(raw)


def test_null_where_a_value_is_required(raw):
    raw["train"]["reuters"]["learning_rate"] = None
    assert error_of(raw) == "params.yaml: train.reuters.learning_rate: expected a positive number, got null"


def test_model_must_fit_the_dataset(raw):
    raw["train"]["reuters"]["model"] = "mobilenet_v2"
    assert "train.reuters.model: expected 'conv1d' or 'mlp', got \"mobilenet_v2\"" in error_of(raw)


def test_a_model_is_switched_by_one_key_and_needs_its_own_settings_only(raw):
    raw["train"]["reuters"]["model"] = "mlp"
    params = params_of(raw, "reuters", "params.yaml")
    assert params.train.settings.output_mode == "multi_hot"
    del raw["train"]["reuters"]["conv1d"]  # the settings of a model not trained are not required
    raw["tune"]["reuters"]["space"] = [d for d in raw["tune"]["reuters"]["space"] if not d["key"].startswith("conv1d.")]
    assert params_of(raw, "reuters", "params.yaml").train.conv1d is None  # type: ignore[attr-defined]
    del raw["train"]["reuters"]["mlp"]
    assert error_of(raw) == "params.yaml: train.reuters.mlp: missing key (model is mlp: its settings)"


def test_imagenet_weights_need_the_pinned_file_in_the_download_section(raw):
    raw["train"]["mnist"]["mobilenet_v2"]["weights"] = "imagenet"
    assert "train.mnist.mobilenet_v2.weights: imagenet needs the weights file, and download.mnist.pretrained is" in (
        error_of(raw)
    )
    raw["download"]["mnist"]["pretrained"] = [{"url": "https://example.org/w.h5", "sha256": None}]
    params = params_of(raw, "mnist", "params.yaml")
    assert params.train.settings.weights == "imagenet"
    # unpinned weights are said at every download, as unpinned data are
    assert params.unpinned()[-1].startswith("download.mnist.pretrained[0] (https://example.org/w.h5): no sha256")
    raw["download"]["mnist"]["pretrained"][0]["sha256"] = "0" * 64
    assert not params_of(raw, "mnist", "params.yaml").unpinned_weights()


def test_yaml_syntax_error_has_line_and_column(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train:\n  reuters:\n    epochs: [1, 2\n")
    with pytest.raises(ConfigError) as info:
        load_params(path, "reuters")
    assert str(info.value).startswith(f"{path}:4:1: invalid YAML:")


def test_duplicate_key_is_an_error(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train:\n  a: 1\n  a: 2\n")
    with pytest.raises(ConfigError, match=r":3:3: invalid YAML: duplicate key 'a'"):
        load_params(path, "reuters")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: file not found"):
        load_params(tmp_path / "nope.yaml", "reuters")


@pytest.mark.parametrize(
    "stage,args",
    [
        (
            "train",
            ["--data", "d", "--model-dir", "m", "--history", "h.csv", "--summary", "s.json", "--curves", "c.png"],
        ),
        ("download", ["--out", "o", "--manifest", "o.json"]),
        ("bench", ["--json", "o.json"]),
    ],
)
def test_stage_stops_on_config_error_before_tensorflow_and_writes_nothing(tmp_path, raw, stage, args):
    raw["train"]["reuters"]["batch_size_per_replica"] = "32x"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    result, code, imported = run_command([stage, "reuters", *args, "--params", "params.yaml"], cwd=tmp_path)
    assert (code, imported) == (2, set()), result.stderr
    assert result.stderr.strip().splitlines() == [
        'error: params.yaml: train.reuters.batch_size_per_replica: expected a positive integer, got "32x"'
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


def test_overrides_set_values_as_dvc_exp_run_does():
    params = load_params(
        ROOT / "params.yaml",
        "reuters",
        [
            "train.reuters.steps_per_execution=8",
            "train.reuters.devices.visible_gpus=[0, 1]",
            "train.reuters.lr_decay_epochs=[]",
            "preprocess.reuters.num_words=null",
            "train.reuters.mlp.l2=1e-4",  # YAML 1.2's float, as DVC's -S reads it (1.1's string)
        ],
    )
    assert params.train.steps_per_execution == 8
    assert params.train.mlp.l2 == 0.0001  # type: ignore[attr-defined]
    assert list(params.train.devices.visible_gpus or ()) == [0, 1]
    assert isinstance(params.preprocess, ReutersPreprocessConfig)
    assert params.preprocess.num_words is None
    assert params.flat()["train.reuters.steps_per_execution"] == 8  # what MLflow logs


@pytest.mark.parametrize(
    "item,message",
    [
        (
            "train.reuters.stepz_per_execution=8",
            "-S train.reuters.stepz_per_execution=8: params.yaml has no key 'stepz_per_execution' under "
            "train.reuters (did you mean 'steps_per_execution'?)",
        ),
        ("train.reuters.epochs", "-S train.reuters.epochs: expected key=value, e.g. train.reuters.epochs=3"),
        (
            "train.reuters.epochs.x=1",
            "-S train.reuters.epochs.x=1: params.yaml has no key 'x' under train.reuters.epochs",
        ),
        ("train.reuters.epochs=[1", "-S train.reuters.epochs=[1: the value is not valid YAML"),
        ("train.reuters.epochs=0", "params.yaml: train.reuters.epochs: expected a positive integer, got 0"),
    ],
)
def test_a_bad_override_names_itself(item, message):
    with pytest.raises(ConfigError) as caught:
        load_params(ROOT / "params.yaml", "reuters", [item])
    assert str(caught.value).replace(f"{ROOT}/", "").startswith(message)


def test_monitoring_a_validation_metric_without_a_validation_split_is_a_config_error(raw):
    raw["preprocess"]["reuters"]["validation_split"] = 0
    assert error_of(raw) == (
        "params.yaml: train.reuters.early_stopping.monitor: val_accuracy needs a validation "
        "split, and preprocess.reuters.validation_split is 0: monitor accuracy or set a split"
    )
    raw["train"]["reuters"]["early_stopping"]["monitor"] = "loss"
    validate(raw)


def test_a_kernel_size_for_each_conv_block(raw):
    raw["train"]["reuters"]["conv1d"]["conv_kernel_sizes"] = [5]
    assert error_of(raw) == (
        "params.yaml: train.reuters.conv1d.conv_kernel_sizes: expected one kernel size per conv_filters (2), got 1"
    )
    raw["train"]["reuters"]["conv1d"]["conv_filters"] = []
    assert error_of(raw).startswith(
        "params.yaml: train.reuters.conv1d.conv_filters: expected a non-empty list of positive integers"
    )


def test_a_top_k_is_judged_against_the_prepared_classes_not_by_the_params(raw):
    """A dataset's classes are known once it is prepared: the params file alone takes any top k
    (`pipeline evaluate` judges it, test_a_top_k_past_the_prepared_classes_stops_evaluate...)."""
    for key in ("evaluate", "serve"):
        for dataset in ("reuters", "mnist"):
            raw[key][dataset]["top_k"] = 1000
    validate(raw)


def test_a_top_k_past_the_prepared_classes_stops_evaluate_before_it_writes_anything(tmp_path):
    from support.datasets import make_reuters_raw

    from pipeline.config.loading import datasets

    params = write_params(tmp_path, {"evaluate.reuters.top_k": 47})
    cfg = load_params(params, "reuters").preprocess
    datasets.of(cfg, "reuters").prepare(make_reuters_raw(tmp_path / "raw"), tmp_path / "data", cfg)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.keras").write_bytes(b"a stand-in: evaluate stops before it reads it")
    outputs = ["--metrics", "m.json", "--per-class", "p.csv", "--confusion", "c.csv", "--confusion-png", "c.png"]
    result, code, _ = run_command(
        ["evaluate", "reuters", "--data", "data", "--model-dir", "model", *outputs], cwd=tmp_path
    )
    assert code == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: params.yaml: evaluate.reuters.top_k: expected at most 46 (reuters has 46 classes), got 47"
    ]
    assert not any((tmp_path / name).exists() for name in ("m.json", "p.csv", "c.csv", "c.png"))


def test_serve_judges_its_params_before_it_asks_the_store(tmp_path):
    """No store here (no mlflow.db, no champion): the params are what is wrong, and said first."""
    write_params(tmp_path, {"serve.reuters.top_k": 0})
    result, code, imported = run_command(["serve", "reuters"], cwd=tmp_path)
    assert code == 2 and "tensorflow" not in imported and "mlflow" not in imported
    assert result.stderr.strip().splitlines() == [
        "error: params.yaml: serve.reuters.top_k: expected a positive integer, got 0"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


@pytest.mark.parametrize(
    "command", [["promote", "reuters"], ["serve", "reuters"], ["compare", "some-run", "another-run"]]
)
def test_a_tracking_uri_of_no_store_mlflow_has_is_a_usage_error_naming_those_that_work(tmp_path, command):
    write_params(tmp_path)
    env = subprocess_env(MLFLOW_TRACKING_URI="ftp://files.example.org/mlflow")
    result, code, imported = run_command(command, cwd=tmp_path, env=env)
    assert code == 2 and "tensorflow" not in imported
    assert result.stderr.strip().splitlines() == [
        "error: MLFLOW_TRACKING_URI: ftp:// is no MLflow tracking store: expected sqlite:///PATH, a tracking "
        "server's http(s)://HOST:PORT or a database URL (postgresql://, mysql://); set it to one, or unset it "
        "for mlflow.db here"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]
