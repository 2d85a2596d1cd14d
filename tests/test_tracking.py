import subprocess

import pytest
import yaml

from helpers import run_pipeline
from pipeline import tracking


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@e", "PATH": "/usr/bin:/bin"})


def test_default_store_is_sqlite_in_the_repo_root(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    assert tracking.tracking_uri() == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert tracking.tracking_uri() == "http://127.0.0.1:5000"


def test_a_dvc_temp_experiment_logs_to_the_main_checkout(tmp_path):
    copy = tmp_path / ".dvc" / "tmp" / "exps" / "tmpabc123"
    copy.mkdir(parents=True)
    assert tracking.repo_root(copy) == tmp_path.resolve()


def test_lineage_tags(tmp_path, monkeypatch):
    git("init", "-q", cwd=tmp_path)
    (tmp_path / "params.yaml").write_text("a: 1\n")
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {
        "preprocess@x": {"outs": [{"path": "data/prepared/x", "md5": "abc.dir"}]}}}))
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "c", cwd=tmp_path)
    (tmp_path / "data" / "prepared" / "x").mkdir(parents=True)
    monkeypatch.setenv("DVC_EXP_NAME", "bold-cat")
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")  # DVC rewrites it mid-repro
    tags = tracking.lineage_tags([tmp_path / "data" / "prepared" / "x"], root=tmp_path)
    assert tags["git.dirty"] == "false"
    assert len(tags["git.commit"]) == 40 and tags["mlflow.source.git.commit"] == tags["git.commit"]
    assert tags["dvc.exp_name"] == "bold-cat"
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"stages": {
        "preprocess@x": {"outs": [{"path": "data/prepared/x", "md5": "abc.dir"}]}}}))
    (tmp_path / "params.yaml").write_text("a: 2\n")  # as `dvc exp run -S` does: params, not code
    (tmp_path / "docs").mkdir()
    for doc in ("README.md", "docs/notes.md", "docs/figure.png"):  # documentation, not code
        (tmp_path / doc).write_text("words\n")
        git("add", doc, cwd=tmp_path)
    tags = tracking.lineage_tags(["data/prepared/x"], root=tmp_path)
    assert tags["git.dirty"] == "false" and "git.changed_files" not in tags
    assert tags["dvc.data.data/prepared/x"] == "abc.dir"
    assert tracking._commit_suffix(tmp_path) == "-" + tags["git.commit"][:7]
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py", cwd=tmp_path)  # staged but not committed: code that differs
    tags = tracking.lineage_tags([], root=tmp_path)
    assert tags["git.dirty"] == "true" and tags["git.changed_files"] == "code.py"
    assert tracking._commit_suffix(tmp_path).endswith("-dirty")


def use_sqlite(tmp_path, monkeypatch) -> str:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    return uri


def test_experiments_are_tagged_as_model_training_and_a_users_kind_is_kept(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    uri = use_sqlite(tmp_path, monkeypatch)
    client = MlflowClient(uri)
    kind = tracking.EXPERIMENT_KIND_TAG
    new = tracking.use_experiment("reuters")
    assert client.get_experiment(new).tags[kind] == "custom_model_development"
    # made before the tag (by an earlier pipeline): tagged when next used, and once
    old = client.create_experiment("mnist")
    assert kind not in client.get_experiment(old).tags
    assert tracking.use_experiment("mnist") == old
    assert client.get_experiment(old).tags[kind] == "custom_model_development"
    client.set_experiment_tag(old, kind, "genai_development")  # a user's choice, in the UI
    tracking.use_experiment("mnist")
    assert client.get_experiment(old).tags[kind] == "genai_development"


def test_a_runs_source_is_its_dvc_stage_or_the_command(tmp_path, monkeypatch):
    import mlflow
    from mlflow import MlflowClient

    uri = use_sqlite(tmp_path, monkeypatch)
    monkeypatch.delenv("DVC_STAGE", raising=False)
    assert tracking.source_tags("train", "reuters") == {"mlflow.source.name": "pipeline train reuters",
                                                        "mlflow.source.type": "LOCAL"}
    monkeypatch.setenv("DVC_STAGE", "train@reuters")
    with tracking.TrainingRun.open("reuters", "reuters-fit-1rep-float32") as run:
        pass
    tags = MlflowClient(uri).get_run(run.run_id).data.tags
    assert tags["mlflow.source.name"] == "train@reuters"  # not MLflow's `__main__.py`
    assert tags["mlflow.source.type"] == "LOCAL"
    assert mlflow.active_run() is None


def test_runs_pages_link_each_experiment_to_its_runs_table(tmp_path, monkeypatch):
    uri = use_sqlite(tmp_path, monkeypatch)
    assert tracking.runs_pages("http://127.0.0.1:5000", ["reuters"], uri) == []  # no store yet
    assert not (tmp_path / "mlflow.db").exists()
    experiment = tracking.use_experiment("reuters")
    assert tracking.runs_pages("http://127.0.0.1:5000/", ["reuters", "mnist"], uri) == [
        ("reuters", f"http://127.0.0.1:5000/#/experiments/{experiment}/runs?workflowType=machine_learning")]
    assert tracking.runs_pages("http://127.0.0.1:5000", ["reuters"], "http://127.0.0.1:5999") == []


@pytest.mark.parametrize("uri,message", [
    ("foo://bar", "foo://bar: cannot be opened as an MLflow tracking store (Model registry functionality is "
                  "unavailable; got unsupported URI 'foo://bar' for model registry data storage)"),
    ("file:///{tmp}/mlruns", "file:///{tmp}/mlruns: cannot be opened as an MLflow tracking store (The filesystem "
                             "tracking backend (e.g., './mlruns') is in maintenance mode and will not receive "
                             "further updates)"),
    ("sqlite:///{tmp}/notes.db", "sqlite:///{tmp}/notes.db: {tmp}/notes.db is not an MLflow store (file is not a "
                                 "database); set MLFLOW_TRACKING_URI to the store that holds the runs, or move the "
                                 "file away"),
])
def test_a_store_that_cannot_be_opened_is_a_tracking_error_naming_it(tmp_path, monkeypatch, uri, message):
    """What MLflow raises on opening the store in force is the user's to fix, not a bug of the
    project: check_tracking (which every command calls before it logs or reads) says which
    store, in one line; nothing is made where it pointed."""
    from pipeline.errors import TrackingError
    from pipeline.tracking import check_tracking

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    (tmp_path / "notes.db").write_text("notes, not a database\n")
    with pytest.raises(TrackingError) as caught:
        check_tracking(uri.format(tmp=tmp_path))
    assert str(caught.value).startswith(message.format(tmp=tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_a_store_that_cannot_be_opened_stops_a_command_in_one_line(tmp_path):
    from helpers import subprocess_env

    result = run_pipeline("compare", "a", "b", cwd=tmp_path, env=subprocess_env(MLFLOW_TRACKING_URI="foo://bar"))
    assert result.returncode == 1
    assert result.stderr.startswith("error: foo://bar: cannot be opened as an MLflow tracking store (")
    assert len(result.stderr.splitlines()) == 1 and "this is a bug" not in result.stderr
