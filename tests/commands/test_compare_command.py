"""`pipeline compare` (pipeline/commands/compare.py): runs named by id, run name or DVC experiment
name, from a sqlite store and a real `mlflow server`; only what differs, unless --all; text, JSON
and CSV; a name that is no run, or more than one, a usage error; no TensorFlow."""

import csv
import io

import pytest
from support.processes import child_json, run_pipeline, run_python, subprocess_env
from support.servers import free_ports, start_mlflow_server

PARAMS = {"train.reuters.learning_rate": "0.001", "train.reuters.epochs": "10", "distribute.replicas": "1"}


def log_runs(uri: str) -> dict:
    """Three runs: `base` (a plain repro's), `bold-cat` (a DVC experiment: another learning
    rate and commit) and a second run named like `base`."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.create_experiment("reuters")
    ids = {}
    for key, name, params, tags, accuracy in (
        ("base", "reuters-fit-1rep-float32-1111111", PARAMS, {"git.commit": "1" * 40}, 0.63),
        (
            "exp",
            "bold-cat",
            {**PARAMS, "train.reuters.learning_rate": "0.002"},
            {"git.commit": "2" * 40, "dvc.exp_name": "bold-cat"},
            0.61,
        ),
        ("twin", "twin", PARAMS, {"git.commit": "1" * 40}, 0.62),
        ("twin2", "twin", PARAMS, {"git.commit": "1" * 40}, 0.60),
    ):
        run = client.create_run(experiment, run_name=name, tags={**tags, "host": "h", "pipeline.stage": "train"})
        for param, value in params.items():
            client.log_param(run.info.run_id, param, value)
        client.log_metric(run.info.run_id, "test_accuracy", accuracy)
        client.log_metric(run.info.run_id, "system/cpu_utilization_percentage", 50.0)
        client.set_terminated(run.info.run_id)
        ids[key] = run.info.run_id
    return ids


@pytest.fixture
def store(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    return tmp_path, subprocess_env(MLFLOW_TRACKING_URI=uri), log_runs(uri)


def compare(folder, env, *args):
    result = run_pipeline("compare", *args, cwd=folder, env=env)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_two_runs_that_differ_in_one_param_show_that_param_only(store):
    folder, env, ids = store
    result = compare(folder, env, ids["base"], "bold-cat")  # by id, and by DVC experiment name
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["reuters-fit-1rep-float32-1111111", "bold-cat"]
    assert lines[1].split() == ["run", "id", ids["base"][:8], ids["exp"][:8]]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:] if not line.startswith("[")}
    assert rows["train.reuters.learning_rate"] == ["0.001", "0.002"]
    assert rows["git.commit"] == ["1" * 40, "2" * 40]
    assert rows["test_accuracy"] == ["0.63", "0.61"]
    for equal in ("train.reuters.epochs", "distribute.replicas", "host"):
        assert equal not in rows
    assert not any(key.startswith("system/") for key in rows)
    every = compare(folder, env, "--all", ids["base"], "bold-cat").stdout
    assert "train.reuters.epochs" in every and "distribute.replicas" in every and "host" in every


def test_json_and_csv_for_scripts(store):
    folder, env, ids = store
    data = child_json(compare(folder, env, "--json", "reuters-fit-1rep-float32-1111111", ids["exp"]))
    assert [r["run_id"] for r in data["runs"]] == [ids["base"], ids["exp"]]
    assert data["params"] == {"train.reuters.learning_rate": ["0.001", "0.002"]}
    assert data["tags"] == {"git.commit": ["1" * 40, "2" * 40]}
    assert data["metrics"] == {"test_accuracy": [0.63, 0.61]}
    rows = list(csv.reader(io.StringIO(compare(folder, env, "--csv", ids["base"], "bold-cat").stdout)))
    assert rows[0] == ["section", "key", ids["base"], ids["exp"]]
    assert ["params", "train.reuters.learning_rate", "0.001", "0.002"] in rows
    assert ["metrics", "test_accuracy", "0.63", "0.61"] in rows


@pytest.mark.parametrize(
    "args,expected",
    [
        (["nobody", "bold-cat"], "error: no run named 'nobody' in sqlite:///"),
        (["twin", "bold-cat"], "error: 'twin' names 2 runs in sqlite:///"),
        (["bold-cat"], "error: compare needs two runs or more"),
        (["--json", "--csv", "twin", "bold-cat"], "error: pipeline compare: give --json or --csv, not both"),
    ],
)
def test_a_run_that_is_not_there_or_not_one_is_a_usage_error(store, args, expected):
    folder, env, _ = store
    result = compare(folder, env, *args)
    assert result.returncode == 2
    assert result.stderr.startswith(expected) and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""


def test_no_store_here_is_a_usage_error(tmp_path):
    result = compare(tmp_path, subprocess_env(), "a", "b")
    assert result.returncode == 2 and "no MLflow store here yet" in result.stderr
    assert not (tmp_path / "mlflow.db").exists()  # looking did not create one


def test_runs_on_a_tracking_server(tmp_path):
    proc, url = start_mlflow_server(tmp_path, free_ports(1)[0])
    try:
        ids = log_runs(url)
        result = compare(tmp_path, subprocess_env(MLFLOW_TRACKING_URI=url), "--json", ids["base"], "bold-cat")
        assert result.returncode == 0, result.stderr
        assert child_json(result)["params"] == {"train.reuters.learning_rate": ["0.001", "0.002"]}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_compare_does_not_import_tensorflow(store):
    folder, env, ids = store
    code = (
        "import sys\nfrom pipeline.cli import main\ntry:\n    main(['-q', 'compare', '--json', "
        f"{ids['base']!r}, 'bold-cat'])\nexcept SystemExit as e:\n    assert e.code in (0, None), e.code\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
    )
    result = run_python(code, cwd=folder, env=env)
    assert result.returncode == 0, result.stderr
