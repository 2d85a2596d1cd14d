"""pipeline/tracking/store.py: the store in force, its experiments and their runs pages; and the
store under several trainings at once: created or migrated once, under a lock."""

import subprocess
import sys
from pathlib import Path

import pytest
from support.datasets import make_reuters_raw
from support.processes import run_pipeline, subprocess_env, train_args
from support.project import write_params
from support.tracking import use_sqlite

from pipeline.tracking import store


def test_default_store_is_sqlite_in_the_repo_root(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    assert store.tracking_uri() == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert store.tracking_uri() == "http://127.0.0.1:5000"


def test_a_dvc_temp_experiment_logs_to_the_main_checkout(tmp_path):
    copy = tmp_path / ".dvc" / "tmp" / "exps" / "tmpabc123"
    copy.mkdir(parents=True)
    assert store.repo_root(copy) == tmp_path.resolve()


def test_experiments_are_tagged_as_model_training_and_a_users_kind_is_kept(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    uri = use_sqlite(tmp_path, monkeypatch)
    client = MlflowClient(uri)
    kind = store.EXPERIMENT_KIND_TAG
    new = store.use_experiment("reuters")
    assert client.get_experiment(new).tags[kind] == "custom_model_development"
    # made before the tag (by an earlier pipeline): tagged when next used, and once
    old = client.create_experiment("mnist")
    assert kind not in client.get_experiment(old).tags
    assert store.use_experiment("mnist") == old
    assert client.get_experiment(old).tags[kind] == "custom_model_development"
    client.set_experiment_tag(old, kind, "genai_development")  # a user's choice, in the UI
    store.use_experiment("mnist")
    assert client.get_experiment(old).tags[kind] == "genai_development"


def test_runs_pages_link_each_experiment_to_its_runs_table(tmp_path, monkeypatch):
    uri = use_sqlite(tmp_path, monkeypatch)
    assert store.runs_pages("http://127.0.0.1:5000", uri) == []  # no store yet
    assert not (tmp_path / "mlflow.db").exists()
    reuters = store.use_experiment("reuters")
    shapes = store.use_experiment("shapes")  # any dataset a params file declares, or a study's
    mnist = store.use_experiment("mnist")

    def page(experiment):
        return f"http://127.0.0.1:5000/#/experiments/{experiment}/runs?workflowType=machine_learning"

    # every experiment by name, but MLflow's own Default (which the store holds too)
    assert store.runs_pages("http://127.0.0.1:5000/", uri) == [
        ("mnist", page(mnist)),
        ("reuters", page(reuters)),
        ("shapes", page(shapes)),
    ]
    assert store.runs_pages("http://127.0.0.1:5000", "http://127.0.0.1:5999") == []


def test_misplaced_artifacts_are_looked_for_in_the_experiments_named_or_every_one(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    uri = use_sqlite(tmp_path, monkeypatch)
    assert store.misplaced_artifacts(uri=uri) == []  # no store yet
    client = MlflowClient(uri)
    store.use_experiment("reuters")  # its artifacts beside mlflow.db
    lost = tmp_path / ".dvc" / "tmp" / "exps" / "run" / "a1b2c3" / "mlruns" / "1"
    shapes = client.create_experiment("shapes", artifact_location=lost.as_uri())
    assert store.misplaced_artifacts(uri=uri) == [(shapes, "shapes", lost.as_uri())]
    assert store.misplaced_artifacts(["reuters", "shapes"], uri) == [(shapes, "shapes", lost.as_uri())]
    # once renamed as the doctor's fix says, the dataset's experiment is no longer misplaced
    assert store.misplaced_artifacts(["reuters", "mnist"], uri) == []


TRAININGS = 3


@pytest.fixture
def prepared(tmp_path):
    make_reuters_raw(tmp_path / "raw", n=160)
    write_params(
        tmp_path,
        {"preprocess.reuters.max_len": 40, "train.reuters.epochs": 1, "train.reuters.batch_size_per_replica": 16},
    )
    result = run_pipeline("preprocess", "reuters", "--raw", "raw", "--out", "prepared", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return tmp_path


def train_at_once(folder: Path, db: Path) -> list[str]:
    """Start TRAININGS train stages at the same moment on one store; their run ids."""
    procs = []
    for i in range(TRAININGS):
        env = subprocess_env(MLFLOW_TRACKING_URI=f"sqlite:///{db}")
        args = [
            sys.executable,
            "-m",
            "pipeline",
            *train_args(model_dir=f"model{i}", history=f"history{i}.csv", summary=f"train{i}.json", curves=f"c{i}.png"),
        ]
        procs.append(
            subprocess.Popen(args, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    outputs = [p.communicate(timeout=900) for p in procs]
    for proc, (_, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]
    import json

    return [json.loads((folder / f"model{i}" / "run.json").read_text())["run_id"] for i in range(TRAININGS)]


def check_runs(db: Path, run_ids: list[str]) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("reuters")
    assert experiment is not None
    # beside the store, not in the working directory of whichever training came first
    assert experiment.artifact_location == (db.parent / "mlruns" / "reuters").as_uri()
    # MLflow's own "Default" experiment too (its default: relative to the working directory)
    assert client.get_experiment("0").artifact_location == (db.parent / "mlruns" / "0").as_uri()
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.info.run_id for r in runs) == sorted(run_ids)
    for run in runs:
        assert run.info.status == "FINISHED"
        artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
        assert artifacts.is_relative_to(db.parent / "mlruns" / "reuters")
        assert any(p.name.startswith("history") for p in artifacts.iterdir())


@pytest.mark.slow
def test_trainings_started_at_once_on_a_fresh_store_all_succeed(prepared):
    db = prepared / "store" / "mlflow.db"
    check_runs(db, train_at_once(prepared, db))


@pytest.mark.slow
def test_trainings_started_at_once_on_an_older_schema_migrate_it_once_and_keep_its_runs(prepared):
    import sqlalchemy
    from alembic import command
    from alembic.script import ScriptDirectory
    from mlflow.store.db import utils as db_utils

    db = prepared / "store" / "mlflow.db"
    db.parent.mkdir()
    engine = sqlalchemy.create_engine(f"sqlite:///{db}")
    config = db_utils._get_alembic_config(str(engine.url))
    revisions = [r.revision for r in ScriptDirectory.from_config(config).walk_revisions()]  # newest first
    old = revisions[5]
    db_utils.InitialBase.metadata.create_all(engine)  # as MLflow starts a store, then its migrations
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, old)
        connection.execute(
            sqlalchemy.text(
                "INSERT INTO experiments (name, artifact_location, lifecycle_stage) "
                "VALUES ('kept', '/nowhere', 'active')"
            )
        )
    engine.dispose()

    check_runs(db, train_at_once(prepared, db))
    from mlflow import MlflowClient

    assert MlflowClient(f"sqlite:///{db}").get_experiment_by_name("kept") is not None
    assert (db.parent / f"mlflow.db.{old}.bak").is_file()  # the copy kept before migrating
