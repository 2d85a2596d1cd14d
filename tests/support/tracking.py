"""MLflow in the test's own process: its tracking URI forgotten, a sqlite store of the test's
own, a run that holds a stand-in model."""

from pathlib import Path


def forget_tracking_uri() -> None:
    """Unset MLflow's process-wide tracking URI (use_store sets it): the environment's rules again."""
    import mlflow

    mlflow.set_tracking_uri(None)  # type: ignore[arg-type]  # MLflow takes None (unset); its hint says str | Path


def use_sqlite(tmp_path: Path, monkeypatch) -> str:
    """Point this process's MLflow at a new sqlite store in `tmp_path` and work there; its URI."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    return uri


def stand_in_run(uri: str) -> str:
    """A run holding a stand-in model file, made through a client of `uri` (not MLflow's
    process-wide active experiment, which an earlier test on this worker may have set)."""
    import uuid

    from mlflow import MlflowClient

    client = MlflowClient(uri)
    run = client.create_run(client.create_experiment(f"stand-ins-{uuid.uuid4().hex[:8]}"))
    client.log_text(run.info.run_id, "a stand-in for a model", "model/MLmodel")
    client.set_terminated(run.info.run_id)
    return run.info.run_id
