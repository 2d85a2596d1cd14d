"""`pipeline promote` (pipeline/commands/promote.py) as a user runs it, on a sqlite store where
versions are registered as evaluate registers them: exit 0 when the champion alias moves or
names the version already, 1 when the gate refuses it (a script or CI can gate on that), 2 for a
usage or config error, one `error:` line and no store touched; --force moves the alias anyway;
the gate is the params file's promote.DATASET; no TensorFlow. The gate itself, on a sqlite store
and a tracking server: tests/serving/test_registry.py."""

import os
from pathlib import Path

import pytest
from support.processes import run_command, subprocess_env
from support.project import write_params
from support.tracking import forget_tracking_uri, stand_in_run, use_sqlite

from pipeline.serving import registry


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A sqlite store in tmp_path, where the commands run with the shipped params: its URI."""
    write_params(tmp_path)
    yield use_sqlite(tmp_path, monkeypatch)
    forget_tracking_uri()


def register(accuracy: float, data: str = "d1") -> int:
    """A version of reuters as evaluate registers one (a stand-in run's model file): its number."""
    run_id = stand_in_run(os.environ["MLFLOW_TRACKING_URI"])
    metrics = {"test_accuracy": accuracy, "test_loss": 1.0}
    return registry.register("reuters", f"runs:/{run_id}/model", run_id, metrics, data, "exp-a")


def promote(*args: str) -> tuple[int, str, list[str], set]:
    """`pipeline promote ARGS` here, on the store MLFLOW_TRACKING_URI names (unset: mlflow.db here):
    (exit code, stdout, stderr lines, which of TensorFlow and MLflow it imported)."""
    env = subprocess_env(**{k: v for k, v in os.environ.items() if k == "MLFLOW_TRACKING_URI"})
    result, code, imported = run_command(["promote", *args], cwd=Path.cwd(), env=env)
    assert "tensorflow" not in imported, result.stderr
    return code, result.stdout, result.stderr.splitlines(), imported


def test_the_exit_code_says_whether_the_gate_let_the_version_through(store):
    assert (register(0.60), register(0.601)) == (1, 2)
    first = promote("reuters", "1")
    assert first[:3] == (0, "reuters: version 1 (test_accuracy 0.6000) is the champion (there was none)\n", [])
    code, out, err, _ = promote("reuters")  # the best by the metric: version 2, by less than the margin
    assert (code, err) == (1, [])
    assert out == (
        "reuters: version 2 (test_accuracy 0.6010) not promoted: it does not beat the champion, version 1 "
        "(test_accuracy 0.6000), by more than the margin 0.005 (promote.reuters.margin); --force moves the alias "
        "anyway\n"
    )
    again = promote("reuters", "1")
    assert again[:3] == (0, "reuters: version 1 (test_accuracy 0.6000) is the champion already\n", [])
    code, out, err, _ = promote("reuters", "5")
    assert (code, out, err) == (2, "", ["error: reuters: no version 5 (versions 1, 2)"])


def test_the_gate_is_the_params_files_and_force_moves_the_alias_whatever_it_says(store, tmp_path):
    from mlflow import MlflowClient

    register(0.60)
    register(0.601)
    assert promote("reuters", "1")[0] == 0
    (tmp_path / "lenient").mkdir()
    write_params(tmp_path / "lenient", {"promote.reuters.margin": 0.0})
    code, out, err, _ = promote("reuters", "2", "--params", "lenient/params.yaml")  # the shipped margin: 0.005
    assert (code, err) == (0, [])
    assert out == "reuters: version 2 (test_accuracy 0.6010) is the champion (was version 1 (test_accuracy 0.6000))\n"
    assert promote("reuters", "1")[:2] == (
        1,
        "reuters: version 1 (test_accuracy 0.6000) not promoted: it does not beat the champion, version 2 "
        "(test_accuracy 0.6010), by more than the margin 0.005 (promote.reuters.margin); --force moves the alias "
        "anyway\n",
    )
    code, out, err, _ = promote("reuters", "1", "--force")  # a rollback
    assert (code, err) == (0, [])
    assert (
        out
        == "reuters: version 1 (test_accuracy 0.6000) is the champion (was version 2 (test_accuracy 0.6010), forced)\n"
    )
    assert int(MlflowClient(store).get_model_version_by_alias("reuters", "champion").version) == 1


@pytest.mark.parametrize(
    "args, line",
    [
        ([], "pipeline promote: Missing argument 'DATASET'. (see 'pipeline promote --help')"),
        (
            ["reuters", "0"],
            "pipeline promote: Invalid value for '[VERSION]': 0 is not in the range x>=1. "
            "(see 'pipeline promote --help')",
        ),
        (["cifar"], "unknown dataset 'cifar': params.yaml declares reuters, mnist"),
        (["reuters", "--params", "nowhere.yaml"], "nowhere.yaml: file not found"),
    ],
)
def test_a_usage_or_config_error_is_one_line_before_mlflow(tmp_path, monkeypatch, args, line):
    write_params(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the default store: mlflow.db here
    code, out, err, imported = promote(*args)
    assert (code, out, err) == (2, "", [f"error: {line}"])
    assert imported == set() and sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]
