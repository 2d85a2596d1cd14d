"""Past one machine: the two-node Slurm cluster of deploy/cluster/up.sh (node1 and node2, each
with its own hostname and network stack, the project on the file system both see, PostgreSQL
and an MLflow server beside them), as docs/multi-node.md runs it. On it: deploy/slurm/train.sbatch
trains Reuters with one worker per node, then again with node2 lost mid-training, requeued and
resumed; deploy/slurm/tune.sbatch's array tasks share one study on PostgreSQL, one of them on a
node that is lost mid-trial; and deploy/slurm/sweep.sbatch runs a grid of two experiments, one
per node, each in a clone of its own, gathered in a fresh clone of the git remote with `dvc exp
pull`, their outputs on a DVC remote (a folder here). The tests share the one cluster, in this
module's order, since two of them stop a node. Before them, the sweep script's refusals, run
with bash alone (no Slurm, no root)."""

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.datasets import SHORT_CUSTOM_REUTERS, prepared_reuters, reuters_files_of
from support.processes import child_json, dvc, git_repo, project_env, run_pipeline, sh, subprocess_env
from support.project import ROOT, copy_project, write_params
from support.servers import wait_for

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


@pytest.mark.parametrize("script", [SCRIPT, *sorted((ROOT / "deploy" / "cluster").glob("*.sh"))], ids=lambda p: p.name)
def test_the_script_is_valid_bash(script):
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0


def test_node_sh_names_the_nodes_it_knows():
    """A node the cluster does not have, or an action it does not take: one line, no change."""
    for args, line in (
        (["stop", "node3"], "error: node3: not a node of the cluster (node1 node2)"),
        (["reboot", "node1"], "error: reboot: expected stop or start"),
    ):
        done = subprocess.run(
            ["bash", str(ROOT / "deploy" / "cluster" / "node.sh"), *args], capture_output=True, text=True
        )
        assert (done.returncode, done.stderr.strip()) == (1, line)


UP = ROOT / "deploy" / "cluster" / "up.sh"


def test_up_sh_refuses_a_folder_its_users_cannot_enter(tmp_path):
    """The PostgreSQL server runs as postgres: a folder under one closed to others (pytest's,
    as mktemp -d's) is refused first, in one line, with nothing started or left."""
    folder = tmp_path / "cluster"
    done = subprocess.run(["bash", str(UP), str(folder)], capture_output=True, text=True)
    assert (done.returncode, done.stderr.strip().splitlines()) == (
        1,
        [
            f"error: {folder}: the postgres user cannot enter it (a folder above it is closed to others, as "
            "mktemp -d makes its own); choose a folder under one that others can enter, such as /var/tmp"
        ],
    )
    assert not folder.exists()


def in_namespaces_of_its_own(script: str) -> subprocess.CompletedProcess:
    """SCRIPT (bash) in network and mount namespaces of its own, with a /run/netns of its own:
    a bridge, nodes and daemons apart from the session's cluster."""
    Path("/run/netns").mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        ["unshare", "--mount", "--net", "--propagation", "private", "bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_up_sh_failing_midway_takes_down_what_it_started(tmp_path):
    """up.sh in network and mount namespaces of its own (its bridge, nodes and daemons apart from
    the session's cluster), its PostgreSQL on a port it may not bind: it fails after the bridge,
    the nodes, slurmctld and the slurmds are up, says why, and leaves none of them, nor its
    folder, once it returns (down.sh waits for the daemons it stopped); so the next up.sh finds
    no bridge in its way."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="pipeline-midway-", dir="/var/tmp"))
    run = tmp_path / "run"
    script = f"""
        mount -t tmpfs tmpfs /run/netns
        PIPELINE_CLUSTER_PG_PORT=80 PIPELINE_CLUSTER_RUN={run} bash {UP} {folder} >/dev/null
        echo "exit $?"
        ip link show plcluster0 >/dev/null 2>&1 && echo "left: the bridge"
        ls /run/netns | sed 's/^/left: /'
        grep -l "SLURM_CONF={folder}/" /proc/[0-9]*/environ 2>/dev/null | sed 's/^/left: /'
        true
    """
    done = in_namespaces_of_its_own(script)
    assert done.stdout.splitlines() == ["exit 1"], done.stdout + done.stderr
    assert done.stderr.splitlines()[0].startswith("error: PostgreSQL did not start on 10.213.7.1:80: "), done.stderr
    assert done.stderr.splitlines()[1] == f"up.sh: taking down what it started (deploy/cluster/down.sh {folder})"
    assert not folder.exists() and not run.exists()


LEFT_BEHIND = """
    mount -t tmpfs tmpfs /run/netns
    ip link add plcluster0 type bridge
    ip netns add pipeline-node1
    ip netns add pipeline-node2
    mkdir -p {run} {old}/node1 {old}/node2
    touch {old}/slurm.conf
    echo {old} > {run}/dir
    {daemon}
    daemon=$!
    echo $daemon > {run}/slurmctld.pid
    PIPELINE_CLUSTER_RUN={run} bash {up} {new} >/dev/null
    echo "exit $?"
    ip link show plcluster0 >/dev/null 2>&1 && echo "left: the bridge"
    ls /run/netns | sed 's/^/left: /'
    kill $daemon 2>/dev/null && echo "running: the process of slurmctld's pid"
    true
"""


def left_behind(tmp_path, command: str | None) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """up.sh, in network and mount namespaces of its own, on this machine as a killed run of
    the cluster leaves it: its bridge, the nodes' namespaces, its folder and the pids in
    /run/pipeline-cluster; at slurmctld's pid, a process that has exited (None) or one running
    as COMMAND (sleep, under that name). The new folder is under pytest's, which postgres
    cannot enter: up.sh stops there, once it has dealt with the old one."""
    old, run, new = tmp_path / "old", tmp_path / "run", tmp_path / "new"
    daemon = "true &"
    if command:
        (tmp_path / "bin").mkdir()
        sleep = shutil.which("sleep")
        assert sleep is not None
        shutil.copy(sleep, tmp_path / "bin" / command)
        daemon = f"{tmp_path / 'bin' / command} 60 >/dev/null 2>&1 &"
    script = LEFT_BEHIND.format(run=run, old=old, new=new, up=UP, daemon=daemon)
    return in_namespaces_of_its_own(script), old, run


@pytest.mark.parametrize("command", [None, "sleep"], ids=["exited", "another-process-since"])
def test_up_sh_takes_away_a_cluster_whose_run_was_killed(tmp_path, command):
    """A run killed with its cluster up (SIGKILL, a lost session) leaves the bridge, the nodes'
    namespaces and the folder, with no daemon left: the next up.sh says so in one line and
    takes them away (down.sh) before it starts, where it refused for the bridge. A pid the
    run left that names another process since is not the daemon's: that process is left
    alone, neither counted as the cluster nor signalled."""
    done, old, run = left_behind(tmp_path, command)
    assert done.stdout.splitlines() == ["exit 1"] + (["running: the process of slurmctld's pid"] if command else [])
    assert done.stderr.splitlines() == [
        f"up.sh: the cluster in {old} no longer runs (none of its daemons is left): taking away what it left",
        f"error: {tmp_path / 'new'}: the postgres user cannot enter it (a folder above it is closed to others, as "
        "mktemp -d makes its own); choose a folder under one that others can enter, such as /var/tmp",
    ], done.stdout + done.stderr
    assert not old.exists() and not run.exists()


def test_up_sh_leaves_a_cluster_that_runs_alone(tmp_path):
    """One of the cluster's daemons still runs: up.sh refuses in one line, naming its folder,
    and leaves everything as it was."""
    done, old, run = left_behind(tmp_path, "slurmctld")
    assert done.stdout.splitlines() == [
        "exit 1",
        "left: the bridge",
        "left: pipeline-node1",
        "left: pipeline-node2",
        "running: the process of slurmctld's pid",
    ]
    assert done.stderr.splitlines() == [
        f"error: a cluster is up on this machine, in {old} (deploy/cluster/down.sh stops it)"
    ]
    assert (old / "slurm.conf").exists() and (run / "dir").exists()


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


# --- the cluster's helpers ---------------------------------------------------------------------

TRAIN_SBATCH = ROOT / "deploy" / "slurm" / "train.sbatch"
TUNE_SBATCH = ROOT / "deploy" / "slurm" / "tune.sbatch"
NODE = ROOT / "deploy" / "cluster" / "node.sh"


def job_state(job: str, env: dict) -> dict:
    """`scontrol show job`'s fields of `job` (of its first task, for an array)."""
    shown = sh("scontrol", "show", "job", "-o", job, cwd=ROOT, env=env, check=False).stdout.splitlines()
    return dict(re.findall(r"(\w+)=(\S*)", shown[0])) if shown else {}


def node(action: str, name: str, cluster: dict) -> None:
    """`node.sh ACTION NAME` as docs/multi-node.md writes it: no folder, cluster.env not sourced
    (the cluster's folder is the session's, not the default): it finds the cluster up here."""
    env = subprocess_env(**cluster["env"])
    sh("bash", NODE, action, name, cwd=ROOT, env={k: v for k, v in env.items() if k != "PIPELINE_CLUSTER_DIR"})
    if action == "start":  # back in service: idle again
        wait_for(
            f"{name} idle",
            lambda: "idle" in sh("sinfo", "-h", "-n", name, "-o", "%t", cwd=ROOT, env=env).stdout,
        )


@pytest.fixture
def reuters_project(tmp_path):
    """Prepared fixture Reuters where train.sbatch looks for it, the suite's .venv as the
    project's: what the nodes run, on the file system they share."""
    prepared_reuters(tmp_path, out="data/prepared/reuters")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    return tmp_path


def train_job(project: Path, *options: str) -> list:
    """`sbatch` of deploy/slurm/train.sbatch with one task a node on both nodes (its GPU line
    overridden), its log project/slurm.out."""
    return [
        "sbatch",
        *options,
        "--nodes=2",
        "--ntasks-per-node=1",
        "--gpus-per-node=0",
        f"--output={project / 'slurm.out'}",
        TRAIN_SBATCH,
    ]


def mlflow_run_of(log: str, cluster: dict):
    from mlflow import MlflowClient

    (run_id,) = re.findall(r"MLflow run ([0-9a-f]{32})", log)[-1:]
    client = MlflowClient(cluster["env"]["MLFLOW_TRACKING_URI"])
    return client, client.get_run(run_id)


# --- one training across both nodes --------------------------------------------------------------


@pytest.mark.slurm
@pytest.mark.slow
def test_one_training_across_both_nodes_is_one_run_of_two_workers(reuters_project, cluster):
    """deploy/slurm/train.sbatch itself with one worker per node (its GPU line overridden): the
    same final weights on both, the chief's outputs and one MLflow run that names both hosts,
    and a test accuracy within reach of one worker's on the same data."""
    project = reuters_project
    env = subprocess_env(**cluster["env"])
    result = sh(*train_job(project, "--wait"), cwd=project, env=env, check=False, timeout=900)
    log = (project / "slurm.out").read_text() if (project / "slurm.out").exists() else ""
    assert result.returncode == 0, result.stderr + log[-4000:]
    digests = re.findall(r"\[worker-(\d)\]: final weights sha256 ([0-9a-f]{64})", log)
    assert sorted(d[0] for d in digests) == ["0", "1"] and len({d[1] for d in digests}) == 1
    summary = json.loads((project / "reports" / "reuters" / "train.json").read_text())
    measured = json.loads((project / "reports" / "reuters" / "measurements.json").read_text())
    assert (measured["workers"], measured["replicas"]) == (2, 2)
    assert "reuters: 2 replica(s) on 2 worker(s), MultiWorkerMirroredStrategy," in log
    assert summary["epochs_trained"] == 2 and summary["best_epoch"] in (1, 2)
    assert len((project / "reports" / "reuters" / "history.csv").read_text().splitlines()) == 1 + 2
    assert (project / "models" / "reuters" / "model.keras").is_file()
    assert not (project / ".backup" / "train-reuters").exists()
    _, run = mlflow_run_of(log, cluster)
    assert (run.data.params["distribute.nodes"], run.data.params["distribute.hosts"]) == ("2", "node1,node2")
    assert run.info.status == "FINISHED" and run.data.tags["host"] == "node1"  # the chief's

    # one worker, on this machine, on the same data and global batch: each model's test accuracy
    (project / "one").mkdir()
    write_params(project / "one", {**SHORT_CUSTOM_REUTERS, "train.reuters.batch_size_per_replica": 16})
    one = run_pipeline(
        *("train", "reuters", "--params", "one/params.yaml", "--data", "data/prepared/reuters"),
        *("--model-dir", "one/model", "--history", "one/history.csv", "--summary", "one/train.json"),
        *("--curves", "one/curves.png"),
        cwd=project,
        env=subprocess_env(MLFLOW_TRACKING_URI=f"sqlite:///{project / 'one.db'}"),
    )
    assert one.returncode == 0, one.stderr
    accuracy = child_json(
        sh(
            sys.executable,
            "-c",
            "import json, sys; from pathlib import Path; from pipeline.runtime import imports; "
            "imports.skip_keras_extras(); "
            "from pipeline.training import evaluation; from pipeline.config.loading.loader import load_params; "
            "from pipeline.data import prepared; "
            "cfg = load_params('params.yaml', 'reuters').evaluate; data = prepared.read('data/prepared/reuters'); "
            "print(json.dumps([evaluation.evaluate(Path(m), data, cfg).metrics['test_accuracy'] "
            "for m in sys.argv[1:]]))",
            "models/reuters",
            "one/model",
            cwd=project,
            env=subprocess_env(),
            check=False,
        )
    )
    assert accuracy[0] == pytest.approx(accuracy[1], abs=0.15), accuracy


# --- one tuning study across both nodes, a node lost mid-trial ------------------------------------


def running_trial_on(node_name: str, storage: str, study: str, client):
    """The trial a worker on `node_name` is training (an epoch reported), if any. Read as a
    worker opens it (pipeline/tuning/storage.py), and not before the tasks have made Optuna's
    tables: making them here too would race the tasks, as they race each other."""
    import optuna
    from optuna.trial import TrialState

    from pipeline.config.loading.loader import load_params
    from pipeline.tuning import storage as storages

    if not storages.holds_studies(storage):
        return None
    try:
        opened = storages.open_storage(storage, load_params(ROOT / "params.yaml", "reuters").tune)
        trials = optuna.load_study(study_name=study, storage=opened).trials
    except KeyError:  # not made yet
        return None
    for trial in trials:
        run_id = trial.user_attrs.get("mlflow_run_id")
        if trial.state == TrialState.RUNNING and trial.intermediate_values and run_id:
            if client.get_run(run_id).data.tags.get("optuna.worker", "").startswith(f"{node_name}:"):
                return trial
    return None


@pytest.mark.slurm
@pytest.mark.slow
def test_one_study_across_both_nodes_survives_a_node_lost_mid_trial(trained_project, cluster, tmp_path):
    """deploy/slurm/tune.sbatch as an array of two tasks, one a node, on the cluster's PostgreSQL
    and MLflow server: node2 is lost while its task trains a trial; the heartbeat fails that
    trial, node1's task trains its params again, and the study ends with its budget exactly,
    every trial a nested run of the study's one parent run."""
    from mlflow import MlflowClient
    from optuna.trial import TrialState

    from pipeline.tuning import attributes, studies

    optuna = studies.quiet_optuna()
    project = trained_project.copy(tmp_path / "project")
    (project / ".venv").symlink_to(Path(sys.prefix))
    env = {**trained_project.env, **cluster["env"]}
    storage, client = env["PIPELINE_TUNE_STORAGE"], MlflowClient(env["MLFLOW_TRACKING_URI"])
    submitted = sh(
        "sbatch",
        "--parsable",
        "--no-requeue",
        "--array=0-1",
        "--cpus-per-task=2",  # a node's two CPUs: one task a node
        f"--output={tmp_path}/slurm-%a.out",
        TUNE_SBATCH,
        "--study",
        "two-nodes",
        "-S",
        "tune.reuters.trials=4",
        "-S",
        "tune.reuters.heartbeat_seconds=2",
        # trials long enough that node2's is still training when the node is lost
        "-S",
        "train.reuters.epochs=30",
        "-S",
        "train.reuters.early_stopping.patience=null",
        "-S",
        "tune.reuters.pruner=none",
        cwd=project,
        env=env,
    )
    job = submitted.stdout.strip().split(";")[0]
    killed = wait_for("a trial training on node2", lambda: running_trial_on("node2", storage, "two-nodes", client))
    node("stop", "node2", cluster)
    try:
        wait_for(
            "both array tasks ended",
            lambda: all(
                job_state(f"{job}_{task}", env).get("JobState") in ("COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED")
                for task in (0, 1)
            ),
            timeout=900,
        )
    finally:
        node("start", "node2", cluster)
    logs = [(tmp_path / f"slurm-{i}.out").read_text() if (tmp_path / f"slurm-{i}.out").exists() else "" for i in (0, 1)]
    tasks = {job_state(f"{job}_{task}", env)["NodeList"]: task for task in (0, 1)}  # Slurm chose
    assert sorted(tasks) == ["node1", "node2"]
    kept, lost = tasks["node1"], tasks["node2"]
    assert job_state(f"{job}_{kept}", env)["JobState"] == "COMPLETED", "\n".join(log[-3000:] for log in logs)
    assert job_state(f"{job}_{lost}", env)["JobState"] == "NODE_FAIL"
    assert "study two-nodes: 4 complete, 0 pruned, 1 failed of 4 trials" in logs[kept], logs[kept][-3000:]
    assert "its worker went silent; failed, queued again with the same params" in logs[kept]

    trials = optuna.load_study(study_name="two-nodes", storage=storage).trials
    numbers = [t.number for t in trials]
    assert len(numbers) == len(set(numbers)) == 5
    assert sum(t.state == TrialState.COMPLETE for t in trials) == 4  # the budget, exactly
    (failed,) = [t for t in trials if t.state == TrialState.FAIL]
    assert failed.number == killed.number
    (again,) = [t for t in trials if t.system_attrs.get("failed_trial") == killed.number]
    assert again.state == TrialState.COMPLETE and again.params == killed.params
    experiment = client.get_experiment_by_name("reuters")
    assert experiment is not None
    runs = client.search_runs(
        [experiment.experiment_id],
        "tags.`optuna.study` = 'two-nodes' and tags.`pipeline.stage` = 'tune'",
    )
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parent.info.run_id}
    assert sorted(r.info.run_id for r in children) == sorted(t.user_attrs[attributes.RUN_ATTR] for t in trials)
    hosts = {r.data.tags["optuna.worker"].split(":")[0] for r in children}
    assert hosts == {"node1", "node2"}  # both nodes trained
    assert client.get_run(again.user_attrs[attributes.RUN_ATTR]).data.tags["optuna.worker"].startswith("node1:")
    assert client.get_run(killed.user_attrs[attributes.RUN_ATTR]).info.status == "FAILED"


# --- a node lost mid-training ------------------------------------------------------------------


@pytest.mark.slurm
@pytest.mark.slow
def test_a_training_whose_node_is_lost_is_requeued_and_resumes_from_its_backup(reuters_project, cluster):
    """node2 lost (its slurmd and worker killed) after the first epoch's backup: Slurm fails the
    job on that node and requeues it; once node2 is back both workers start again, resume from
    the backup on the shared file system, finish, and the one MLflow run holds each epoch once."""
    project = reuters_project
    # longer epochs than reuters_project's, three of them, none stopped early
    prepared_reuters(
        project,
        out="data/prepared/reuters",
        n=1200,
        train__reuters__epochs=3,
        train__reuters__early_stopping__patience=None,
    )
    env = subprocess_env(**cluster["env"])
    # --open-mode=append: the requeued run's lines after the first's
    submitted = sh(*train_job(project, "--parsable", "--requeue", "--open-mode=append"), cwd=project, env=env)
    job, t0 = submitted.stdout.strip().split(";")[0], time.time()
    backup = project / ".backup" / "train-reuters" / "history.json"
    wait_for("the first epoch backed up", lambda: backup.is_file() and json.loads(backup.read_text() or "[]"))
    first_run = json.loads((backup.parent / "mlflow_run.json").read_text())["run_id"]
    node("stop", "node2", cluster)
    print(f"node2 stopped after the first epoch, {time.time() - t0:.0f} s after sbatch")
    try:
        wait_for("the job requeued", lambda: int(job_state(job, env).get("Restarts", 0)) >= 1, timeout=300)
        print(f"requeued at {time.time() - t0:.0f} s")
        # Slurm holds a requeued job for cred_expire + 1 s (Reason=BeginTime: 11 s on this cluster,
        # from its next scheduling pass) while each slurmd forgets the killed attempt's credential;
        # started earlier (`scontrol update ... StartTime=now`), its step could wait forever on
        # node2 ("Requested nodes are busy")
        wait_for(
            "the requeued job held", lambda: job_state(job, env).get("Reason") == "BeginTime", timeout=60, every=0.2
        )
        print(f"held at {time.time() - t0:.0f} s")
    finally:
        node("start", "node2", cluster)
    print(f"node2 back at {time.time() - t0:.0f} s")
    wait_for("the job running again", lambda: job_state(job, env).get("JobState") != "PENDING", timeout=900)
    print(f"running again at {time.time() - t0:.0f} s")
    wait_for("the job done", lambda: job_state(job, env).get("JobState") in ("COMPLETED", "FAILED"), timeout=900)
    print(f"done at {time.time() - t0:.0f} s")
    log = (project / "slurm.out").read_text()
    assert job_state(job, env)["JobState"] == "COMPLETED", log[-4000:]
    assert int(job_state(job, env)["Restarts"]) == 1
    # the worker left on node1 said whom it lost and what resumes the run, in one line
    lost = re.compile(
        r"error: lost worker-1 \(node2:\d+\) mid-training: [a-z ]+; the job's requeue \(sbatch --requeue\) or "
        r"the stage run again resumes it from the backup of its last finished epoch \(.+\)"
    )
    assert any(lost.fullmatch(line) for line in log.splitlines()), log[-4000:]
    assert "this is a bug" not in log
    client, run = mlflow_run_of(log, cluster)
    assert run.info.run_id == first_run and run.info.status == "FINISHED"  # the killed attempt's run, finished
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "loss")) == [1, 2, 3]
    rows = (project / "reports" / "reuters" / "history.csv").read_text().splitlines()[1:]
    assert [int(r.split(",")[0]) for r in rows] == [1, 2, 3]
    assert not (project / ".backup" / "train-reuters").exists()


# --- a sweep across both nodes ------------------------------------------------------------------


@pytest.fixture(scope="module")
def swept(tmp_path_factory, dataset_files, cluster):
    """The project with its prepared data on the DVC remote and its commit on the git remote,
    then `sbatch --wait --array=0-1 deploy/slurm/sweep.sbatch grid.txt` from it; the tasks'
    logs and what a fresh clone of the git remote shows after `dvc exp pull origin`."""
    from support.datasets import FileServer

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
    job_env = {**env, "SLURM_CONF": cluster["env"]["SLURM_CONF"], "MLFLOW_TRACKING_URI": f"sqlite:///{mlflow_db}"}
    job_env["TMPDIR"] = str(scratch)
    # a node has 2 CPUs and no GPU: the script's --cpus-per-task and --gpus are a GPU node's;
    # two CPUs a task put the two tasks on the two nodes
    submitted = sh(
        "sbatch",
        "--parsable",
        "--requeue",
        "--open-mode=append",  # the requeued attempt's lines after the lost one's
        "--array=0-1",
        "--cpus-per-task=2",
        "--gpus=0",
        "deploy/slurm/sweep.sbatch",
        "grid.txt",
        cwd=repo,
        env=job_env,
    )
    job = submitted.stdout.strip().split(";")[0]
    log_files = [(repo / f"slurm-{job}_{task}.out") for task in (0, 1)]
    lost, lost_run = lose_node2_mid_experiment(job, scratch, job_env, cluster)
    logs = [log.read_text() if log.is_file() else "" for log in log_files]
    states = [job_state(f"{job}_{task}", job_env) for task in (0, 1)]
    assert [s.get("JobState") for s in states] == ["COMPLETED"] * 2, "".join(log[-4000:] for log in logs)

    fresh = root / "fresh"
    sh("git", "clone", "-q", remote, fresh, cwd=root, env=env)
    pulled = dvc("exp", "pull", "origin", cwd=fresh, env=env)
    shown = child_json(dvc("exp", "show", "--json", cwd=fresh, env=env))
    return {
        "root": root,
        "fresh": fresh,
        "env": env,
        "job": job,
        "lost": lost,
        "lost_run": lost_run,
        "states": states,
        "commit": commit,
        "logs": logs,
        "pulled": pulled,
        "shown": shown,
        "mlflow_db": mlflow_db,
        "scratch": scratch,
    }


def lose_node2_mid_experiment(job: str, scratch: Path, env: dict, cluster: dict) -> tuple[int, str]:
    """node2 stopped while its task trains its grid point; back once Slurm has requeued the
    task (which may start again at once on node1, with no hold); then the whole array waited for.
    The task that was on node2, and the MLflow run its lost attempt had opened."""

    def node_of(task: int) -> str:
        return job_state(f"{job}_{task}", env).get("NodeList", "")

    task = wait_for("a task on node2", lambda: next((t + 1 for t in (0, 1) if node_of(t) == "node2"), 0)) - 1

    def training() -> list[Path]:  # its MLflow run opened (the backup records it), its epochs to come
        return list(scratch.glob(f"pipeline-sweep-{job}-{task}.*/.backup/train-reuters/mlflow_run.json"))

    (marker,) = wait_for("node2's task training", training, timeout=600, every=0.1)
    run_id = wait_for("its run recorded", lambda: marker.read_text() and json.loads(marker.read_text())["run_id"])
    node("stop", "node2", cluster)
    try:
        state = lambda: job_state(f"{job}_{task}", env)  # noqa: E731
        wait_for("the task requeued", lambda: int(state().get("Restarts", 0)) >= 1, timeout=300)
    finally:
        node("start", "node2", cluster)
    running = ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING")
    wait_for(
        "the array done",
        lambda: all(job_state(f"{job}_{t}", env).get("JobState") not in running for t in (0, 1)),
        timeout=1200,
    )
    return task, run_id


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
    finished = [r for r in runs if r.info.status == "FINISHED"]
    assert sorted(r.data.tags["dvc.exp_name"] for r in finished) == names(swept)
    # the attempt lost with node2 left its run as it was, never finished (docs/sweeps.md)
    assert [(r.info.run_id, r.info.status) for r in runs if r.info.status != "FINISHED"] == [
        (swept["lost_run"], "RUNNING")
    ]
    hosts = {}
    for run in finished:
        name = run.data.tags["dvc.exp_name"]
        point = POINTS[names(swept).index(name)]
        assert run.info.status == "FINISHED" and run.info.run_name == name
        hosts[name] = run.data.tags["host"]
        assert run.data.tags["dvc.exp_baseline_rev"] == swept["commit"]
        assert {k: float(run.data.params[k]) for k in point} == point
        assert run.data.metrics["test_accuracy"] == pytest.approx(found[name][2]["test_accuracy"])
        artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
        assert artifacts.is_relative_to(swept["mlflow_db"].parent)
        assert (artifacts / "history.csv").is_file()
    # the task left on node1 finished there; the lost one ran again wherever Slurm put it
    kept = names(swept)[1 - swept["lost"]]
    assert hosts[kept] == "node1" and set(hosts.values()) <= {"node1", "node2"}


@pytest.mark.slurm
@pytest.mark.slow
def test_each_task_worked_in_a_scratch_clone_it_removed(swept):
    """Its first line says what it runs and where; the clone is gone; the log is DVC's and the
    training's lines, with no progress bars."""
    for task, (name, log) in enumerate(zip(names(swept), swept["logs"])):
        # the task lost with node2 ran again from the start: two first lines, one push
        assert log.count(f"{name}: dvc exp run ") == (2 if task == swept["lost"] else 1), log[-4000:]
        assert log.count(f"Pushed experiment {name} to Git remote") == 1
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
