"""A sweep as a user runs one on a fresh clone: the queued sweep's block of docs/sweeps.md (`dvc
exp run --queue` with DVC's grid syntax, then `--run-all -j 2`, then `dvc queue status`), pasted
as it stands, as the repository's first trainings, into MLflow's default store. The README's
session does not run that block again: this is the one place the queued sweep runs."""

import contextlib
import sys
import threading
from pathlib import Path

import pytest
from support.datasets import reuters_files_of
from support.processes import child_json, dvc, git_repo, project_env, sh
from support.project import copy_project, write_params
from support.readme import shell_blocks

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def readme_sweep() -> str:
    (block,) = [b for b in shell_blocks() if b.syntax == "bash" and "dvc exp run --run-all" in b.code]
    assert block.skip_reason and "tests/scenarios/test_sweep.py" in block.skip_reason, (
        "the README's session would run it again"
    )
    return block.code


@contextlib.contextmanager
def a_worker_left_behind_stopped(repo, env):
    """While the body runs `dvc exp run --run-all`, do what docs/sweeps.md tells a user to when
    it keeps waiting after its queue is done: a queue worker whose monitor thread died reading
    an empty broker message (iterative/dvc#10428) never leaves by itself, so once no experiment
    is Queued or Running, `dvc queue stop` ends it (and says so on stdout)."""
    logs = repo / ".dvc" / "tmp" / "exps" / "celery"
    done = threading.Event()

    def lost_its_monitor(log) -> bool:
        try:
            return "(monitor)" in log.read_text(errors="replace")
        except FileNotFoundError:  # DVC cleaned it up meanwhile
            return False

    def watch():
        while not done.wait(5):
            dead = [f.name for f in logs.glob("*.out") if lost_its_monitor(f)]
            if dead:
                status = dvc("queue", "status", cwd=repo, env=env, check=False).stdout
                if not any(line.split()[-1:] in (["Queued"], ["Running"]) for line in status.splitlines()):
                    dvc("queue", "stop", cwd=repo, env=env)
                    print(f"the queue was done but {', '.join(dead)} had lost its monitor: dvc queue stop")
                    return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


@pytest.fixture(scope="module")
def swept(tmp_path_factory, dataset_files):
    from support.datasets import FileServer

    repo = copy_project(tmp_path_factory.mktemp("sweep") / "project")
    write_params(
        repo,
        {
            "download.reuters.files": reuters_files_of(dataset_files),
            "train.reuters.epochs": 2,
            "train.reuters.batch_size_per_replica": 16,
        },
    )
    env = project_env()  # MLflow's default store: mlflow.db in the repository
    git_repo(repo, env)
    with FileServer(dataset_files) as server:
        env["PIPELINE_DATA_MIRROR"] = server.url
        dvc("repro", "preprocess@reuters", cwd=repo, env=env)  # data only: no training yet
    sh("git", "add", "-A", cwd=repo, env=env)
    sh("git", "commit", "-qm", "prepared data", cwd=repo, env=env)
    assert not (repo / "mlflow.db").exists()
    # Eight stage processes, two at a time: 105 s alone, 431 s in a full run (beside the trained
    # project's repro and the image builds, on 2 cores), over 1,200 s once on a slower host.
    with a_worker_left_behind_stopped(repo, env):
        result = sh("bash", "-euo", "pipefail", "-c", readme_sweep(), cwd=repo, env=env, timeout=3000)
    states = [line.split()[-1] for line in result.stdout.splitlines() if line.split()[-1:] in (["Success"], ["Failed"])]
    assert states == ["Success"] * 4, result.stdout[-3000:]  # dvc queue status: each experiment's state
    return {"path": repo, "env": env, "result": result}


def test_every_experiment_of_the_queue_is_a_complete_run(swept):
    from mlflow import MlflowClient

    path = swept["path"]
    shown = child_json(dvc("exp", "show", "--json", cwd=path, env=swept["env"]))
    experiments = {exp["name"]: exp for baseline in shown for exp in (baseline.get("experiments") or [])}
    assert len(experiments) == 4, swept["result"].stdout[-3000:]
    c = MlflowClient(f"sqlite:///{path / 'mlflow.db'}")
    experiment = c.get_experiment_by_name("reuters")
    assert experiment is not None
    assert Path(experiment.artifact_location.removeprefix("file://")).parent == path / "mlruns"
    runs = c.search_runs([experiment.experiment_id])
    assert sorted(r.data.tags["dvc.exp_name"] for r in runs) == sorted(experiments)
    grid = sorted(
        (r.data.params["train.reuters.learning_rate"], r.data.params["train.reuters.conv1d.embedding_dim"])
        for r in runs
    )
    assert grid == [("0.001", "16"), ("0.001", "7"), ("0.002", "16"), ("0.002", "7")]
    for run in runs:
        assert run.info.status == "FINISHED"
        assert run.info.run_name == run.data.tags["dvc.exp_name"]
        assert run.data.tags["mlflow.source.name"] == "train@reuters"  # the runs table's Source
        assert {"test_accuracy", "best_epoch", "train_seconds"} <= set(run.data.metrics)
        assert run.data.params["distribute.replicas"] == "1"


def test_artifacts_open_after_dvc_removed_its_copies(swept):
    import csv

    import keras
    import mlflow
    from mlflow import MlflowClient
    from mlflow.artifacts import download_artifacts

    path = swept["path"]
    assert not [p for p in (path / ".dvc" / "tmp" / "exps").glob("tmp*") if p.is_dir()]  # the copies are gone
    # (the model's lookup by run goes through the current tracking URI, not the argument)
    mlflow.set_tracking_uri(f"sqlite:///{path / 'mlflow.db'}")
    c = MlflowClient(f"sqlite:///{path / 'mlflow.db'}")
    experiment = c.get_experiment_by_name("reuters")
    assert experiment is not None
    runs = c.search_runs([experiment.experiment_id])
    for run in runs:
        out = path.parent / run.info.run_id
        out.mkdir()
        history = download_artifacts(
            run_id=run.info.run_id,
            artifact_path="history.csv",
            dst_path=str(out),
            tracking_uri=f"sqlite:///{path / 'mlflow.db'}",
        )
        assert [row["epoch"] for row in csv.DictReader(open(history))] == ["1", "2"]
        confusion = download_artifacts(
            run_id=run.info.run_id,
            artifact_path="evaluation",
            dst_path=str(out),
            tracking_uri=f"sqlite:///{path / 'mlflow.db'}",
        )
        assert (Path(confusion) / "confusion.png").stat().st_size > 0
    (path.parent / "m").mkdir()
    model = download_artifacts(artifact_uri=f"runs:/{runs[0].info.run_id}/model", dst_path=str(path.parent / "m"))
    assert (Path(model) / "MLmodel").is_file()
    loaded = keras.models.load_model(next(Path(model).rglob("*.keras")))
    assert loaded.output.shape[-1] == 46


def test_the_readmes_comparisons_of_a_sweep(swept):
    """docs/sweeps.md: dvc exp show with only what changed, best first; pipeline compare of
    the best and the worst by DVC experiment name; dvc exp branch of the best."""
    import csv
    import io

    path, env = swept["path"], swept["env"]
    shown = dvc(
        "exp",
        "show",
        "--only-changed",
        "--sort-by",
        "reports/reuters/metrics.json:test_accuracy",
        "--sort-order",
        "desc",
        "--csv",
        cwd=path,
        env=env,
    ).stdout
    rows = [r for r in csv.DictReader(io.StringIO(shown)) if r["typ"] != "baseline"]
    assert len(rows) == 4
    # a clone has both datasets' metrics files: DVC names a column by its file when two share a name
    (column,) = [c for c in rows[0] if c in ("test_accuracy", "reports/reuters/metrics.json:test_accuracy")]
    accuracies = [float(r[column]) for r in rows]
    assert accuracies == sorted(accuracies, reverse=True)
    assert {"train.reuters.learning_rate", "train.reuters.conv1d.embedding_dim"} <= set(rows[0])
    assert "train.reuters.batch_size_per_replica" not in rows[0]  # equal in every experiment
    best, worst = rows[0]["Experiment"], rows[-1]["Experiment"]

    compared = sh(sys.executable, "-m", "pipeline", "compare", best, worst, cwd=path, env=env).stdout
    assert "test_accuracy" in compared and best in compared and worst in compared
    r = rows[0]
    for key in ("train.reuters.learning_rate", "train.reuters.conv1d.embedding_dim"):
        assert (key in compared) == (r[key] != rows[-1][key]), key
    assert "train.reuters.batch_size_per_replica" not in compared

    dvc("exp", "branch", best, "best-sweep", cwd=path, env=env)
    diff = sh("git", "diff", "main", "best-sweep", "--", "params.yaml", cwd=path, env=env).stdout
    assert sum(1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")) <= 2
