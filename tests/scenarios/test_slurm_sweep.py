"""deploy/slurm/sweep.sbatch as a team uses it: a project whose prepared data is on a DVC remote
(a folder here) and whose commit is on a git remote (a bare repository here), a grid of two
experiments submitted with `sbatch --array` to a real one-node Slurm, each task in a clone of
its own; then, in a fresh clone of the git remote, `dvc exp pull` and `dvc exp show` list both
experiments with their metrics, their outputs come from the DVC remote, and the MLflow store
has one run per experiment. Before it, the script's refusals, run with bash alone (no Slurm,
no root)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, child_json, copy_project, dvc, git_repo, project_env, reuters_files_of, sh, write_params

SCRIPT = ROOT / "deploy" / "slurm" / "sweep.sbatch"
# as a user writes one: a comment and a blank line, which are not experiments
GRID = """\
# learning rate x embedding size, one experiment a line
train.reuters.learning_rate=0.002 train.reuters.conv1d.embedding_dim=7

train.reuters.learning_rate=0.001 train.reuters.conv1d.embedding_dim=16
"""
POINTS = [
    {"train.reuters.learning_rate": 0.002, "train.reuters.conv1d.embedding_dim": 7},
    {"train.reuters.learning_rate": 0.001, "train.reuters.conv1d.embedding_dim": 16},
]


def test_the_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0


@pytest.fixture
def submit_dir(tmp_path):
    """A project pushed to a bare git remote, then one commit more that is not pushed; what
    the script's task sees: the submit folder, its .venv, a task of an array."""
    env = project_env()
    remote = tmp_path / "remote.git"
    sh("git", "init", "-q", "--bare", "-b", "main", remote, cwd=tmp_path, env=env)
    repo = tmp_path / "project"
    repo.mkdir()
    (repo / "README.md").write_text("project\n")
    git_repo(repo, env)
    sh("git", "remote", "add", "origin", remote, cwd=repo, env=env)
    sh("git", "push", "-q", "origin", "main", cwd=repo, env=env)
    sh("git", "commit", "-q", "--allow-empty", "-m", "not pushed", cwd=repo, env=env)
    (repo / ".venv").symlink_to(Path(sys.prefix))
    (repo / "grid.txt").write_text(GRID)
    (tmp_path / "scratch").mkdir()
    env.update(
        SLURM_SUBMIT_DIR=str(repo),
        SLURM_JOB_ID="8",
        SLURM_ARRAY_JOB_ID="7",
        SLURM_ARRAY_TASK_ID="1",
        MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}",
        TMPDIR=str(tmp_path / "scratch"),
    )
    return repo, env


@pytest.mark.parametrize(
    "change, error",
    [
        (
            {"SLURM_ARRAY_TASK_ID": None},
            "SLURM_ARRAY_TASK_ID: submit it as an array, one task per experiment of grid.txt: sbatch --array=0-N",
        ),
        ({"SLURM_ARRAY_TASK_ID": "2"}, "error: grid.txt has 2 experiments, for tasks 0-1; this is task 2"),
        ({"GRID": "empty.txt"}, "error: empty.txt has no experiments (one a line: its -S overrides)"),
        ({"GRID": "nothere.txt"}, "error: no grid file nothere.txt (in {repo})"),
        (
            {"MLFLOW_TRACKING_URI": "sqlite:///mlflow.db"},
            "error: MLFLOW_TRACKING_URI=sqlite:///mlflow.db: give the "
            "sqlite file by absolute path (sqlite:////shared/mlflow.db)",
        ),
        ({"MLFLOW_TRACKING_URI": None}, "MLFLOW_TRACKING_URI: set MLFLOW_TRACKING_URI to your MLflow server"),
        (
            {"PIPELINE_IMAGE": "pipeline:0.1.0"},
            "error: sweep.sbatch runs in the submit folder's .venv, not in PIPELINE_IMAGE: unset it",
        ),
        ({}, "error: {head} is not on {remote}: git push it first"),
    ],
    ids=[
        "not-an-array",
        "task-past-the-grid",
        "empty-grid",
        "no-grid-file",
        "relative-sqlite",
        "no-tracking-uri",
        "image",
        "commit-not-pushed",
    ],
)
def test_a_task_that_cannot_run_its_experiment_says_why(submit_dir, change, error):
    """Before DVC runs, with the reason as the last line, and no clone left in the scratch folder."""
    repo, env = submit_dir
    (repo / "empty.txt").write_text("# nothing yet\n\n")
    change = dict(change)
    grid = change.pop("GRID", "grid.txt")
    for key, value in change.items():
        if value is None:
            env.pop(key)
        else:
            env[key] = value
    result = sh("bash", SCRIPT, grid, cwd=repo, env=env, check=False)
    head = sh("git", "rev-parse", "HEAD", cwd=repo, env=env).stdout.strip()
    expected = error.format(repo=repo, head=head, remote=repo.parent / "remote.git")
    assert result.returncode != 0 and result.stderr.strip().splitlines()[-1].endswith(expected), result.stderr
    assert list((repo.parent / "scratch").iterdir()) == []


@pytest.fixture(scope="module")
def swept(tmp_path_factory, dataset_files, slurm):
    """The project with its prepared data on the DVC remote and its commit on the git remote,
    then `sbatch --wait --array=0-1 deploy/slurm/sweep.sbatch grid.txt` from it; the tasks'
    logs and what a fresh clone of the git remote shows after `dvc exp pull origin`."""
    from fixtures import FileServer

    root = tmp_path_factory.mktemp("slurm-sweep")
    env = project_env()
    remote, storage, scratch = root / "remote.git", root / "dvc-remote", root / "scratch"
    scratch.mkdir()
    sh("git", "init", "-q", "--bare", "-b", "main", remote, cwd=root, env=env)
    # without the checkout's dvc.lock, whose MNIST outputs no remote here has
    repo = copy_project(root / "project", exclude=("dvc.lock",))
    write_params(
        repo,
        {
            "download.reuters.files": reuters_files_of(dataset_files),
            "train.reuters.epochs": 2,
            "train.reuters.batch_size_per_replica": 16,
        },
    )
    git_repo(repo, env)
    with FileServer(dataset_files) as server:
        env["PIPELINE_DATA_MIRROR"] = server.url
        dvc("repro", "preprocess@reuters", cwd=repo, env=env)
    env.pop("PIPELINE_DATA_MIRROR")  # the tasks' data comes from the DVC remote, or not at all
    dvc("remote", "add", "-d", "storage", storage, cwd=repo, env=env)
    sh("git", "add", "-A", cwd=repo, env=env)
    sh("git", "commit", "-qm", "prepared data on the DVC remote", cwd=repo, env=env)
    dvc("push", "-q", cwd=repo, env=env)
    sh("git", "remote", "add", "origin", remote, cwd=repo, env=env)
    sh("git", "push", "-q", "origin", "main", cwd=repo, env=env)
    commit = sh("git", "rev-parse", "HEAD", cwd=repo, env=env).stdout.strip()

    (repo / ".venv").symlink_to(Path(sys.prefix))
    (repo / "grid.txt").write_text(GRID)
    mlflow_db = root / "mlflow" / "mlflow.db"
    mlflow_db.parent.mkdir()
    job_env = {**env, **slurm, "MLFLOW_TRACKING_URI": f"sqlite:///{mlflow_db}", "TMPDIR": str(scratch)}
    # the node has 2 CPUs and no GPU: the script's --cpus-per-task and --gpus are a GPU node's
    submitted = sh(
        "sbatch",
        "--parsable",
        "--wait",
        "--array=0-1",
        "--cpus-per-task=1",
        "--gpus=0",
        "deploy/slurm/sweep.sbatch",
        "grid.txt",
        cwd=repo,
        env=job_env,
        check=False,
        timeout=1200,
    )
    job = submitted.stdout.strip().split(";")[0]
    log_files = [(repo / f"slurm-{job}_{task}.out") for task in (0, 1)]
    logs = [log.read_text() if log.is_file() else "" for log in log_files]
    assert submitted.returncode == 0, submitted.stderr + "".join(log[-4000:] for log in logs)

    fresh = root / "fresh"
    sh("git", "clone", "-q", remote, fresh, cwd=root, env=env)
    pulled = dvc("exp", "pull", "origin", cwd=fresh, env=env)
    shown = child_json(dvc("exp", "show", "--json", cwd=fresh, env=env))
    return {
        "root": root,
        "fresh": fresh,
        "env": env,
        "job": job,
        "commit": commit,
        "logs": logs,
        "pulled": pulled,
        "shown": shown,
        "mlflow_db": mlflow_db,
        "scratch": scratch,
    }


def experiments_of(shown: list) -> dict:
    """`dvc exp show --json`: {experiment name: (its baseline, its params.yaml, its Reuters
    metrics)} of each baseline."""
    found = {}
    for baseline in shown:
        for exp in baseline.get("experiments") or []:
            (rev,) = exp["revs"]
            data = rev["data"]
            found[exp["name"]] = (
                baseline["rev"],
                data["params"]["params.yaml"]["data"],
                data["metrics"]["reports/reuters/metrics.json"]["data"],
            )
    return found


def names(swept) -> list[str]:
    return [f"sweep-{swept['job']}-{task}" for task in (0, 1)]


@pytest.mark.slurm
@pytest.mark.slow
def test_a_fresh_clone_gathers_every_grid_point_with_its_metrics(swept):
    found = experiments_of(swept["shown"])
    assert sorted(found) == names(swept), swept["pulled"].stdout
    for name, point in zip(names(swept), POINTS):  # task N ran the grid's experiment N
        baseline, params, metrics = found[name]
        assert baseline == swept["commit"]
        assert params["train"]["reuters"]["learning_rate"] == point["train.reuters.learning_rate"]
        assert params["train"]["reuters"]["conv1d"]["embedding_dim"] == point["train.reuters.conv1d.embedding_dim"]
        assert params["train"]["reuters"]["epochs"] == 2  # the swept commit's, not the shipped 10
        assert 0 <= metrics["test_accuracy"] <= 1


@pytest.mark.slurm
@pytest.mark.slow
def test_each_experiment_is_one_mlflow_run_in_the_shared_store(swept):
    """Named after its DVC experiment, with the same test accuracy, its artifacts beside the
    shared store rather than in the clone that was deleted."""
    from mlflow import MlflowClient

    found = experiments_of(swept["shown"])
    c = MlflowClient(f"sqlite:///{swept['mlflow_db']}")
    experiment = c.get_experiment_by_name("reuters")
    assert experiment is not None
    runs = c.search_runs([experiment.experiment_id])
    assert sorted(r.data.tags["dvc.exp_name"] for r in runs) == names(swept)
    for run in runs:
        name = run.data.tags["dvc.exp_name"]
        point = POINTS[names(swept).index(name)]
        assert run.info.status == "FINISHED" and run.info.run_name == name
        assert run.data.tags["dvc.exp_baseline_rev"] == swept["commit"]
        assert {k: float(run.data.params[k]) for k in point} == point
        assert run.data.metrics["test_accuracy"] == pytest.approx(found[name][2]["test_accuracy"])
        artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
        assert artifacts.is_relative_to(swept["mlflow_db"].parent)
        assert (artifacts / "history.csv").is_file()


@pytest.mark.slurm
@pytest.mark.slow
def test_each_task_worked_in_a_scratch_clone_it_removed(swept):
    """Its first line says what it runs and where; the clone is gone; the log is DVC's and the
    training's lines, with no progress bars."""
    for name, log in zip(names(swept), swept["logs"]):
        first = log.splitlines()[0]
        assert first.startswith(f"{name}: dvc exp run evaluate@reuters -S train.reuters.learning_rate=")
        where = re.search(r", in (\S+)$", first)
        assert where, first
        clone = Path(where.group(1))
        assert clone.parent == swept["scratch"] and clone.name.startswith(f"pipeline-{name}.")
        assert not clone.exists()
        assert f"Pushed experiment {name} to Git remote" in log
        assert "Missing cache files" not in log  # dvc exp push had every output to push
        assert "\r" not in log
    assert list(swept["scratch"].iterdir()) == []


@pytest.mark.slurm
@pytest.mark.slow
def test_each_experiments_outputs_are_on_the_dvc_remote(swept):
    """A teammate who gathered the experiments without their outputs (`dvc exp pull
    --no-cache`: params and metrics are in git) checks one out and `dvc pull`s its stages: the
    model it trained, and the data, come from the DVC remote and match its dvc.lock."""
    import yaml

    clone, env = swept["root"] / "teammate", swept["env"]
    sh("git", "clone", "-q", swept["root"] / "remote.git", clone, cwd=swept["root"], env=env)
    dvc("exp", "pull", "--no-cache", "origin", cwd=clone, env=env)
    assert not (clone / ".dvc" / "cache").exists()
    refs = sh(
        "git", "for-each-ref", "--format=%(refname:lstrip=-1) %(objectname)", "refs/exps", cwd=clone, env=env
    ).stdout
    commits = dict(line.split() for line in refs.splitlines())  # DVC keeps an experiment as a git ref
    assert sorted(commits) == names(swept)
    models: set[str] = set()
    for name in names(swept):
        sh("git", "checkout", "-q", commits[name], cwd=clone, env=env)
        dvc("pull", "-q", "--with-deps", "evaluate@reuters", cwd=clone, env=env)
        status = dvc("status", "--with-deps", "evaluate@reuters", cwd=clone, env=env).stdout
        assert "Data and pipelines are up to date." in status, status
        assert (clone / "models" / "reuters" / "model.keras").is_file()
        lock = yaml.safe_load((clone / "dvc.lock").read_text())
        models.update(out["md5"] for out in lock["stages"]["train@reuters"]["outs"] if out["path"] == "models/reuters")
    assert len(models) == 2  # each its own model
