"""pipeline/serving/server.py: which registered model `pipeline serve DATASET` serves (the
champion, a version, or a refusal that says what to do) and the `mlflow models serve` command it
becomes. The command saying, without TensorFlow, that there is nothing to serve or the port is
taken: tests/commands/test_serve_command.py; serving for real: tests/scenarios/test_serve.py."""

from __future__ import annotations

import sys
from typing import Final

import pytest
from support.tracking import forget_tracking_uri, stand_in_run

from pipeline.config.keys.schema import PromoteConfig
from pipeline.errors import ConfigError, DataError
from pipeline.serving import registry, server

METRIC: Final = "test_accuracy"


@pytest.fixture
def store(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    run_id = stand_in_run(uri)
    registry.register("reuters", f"runs:/{run_id}/model", run_id, {METRIC: 0.6}, "d", "")
    yield uri
    forget_tracking_uri()  # MLflow's process-wide URI (use_store sets it): the environment's again


def test_the_champion_a_version_or_a_clear_refusal(store):
    assert server.resolve("reuters", "champion", 1, METRIC) == ("models:/reuters/1", "version 1 (test_accuracy 0.6000)")
    with pytest.raises(
        DataError,
        match=r"^reuters: no version has the alias 'champion' in sqlite:///.*: "
        r"`pipeline promote reuters` first \(or serve a version: --version N\)$",
    ):
        server.resolve("reuters", "champion", None, METRIC)
    with pytest.raises(ConfigError, match=r"^reuters: no version 3 \(versions 1\)$"):
        server.resolve("reuters", "champion", 3, METRIC)
    assert registry.promote("reuters", PromoteConfig(metric=METRIC, margin=0.0)).promoted
    assert server.resolve("reuters", "champion", None, METRIC)[0] == "models:/reuters@champion"
    assert server.command("models:/reuters@champion", "0.0.0.0", 5001, 2) == [
        sys.executable,
        "-m",
        "mlflow",
        "models",
        "serve",
        "-m",
        "models:/reuters@champion",
        "--env-manager",
        "local",
        "-h",
        "0.0.0.0",
        "-p",
        "5001",
        "--workers",
        "2",
    ]
