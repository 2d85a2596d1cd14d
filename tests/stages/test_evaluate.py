"""`pipeline evaluate` (stages/evaluate.py) run by hand on the session's trained project: what DVC
runs as `evaluate@reuters`, here against a tracking store of its own. The evaluation itself is
tests/training/test_evaluation.py's; the logged model's, tests/serving/."""

from __future__ import annotations

import json

import pytest
from support.processes import evaluate_args, run_pipeline

pytestmark = pytest.mark.slow


def evaluate(project, out: str, env: dict):
    """The evaluate stage as dvc.yaml runs it for Reuters, its reports named as dvc.yaml names
    them, in `out`."""
    names = ("metrics.json", "per_class.csv", "confusion.csv", "confusion.png")
    outputs = dict(zip(("metrics", "per_class", "confusion", "confusion_png"), (f"{out}/{name}" for name in names)))
    args = evaluate_args(data="data/prepared/reuters", model_dir="models/reuters", **outputs)
    return run_pipeline(*args, cwd=project, env=env)


def test_the_committed_model_evaluated_again_gives_the_committed_reports_and_a_run_of_its_own(
    trained_project, tmp_path
):
    """The same model on the same test split: the same metrics, per-class report and confusion
    table as the committed reports, byte for byte. In a tracking store that has no run of that
    training, the evaluation is a run of its own, its test metrics the file's, and the model it
    logged the store's first registered version."""
    project = trained_project.copy(tmp_path / "project")
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**trained_project.env, "MLFLOW_TRACKING_URI": store}
    done = evaluate(project, "again", env)
    assert done.returncode == 0, done.stderr
    for name in ("metrics.json", "per_class.csv", "confusion.csv"):
        assert (project / "again" / name).read_bytes() == (project / "reports" / "reuters" / name).read_bytes(), name
    metrics = json.loads((project / "again" / "metrics.json").read_text())
    assert done.stdout.startswith("reuters: ") and f"{metrics['test_accuracy']:.4f}" in done.stdout

    from mlflow import MlflowClient

    client = MlflowClient(store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.data.tags["pipeline.stage"] == "evaluate"
    assert run.data.metrics["test_accuracy"] == pytest.approx(metrics["test_accuracy"])
    (version,) = client.search_model_versions("name = 'reuters'")
    assert int(version.version) == 1 and version.run_id == run.info.run_id


def test_a_model_folder_that_is_not_there_is_one_line_and_nothing_written(trained_project, tmp_path):
    project = trained_project.copy(tmp_path / "project")
    env = {**trained_project.env, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    (project / "models" / "reuters" / "model.keras").unlink()
    done = evaluate(project, "again", env)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: models/reuters") and "train" in line, line
    assert not (project / "again").exists()
