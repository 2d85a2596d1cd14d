"""`pipeline serve` (pipeline/commands/serve.py) in a sqlite store where reuters has a version and
no champion: nothing to serve, or a port another program holds, is one `error:` line, exit 1,
before a server starts and without TensorFlow. Which version it serves: tests/serving/test_server.py;
serving for real: tests/scenarios/test_serve.py."""

import socket

import pytest
from support.processes import run_command, subprocess_env
from support.project import ROOT
from support.tracking import forget_tracking_uri, stand_in_run

from pipeline.serving import registry


@pytest.fixture
def store(tmp_path):
    """The store's URI; it holds version 1 of reuters (test accuracy 0.6), which no alias names."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id = stand_in_run(uri)
    with pytest.MonkeyPatch.context() as patch:  # the registry in force is the environment's
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        registry.register("reuters", f"runs:/{run_id}/model", run_id, {"test_accuracy": 0.6}, "d", "")
    forget_tracking_uri()
    return uri


def test_nothing_to_serve_or_a_taken_port_is_one_line_without_tensorflow(store, tmp_path):
    env = subprocess_env(MLFLOW_TRACKING_URI=store)
    params = ["--params", str(ROOT / "params.yaml")]
    result, code, imported = run_command(["serve", "reuters", *params], cwd=tmp_path, env=env)
    assert code == 1 and result.stderr.startswith("error: reuters: no version has the alias 'champion' in sqlite:")
    assert "tensorflow" not in imported
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        taken.listen()
        result, code, _ = run_command(
            ["serve", "reuters", "--version", "1", "--port", str(port), *params], cwd=tmp_path, env=env
        )
    assert code == 1, result.stderr
    assert result.stderr.startswith(f"error: 127.0.0.1:{port}: cannot serve the model there (Address already in use)")
