"""`pipeline tune` as a user runs it, in a copy of the trained project (its prepared fixture data,
its git repository and DVC cache), into MLflow's default store: two worker processes sharing one
study, a rerun that continues it, the best trial applied as a DVC experiment, a worker killed
mid-trial (tests/scenarios/test_two_nodes.py runs deploy/slurm/tune.sbatch's array tasks on two
nodes)."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.processes import child_json, dvc, run_command, sh

pytestmark = [pytest.mark.slow]

SMALL = ["-S", "tune.reuters.trials=4", "-S", "train.reuters.epochs=3", "-S", "tune.reuters.startup_trials=1"]


def tune(project, *args, env, timeout=900):
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "tune", "reuters", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def load(project: Path, name: str, storage: str = "optuna.journal"):
    from pipeline.tuning import studies

    optuna = studies.quiet_optuna()
    journal = optuna.storages.journal.JournalFileBackend(str(project / storage))
    return optuna.load_study(study_name=name, storage=optuna.storages.JournalStorage(journal))


def kept(study) -> list:
    """The study's trials but those withdrawn (two workers that asked for the last place at once)."""
    return [t for t in study.trials if not t.user_attrs.get("withdrawn")]


def client_of(project: Path):
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{project / 'mlflow.db'}")


def trial_runs(project: Path, study: str) -> list:
    client = client_of(project)
    experiment = client.get_experiment_by_name("reuters")
    return client.search_runs(
        [experiment.experiment_id], f"tags.`optuna.study` = '{study}' and tags.`pipeline.stage` = 'tune'"
    )


@pytest.fixture(scope="module")
def tuned(trained_project, tmp_path_factory):
    project = trained_project.copy(tmp_path_factory.mktemp("tune") / "project")
    env = dict(trained_project.env)
    env.pop("MLFLOW_TRACKING_URI")  # MLflow's default store: mlflow.db in the project
    first = tune(project, "--workers", "2", *SMALL, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    return {"path": project, "env": env, "first": first}


def test_two_workers_share_one_study(tuned):
    project, first = tuned["path"], tuned["first"]
    trial_lines = [line for line in first.stdout.splitlines() if line.startswith("reuters trial ")]
    assert len(trial_lines) == len(set(trial_lines)) == 4, first.stdout  # no more trials than the study's
    assert first.stderr == ""  # quiet: no notices, no warnings
    study = load(project, "reuters")
    states = [t.state.name for t in kept(study)]
    assert len(states) == 4 and set(states) <= {"COMPLETE", "PRUNED"}
    runs = trial_runs(project, "reuters")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parent) == 1 and len(children) == 4
    (parent,) = parent
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parent.info.run_id}
    assert len({r.data.tags["optuna.worker"] for r in children}) == 2  # both processes trained
    client = client_of(project)
    for run in children:
        trial = study.trials[int(run.data.tags["optuna.trial"])]
        assert not trial.user_attrs.get("withdrawn")
        assert run.data.tags["optuna.state"] == {"COMPLETE": "complete", "PRUNED": "pruned"}[trial.state.name]
        assert float(run.data.params["train.reuters.learning_rate"]) == trial.params["learning_rate"]
        assert run.data.params["train.reuters.conv1d.embedding_dim"] == str(trial.params["conv1d.embedding_dim"])
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_accuracy")]
        assert steps == sorted(trial.intermediate_values) == list(range(1, len(steps) + 1))
        assert run.data.metrics["epochs_trained"] == len(steps)
    best = study.best_trial
    assert parent.info.status == "FINISHED" and parent.data.tags["best.trial"] == str(best.number)
    assert parent.data.metrics["best_val_accuracy"] == pytest.approx(best.value)
    assert (
        first.stdout.splitlines()[0] == f"study reuters ({project / 'optuna.journal'}): 0 of 4 trials finished; "
        "2 workers here"
    )
    summary = first.stdout.splitlines()[-4:]
    assert summary[0].startswith(
        f"study reuters: {states.count('COMPLETE')} complete, {states.count('PRUNED')} "
        f"pruned, 0 failed of 4 trials ({project / 'optuna.journal'}); MLflow run "
        f"{parent.info.run_id}"
    )
    assert summary[1].startswith(f"best: trial {best.number}, val_accuracy {best.value:.4f}")
    assert summary[3].startswith("  dvc exp run evaluate@reuters --name tune-reuters-best -S train.reuters.epochs=3 ")


def test_a_rerun_continues_the_study(tuned):
    project, env = tuned["path"], tuned["env"]
    before = {t.number for t in load(project, "reuters").trials}
    more = tune(project, *SMALL[:-2], "-S", "tune.reuters.trials=5", env=env)
    assert more.returncode == 0, more.stderr[-3000:]
    (new,) = [t.number for t in load(project, "reuters").trials if t.number not in before]
    assert [line.split(":")[0] for line in more.stdout.splitlines() if line.startswith("reuters trial ")] == [
        f"reuters trial {new}"
    ]
    assert len(kept(load(project, "reuters"))) == 5
    again, code, imported = run_command(
        ["tune", "reuters", *SMALL[:-2], "-S", "tune.reuters.trials=5"], cwd=project, env=env
    )
    assert code == 0 and "tensorflow" not in imported  # a finished study trains nothing
    assert not [line for line in again.stdout.splitlines() if line.startswith("reuters trial ")]
    assert "of 5 trials" in again.stdout and "5 of 5 trials finished; 1 worker here" in again.stdout
    # the trials compare like any runs, by name
    compared = sh(
        sys.executable, "-m", "pipeline", "compare", "reuters-trial-0", f"reuters-trial-{new}", cwd=project, env=env
    ).stdout
    assert "train.reuters.learning_rate" in compared and "val_accuracy" in compared


def test_the_best_trial_becomes_a_named_dvc_experiment(tuned):
    project, env = tuned["path"], tuned["env"]
    applied = subprocess.run(
        [sys.executable, "-m", "pipeline", "tune", "reuters", "--best", "--apply", *SMALL],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr[-3000:]
    best = load(project, "reuters").best_trial
    shown = child_json(dvc("exp", "show", "--json", cwd=project, env=env))
    experiments = {e["name"]: e for b in shown for e in (b.get("experiments") or [])}
    assert "tune-reuters-best" in experiments
    (rev,) = experiments["tune-reuters-best"]["revs"]
    train = rev["data"]["params"]["params.yaml"]["data"]["train"]["reuters"]
    assert train["learning_rate"] == pytest.approx(best.params["learning_rate"]) and train["epochs"] == 3
    assert train["conv1d"]["embedding_dim"] == best.params["conv1d.embedding_dim"]
    assert train["optimizer"] == best.params["optimizer"]
    runs = client_of(project).search_runs(
        [client_of(project).get_experiment_by_name("reuters").experiment_id],
        "tags.`dvc.exp_name` = 'tune-reuters-best'",
    )
    assert len(runs) == 1 and "test_accuracy" in runs[0].data.metrics


def test_bad_storage_and_data_are_one_line(tuned):
    project, env = tuned["path"], tuned["env"]
    result, code, imported = run_command(
        ["tune", "reuters", "--storage", "postgresql://u:secret@127.0.0.1:1/optuna"], cwd=project, env=env
    )
    (line,) = result.stderr.splitlines()
    assert code == 1 and "tensorflow" not in imported
    assert line.startswith("error: postgresql://u:***@127.0.0.1:1/optuna: cannot open the study's storage: ")
    assert "refused" in line and "secret" not in line
    result, code, _ = run_command(["tune", "reuters", "--data", "nowhere"], cwd=project, env=env)
    assert code == 1 and result.stderr.splitlines()[0].startswith("error: nowhere")


def test_a_worker_killed_mid_trial_leaves_the_trial_failed_and_the_study_going(tuned):
    from optuna.trial import TrialState

    project, env = tuned["path"], tuned["env"]
    args = [
        "--study",
        "killed",
        "-S",
        "tune.reuters.heartbeat_seconds=1",
        "-S",
        "tune.reuters.trials=2",
        "-S",
        "train.reuters.epochs=30",
        "-S",
        "tune.reuters.pruner=none",
        "-S",
        "train.reuters.early_stopping.patience=null",
    ]
    worker = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "tune", "reuters", *args],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def trained_an_epoch() -> bool:
        try:
            return any(t.intermediate_values for t in load(project, "killed").trials)
        except KeyError:  # the study is not made yet
            return False

    deadline = time.time() + 300
    while not trained_an_epoch():
        assert worker.poll() is None and time.time() < deadline, worker.communicate()
        time.sleep(0.5)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    (killed,) = load(project, "killed").trials
    assert killed.state == TrialState.RUNNING  # as the dead worker left it
    # the next worker finds it stale once it has been silent for twice the heartbeat (1 s): a
    # worker that starts sooner (a warm start takes no time) rightly takes it for a live one
    time.sleep(2.5)
    rerun = tune(project, *args[:-4], "-S", "train.reuters.epochs=2", "-S", "tune.reuters.pruner=none", env=env)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "trial 0: its worker went silent; failed, queued again with the same params" in rerun.stderr
    trials = load(project, "killed").trials
    assert [t.state for t in trials[:2]] == [TrialState.FAIL, TrialState.COMPLETE]
    assert trials[1].params == killed.params and trials[1].system_attrs["failed_trial"] == 0
    assert sum(t.state == TrialState.COMPLETE for t in trials) == 2
    killed_run = client_of(project).get_run(killed.user_attrs["mlflow_run_id"])
    assert killed_run.info.status == "FAILED" and killed_run.data.tags["optuna.state"] == "failed"
