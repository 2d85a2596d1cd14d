"""The model registry and `pipeline promote`'s gate, on a sqlite store and on a real MLflow
tracking server: versions registered as evaluate registers them (tags: run, test metrics, test
data, DVC experiment), the champion alias moved only when a version beats it by the margin on
the same test data, --force to roll back. The command's lines and exit codes:
tests/commands/test_promote_command.py."""

from __future__ import annotations

import os

import pytest
from support.tracking import forget_tracking_uri, stand_in_run

from pipeline.config.keys.schema import PromoteConfig
from pipeline.errors import ConfigError, DataError
from pipeline.serving import registry

GATE = PromoteConfig(metric="test_accuracy", margin=0.005)


@pytest.fixture(params=["sqlite", "server"])
def store(request, tmp_path, monkeypatch):
    """A tracking store of each kind, with a registered model of its own name (the server is
    the session's, shared)."""
    if request.param == "sqlite":
        uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    else:
        uri = request.getfixturevalue("mlflow_server")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


@pytest.fixture(autouse=True)
def process_wide_uri():
    """MLflow's process-wide tracking URI follows MLFLOW_TRACKING_URI in these tests, and is
    left so for the next module on this worker."""
    forget_tracking_uri()
    yield
    forget_tracking_uri()


def register(name: str, accuracy: float, data: str = "d1", loss: float = 1.0) -> int:
    """A version as evaluate registers one: from a run's artifact `model` (a stand-in file)."""
    import os

    run_id = stand_in_run(os.environ["MLFLOW_TRACKING_URI"])
    return registry.register(
        name, f"runs:/{run_id}/model", run_id, {"test_accuracy": accuracy, "test_loss": loss}, data, "exp-a"
    )


def unique(name: str) -> str:
    import uuid

    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_versions_carry_their_tags_and_the_first_promotion_needs_no_gate(store):
    from mlflow import MlflowClient

    name = unique("reuters")
    first = register(name, 0.60)
    second = register(name, 0.62)
    assert (first, second) == (1, 2)
    tags = MlflowClient(store).get_model_version(name, "2").tags
    assert tags["test_accuracy"] == "0.62" and tags["test_data"] == "d1" and tags["dvc.experiment"] == "exp-a"
    assert registry.champion(name, GATE.metric) is None
    decision = registry.promote(name, GATE)  # the best by test accuracy
    assert decision.promoted and not decision.refused
    assert decision.message == f"{name}: version 2 (test_accuracy 0.6200) is the champion (there was none)"
    assert int(MlflowClient(store).get_model_version_by_alias(name, "champion").version) == 2


def test_the_gate_wants_the_margin_on_the_same_test_data_and_force_rolls_back(store):
    from mlflow import MlflowClient

    name = unique("mnist")
    register(name, 0.600)
    assert registry.promote(name, GATE, 1).promoted
    register(name, 0.604)  # better, but by less than the margin
    refused = registry.promote(name, GATE, 2)
    assert refused.refused and not refused.promoted
    assert refused.message == (
        f"{name}: version 2 (test_accuracy 0.6040) not promoted: it does not beat the "
        f"champion, version 1 (test_accuracy 0.6000), by more than the margin 0.005 "
        f"(promote.{name}.margin); --force moves the alias anyway"
    )
    register(name, 0.700, data="d2")  # far better, on other test data
    other = registry.promote(name, GATE, 3)
    assert other.refused and "tested on other test data than the champion" in other.message
    register(name, 0.610)
    assert registry.promote(name, GATE, 4).promoted
    champion = registry.champion(name, GATE.metric)
    assert champion is not None and champion.number == 4
    again = registry.promote(name, GATE, 4)
    assert not again.promoted and not again.refused and "is the champion already" in again.message
    rollback = registry.promote(name, GATE, 1, force=True)
    assert rollback.promoted and rollback.message.endswith("(was version 4 (test_accuracy 0.6100), forced)")
    assert int(MlflowClient(store).get_model_version_by_alias(name, "champion").version) == 1


def test_a_loss_gate_wants_a_lower_loss_and_a_nan_never_passes(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    gate = PromoteConfig(metric="test_loss", margin=0.01)
    register("reuters", 0.6, loss=1.50)
    register("reuters", 0.5, loss=1.20)
    register("reuters", 0.7, loss=1.45)
    register("reuters", 0.1, loss=float("nan"))  # a diverged training
    assert registry.promote("reuters", gate).message.startswith("reuters: version 2 (test_loss 1.2000) is the champion")
    assert registry.promote("reuters", gate, 3).refused
    nan = registry.promote("reuters", gate, 4)
    assert nan.refused and "test_loss is missing on version 4" in nan.message


def test_the_default_candidate_is_the_best_the_gate_can_compare(tmp_path, monkeypatch):
    """A better version on other test data is not the default candidate while the champion's
    test data has one that beats it; the margin counts whole answers, not float noise."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    gate = PromoteConfig(metric="test_accuracy", margin=0.001)
    register("mnist", 0.9859)
    assert registry.promote("mnist", gate).promoted
    register("mnist", 0.9990, data="other-split")
    register("mnist", 0.9869)  # 10 more right of 10,000: exactly the margin, not more
    assert registry.promote("mnist", gate).message.startswith("mnist: version 3 (test_accuracy 0.9869) not promoted")
    register("mnist", 0.9870)  # 11 more
    assert registry.promote("mnist", gate).message.startswith("mnist: version 4 (test_accuracy 0.9870) is the champion")


def test_what_is_not_there_is_one_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(DataError, match=r"no registered model 'reuters': run `dvc repro`"):
        registry.promote("reuters", GATE)
    register("reuters", 0.6)
    with pytest.raises(ConfigError, match=r"^reuters: no version 7 \(versions 1\)$"):
        registry.promote("reuters", GATE, 7)


def test_a_registry_apart_from_the_tracking_store_is_the_one_named(tmp_path, monkeypatch):
    """MLFLOW_REGISTRY_URI is MLflow's own variable: models go there, and when it does not
    answer the error names it, not the tracking store that does."""
    from support.servers import free_ports

    from pipeline.errors import TrackingError

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", f"sqlite:///{tmp_path / 'registry.db'}")
    register("reuters", 0.6)
    assert (tmp_path / "registry.db").exists()
    down = f"http://127.0.0.1:{free_ports(1)[0]}"
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", down)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with pytest.raises(TrackingError, match=rf"^{down}: reading the registered versions failed: Connection refused"):
        registry.versions("reuters", "test_accuracy")


def test_a_tests_registry_uri_is_not_left_to_the_next_test():
    """conftest puts back what mlflow.set_registry_uri sets process-wide (its MLFLOW_REGISTRY_URI
    too, which every later command of the worker would inherit): this sets it, the next checks."""
    import mlflow

    mlflow.set_registry_uri("http://127.0.0.1:9")
    assert os.environ["MLFLOW_REGISTRY_URI"] == "http://127.0.0.1:9"


def test_the_next_test_finds_the_registry_uri_as_it_was():
    import mlflow

    assert "MLFLOW_REGISTRY_URI" not in os.environ
    assert mlflow.get_registry_uri() == mlflow.get_tracking_uri()
