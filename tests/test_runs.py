"""pipeline/tracking/runs.py: the runs a training, an evaluation and a benchmark log."""

from helpers import use_sqlite
from pipeline.tracking import runs


def test_a_training_run_is_named_by_its_source_and_ends(tmp_path, monkeypatch):
    import mlflow
    from mlflow import MlflowClient

    uri = use_sqlite(tmp_path, monkeypatch)
    monkeypatch.setenv("DVC_STAGE", "train@reuters")
    with runs.TrainingRun.open("reuters", "reuters-fit-1rep-float32") as run:
        pass
    tags = MlflowClient(uri).get_run(run.run_id).data.tags
    assert tags["mlflow.source.name"] == "train@reuters"  # not MLflow's `__main__.py`
    assert tags["mlflow.source.type"] == "LOCAL"
    assert mlflow.active_run() is None
