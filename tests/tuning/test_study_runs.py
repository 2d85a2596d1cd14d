"""A study's MLflow runs: the parent with the study's settings and its best trial so far, the
trials nested under it with their params, curves, state and epochs."""

import dataclasses

from mlflow import MlflowClient
from support.models import samples
from support.project import ROOT
from support.tracking import use_sqlite

from pipeline.config.loading.loader import load_params
from pipeline.tuning import study_runs


def test_a_studys_runs_nest_its_trials_and_follow_its_best(tmp_path, monkeypatch):
    uri = use_sqlite(tmp_path, monkeypatch)
    client = MlflowClient(uri)
    params = load_params(ROOT / "params.yaml", "reuters", ["train.reuters.learning_rate=0.004"])
    parent = study_runs.create_study_run("reuters", "s", {"space": "[]", "trials": 2}, "optuna.journal")
    trial = study_runs.TrialRun.open(
        params,
        parent_run_id=parent,
        study="s",
        number=0,
        values={"learning_rate": 0.004},
        figures={"replicas": 1, "workers": 1},
        prepared=dataclasses.replace(samples(train=3, val=1), folder=tmp_path),
        worker="host:42",
    )
    for epoch, accuracy in ((1, 0.5), (2, 0.6)):
        trial.log_epoch(epoch, {"epoch": epoch, "val_accuracy": accuracy, "loss": 1.0 / epoch})
    trial.finish("pruned", epochs=2, value=0.6, metric="val_accuracy")

    run = client.get_run(trial.run_id)
    assert run.data.tags["mlflow.parentRunId"] == parent and run.info.run_name == "s-trial-0"
    assert run.data.tags["optuna.state"] == "pruned" and run.info.status == "FINISHED"
    assert run.data.tags["optuna.worker"] == "host:42" and run.data.tags["pipeline.stage"] == "tune"
    assert run.data.params["train.reuters.learning_rate"] == "0.004"  # the trial's value, as it trained
    assert run.data.params["distribute.replicas"] == "1" and run.data.params["data.train_samples"] == "3"
    assert [m.step for m in client.get_metric_history(trial.run_id, "val_accuracy")] == [1, 2]
    assert run.data.metrics["epochs_trained"] == 2 and run.data.metrics["tune_val_accuracy"] == 0.6

    study_runs.record_progress(
        parent,
        metric="val_accuracy",
        counts={"complete": 1, "pruned": 1, "failed": 0},
        best={"number": 1, "value": 0.7, "params": {"learning_rate": 0.002}, "run_id": "r1"},
        finished=True,
    )
    study = client.get_run(parent)
    assert study.info.status == "FINISHED" and study.data.params["tune.trials"] == "2"
    assert study.data.metrics["best_val_accuracy"] == 0.7 and study.data.metrics["trials_pruned"] == 1
    assert study.data.tags["best.trial"] == "1" and study.data.tags["best.params"] == '{"learning_rate": 0.002}'
    assert [m.step for m in client.get_metric_history(parent, "best_val_accuracy")] == [2]
    # a rerun that adds trials: the study runs again
    study_runs.record_progress(
        parent, metric="val_accuracy", counts={"complete": 1, "pruned": 1, "failed": 0}, best=None, finished=False
    )
    assert client.get_run(parent).info.status == "RUNNING"

    failed = study_runs.TrialRun.open(
        params,
        parent_run_id=parent,
        study="s",
        number=2,
        values={},
        figures={},
        prepared=dataclasses.replace(samples(train=3, val=1), folder=tmp_path),
        worker="host:43",
    )
    failed.finish("failed", epochs=0, value=None, metric="val_accuracy", reason="killed")
    run = client.get_run(failed.run_id)
    assert run.info.status == "FAILED" and run.data.tags["optuna.fail_reason"] == "killed"
