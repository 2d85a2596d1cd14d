"""The whole pipeline for real: the session's trained project (tests/conftest.py: dvc repro in
a temporary git repo, data served over HTTP from 127.0.0.1, runs logged to a real `mlflow
server`), then a no-op repro, `dvc exp run`s, a clone and two repros at once, on a copy."""

import csv
import hashlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
import yaml
from support.processes import child_json, dvc, sh
from support.project import unlike_plain_files
from support.servers import CHROMIUM, CHROMIUM_ARGS

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.distributed]


@pytest.fixture(scope="module")
def repo(tmp_path_factory, trained_project):
    """A copy of the session's trained project, for this module's experiments."""
    path = trained_project.copy(tmp_path_factory.mktemp("e2e") / "project")
    return {
        "path": path,
        "env": dict(trained_project.env),
        "first": trained_project.first,
        "second": trained_project.second,
        "server": trained_project.server,
        "requested": trained_project.requested,
    }


def client(url):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=url)


def runs_of(url, experiment):
    c = client(url)
    exp = c.get_experiment_by_name(experiment)
    assert exp is not None, f"no MLflow experiment {experiment!r}"
    return c.search_runs([exp.experiment_id])


def test_repro_downloads_over_http_and_writes_every_output(repo):
    path = repo["path"]
    assert repo["requested"] == ["mnist_png.tar.gz", "reuters.npz", "reuters_word_index.json"]
    for dataset in ("reuters", "mnist"):
        for out in (
            f"data/raw/{dataset}",
            f"data/prepared/{dataset}/train-00000-of-00001.bin",
            f"models/{dataset}/model.keras",
            f"reports/{dataset}/history.csv",
            f"reports/{dataset}/confusion.png",
            f"reports/{dataset}/per_class.csv",
        ):
            assert (path / out).exists(), out
        metrics = json.loads((path / f"reports/{dataset}/metrics.json").read_text())
        assert 0.0 <= metrics["test_accuracy"] <= 1.0
    assert "test_top5_accuracy" in json.loads((path / "reports/reuters/metrics.json").read_text())
    # the manifest (a DVC out) holds the data alone; where it came from is this host's, untracked
    manifest = json.loads((path / "data/raw/reuters.manifest.json").read_text())
    assert all("fetched_from" not in f for f in manifest["files"])
    sources = json.loads((path / "data/raw/reuters.sources.json").read_text())
    assert all(f["fetched_from"].startswith("http://127.0.0.1:") for f in sources["files"])
    (run,) = runs_of(repo["server"], "reuters")
    assert run.data.tags["data.source.reuters.npz"].startswith("http://127.0.0.1:")


def test_every_output_is_readable_like_a_file_the_user_makes(repo):
    """Under umask 022 (the session's), every output of every stage of both datasets is 0644
    and every folder 0755, as `open()` and `mkdir()` make them; umask 002: tests/scenarios/test_faults.py."""
    outputs = [
        out
        for stage in yaml.safe_load((repo["path"] / "dvc.lock").read_text())["stages"].values()
        for out in (o["path"] for o in stage.get("outs", []))
    ]
    assert {"models/reuters", "data/prepared/mnist", "reports/mnist/metrics.json"} <= set(outputs)
    assert unlike_plain_files(repo["path"], outputs, 0o022) == []


def test_the_first_repro_warns_of_nothing_of_ours(repo):
    """No dataset of the two starts from pretrained weights: their folders hold the list of
    none (weights.json), so DVC has no empty output to warn about."""
    printed = repo["first"].stdout + repo["first"].stderr
    assert "is empty" not in printed, printed
    for dataset in ("reuters", "mnist"):
        listed = json.loads((repo["path"] / f"data/pretrained/{dataset}/weights.json").read_text())
        assert listed == {"dataset": dataset, "files": []}


def test_second_repro_does_nothing(repo):
    assert "Data and pipelines are up to date." in repo["second"].stdout
    assert "Running stage" not in repo["second"].stdout
    assert len(runs_of(repo["server"], "reuters")) == 1


def test_a_training_that_reproduces_leaves_git_status_clean_and_dvc_lock_as_it_was(repo, tmp_path):
    """Forced to train Reuters again, DVC writes the same model, history, results and curves
    (so evaluate does not rerun): only what was measured changed, in files git ignores. On a
    copy, logging to a store of its own (the module's runs stay as the session made them)."""
    path = Path(shutil.copytree(repo["path"], tmp_path / "project", symlinks=True))
    env = {**repo["env"], "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    lock = (path / "dvc.lock").read_bytes()
    measured = path / "reports/reuters/measurements.json"
    before = measured.read_text()
    forced = dvc("repro", "-f", "-s", "train@reuters", cwd=path, env=env)
    assert "Running stage 'train@reuters'" in forced.stdout
    rest = dvc("repro", cwd=path, env=env)
    assert "Running stage" not in rest.stdout, rest.stdout  # evaluate's inputs are unchanged
    assert sh("git", "status", "--porcelain", cwd=path, env=env).stdout == ""
    assert (path / "dvc.lock").read_bytes() == lock
    assert measured.read_text() != before  # a new measurement, beside the same results
    assert dvc("status", cwd=path, env=env).stdout.strip() == "Data and pipelines are up to date."


def test_dvc_metrics_and_plots(repo):
    shown = child_json(dvc("metrics", "show", "--json", cwd=repo["path"], env=repo["env"]))
    data = next(iter(shown.values()))["data"]
    assert "test_accuracy" in data["reports/reuters/metrics.json"]["data"]
    # what was measured is shown too, from the workspace's untracked file; results hold numbers only
    assert data["reports/reuters/measurements.json"]["data"]["replicas"] == 1
    assert data["reports/mnist/measurements.json"]["data"]["samples_per_second"] > 0
    results = data["reports/reuters/train.json"]["data"]
    assert results["epochs_trained"] >= results["best_epoch"] >= 1 and "replicas" not in results
    assert all(isinstance(v, (int, float)) for name in data for v in data[name]["data"].values())
    plots = dvc("plots", "show", "--json", cwd=repo["path"], env=repo["env"]).stdout
    for name in (
        "Reuters accuracy",
        "MNIST loss",
        "reports/mnist/confusion.csv",
        "reports/reuters/confusion.png",
        "reports/reuters/learning_curves.png",
        "reports/mnist/learning_curves.png",
    ):
        assert name in plots


def test_mlflow_run_has_params_devices_metrics_and_lineage(repo):
    (run,) = runs_of(repo["server"], "reuters")
    params, tags = run.data.params, run.data.tags
    assert params["devices.logical_devices"] == "1"
    assert params["distribute.replicas"] == "1"
    assert params["distribute.workers"] == "1"
    # one machine: this one (tests/scenarios/test_two_nodes.py names two)
    assert (params["distribute.nodes"], params["distribute.hosts"]) == ("1", socket.gethostname())
    assert params["devices.physical_gpus"] == "0"
    assert params["distribute.strategy"] == "DefaultStrategy"
    assert params["train.reuters.batch_size_per_replica"] == "256"
    assert params["train.global_batch_size"] == "256"
    assert params["preprocess.reuters.max_len"] == "300"
    assert (
        params["download.reuters.files.0.sha256"]
        == hashlib.sha256((repo["path"] / "data/raw/reuters/reuters.npz").read_bytes()).hexdigest()
    )
    history = client(repo["server"]).get_metric_history(run.info.run_id, "val_accuracy")
    trained = json.loads((repo["path"] / "reports/reuters/train.json").read_text())["epochs_trained"]
    assert [m.step for m in history] == list(range(1, trained + 1))
    for metric in (
        "loss",
        "accuracy",
        "val_loss",
        "epoch_samples_per_second",
        "epoch_seconds",
        "test_accuracy",
        "test_loss",
        "test_top5_accuracy",
        "test_macro_recall",
    ):
        assert metric in run.data.metrics, metric
    # every name that DVC's metrics files and the run both show has one value: the whole run's
    for report, least in (("train.json", 2), ("measurements.json", 3), ("metrics.json", 5)):
        figures = json.loads((repo["path"] / "reports" / "reuters" / report).read_text())
        shared = [k for k, v in figures.items() if k in run.data.metrics]
        assert len(shared) >= least, (report, shared)
        for key in shared:
            assert run.data.metrics[key] == pytest.approx(figures[key], rel=1e-6), key
            assert len(client(repo["server"]).get_metric_history(run.info.run_id, key)) == 1, key
    head = sh("git", "rev-parse", "HEAD~1", cwd=repo["path"], env=repo["env"]).stdout.strip()
    assert tags["git.commit"] == head and tags["git.dirty"] == "false"
    lock = yaml.safe_load((repo["path"] / "dvc.lock").read_text())
    prepared = next(o["md5"] for o in lock["stages"]["preprocess@reuters"]["outs"])
    assert tags["dvc.data.data/prepared/reuters"] == prepared
    assert tags["tensorflow.version"] and tags["keras.version"] and "cuda.version" in tags
    assert tags["host"] == socket.gethostname()
    assert tags["dvc.stage"] == "train@reuters"
    artifacts = {a.path for a in client(repo["server"]).list_artifacts(run.info.run_id)}
    assert {"history.csv", "evaluation"} <= artifacts
    run_json = json.loads((repo["path"] / "models/reuters/run.json").read_text())
    assert run_json["run_id"] == run.info.run_id
    models = client(repo["server"]).search_logged_models(experiment_ids=[run.info.experiment_id])
    assert [m.source_run_id for m in models] == [run.info.run_id]
    # the environment: the lock's; the model states, package by package at the lock's versions,
    # what serving it needs, not the whole project
    import mlflow

    from pipeline.runtime import environment
    from pipeline.serving.classifier import model_requirements

    assert tags["python.environment"] == "requirements.lock"
    mlflow.set_tracking_uri(repo["server"])
    stated = Path(mlflow.pyfunc.get_model_dependencies(f"models:/{models[0].model_id}")).read_text().split()
    assert set(model_requirements()) <= set(stated) <= set(environment.installed_requirements())
    assert any(line.startswith("tensorflow==") for line in stated)
    assert not [line for line in stated if line.startswith(("dvc==", "optuna==", "psycopg=="))]
    # the model takes raw inputs, records Keras' own version, and is registered with its figures
    from importlib.metadata import version

    info = mlflow.models.get_model_info(f"models:/{models[0].model_id}")
    assert info.metadata is not None
    assert info.metadata["keras_version"] == version("keras") != info.metadata["tensorflow_version"]
    assert info.signature.inputs.input_names() == ["text", "ids"] and "python_function" in info.flavors
    (registered,) = [
        v
        for v in client(repo["server"]).search_model_versions("name = 'reuters'")
        if v.tags.get("run_id") == run.info.run_id
    ]
    metrics = json.loads((repo["path"] / "reports" / "reuters" / "metrics.json").read_text())
    assert float(registered.tags["test_accuracy"]) == pytest.approx(metrics["test_accuracy"], rel=1e-9)
    from pipeline.data import prepared

    test_data = prepared.read(repo["path"] / "data/prepared/reuters").digest("test")[0]
    assert registered.tags["test_data"] == test_data
    assert registered.tags["dvc.experiment"] == ""
    (mnist_run,) = runs_of(repo["server"], "mnist")
    assert mnist_run.data.params["distribute.replicas"] == "1"
    assert "test_top5_accuracy" not in mnist_run.data.metrics


def test_mlflow_run_is_named_and_has_curves_system_metrics_and_inputs(repo):
    (run,) = runs_of(repo["server"], "reuters")
    trained_at = sh("git", "rev-parse", "--short=7", "HEAD~1", cwd=repo["path"], env=repo["env"]).stdout.strip()
    assert run.info.run_name == f"reuters-fit-1rep-float32-{trained_at}"  # no experiment: name and commit
    assert run.data.tags["pipeline.run_name"] == "reuters-fit-1rep-float32"
    c = client(repo["server"])
    assert [a.path for a in c.list_artifacts(run.info.run_id, "plots")] == ["plots/learning_curves.png"]
    png = Path(c.download_artifacts(run.info.run_id, "plots/learning_curves.png", str(repo["path"].parent)))
    assert png.read_bytes() == (repo["path"] / "reports/reuters/learning_curves.png").read_bytes()
    for metric in ("system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"):
        assert metric in run.data.metrics, sorted(run.data.metrics)
    lock = yaml.safe_load((repo["path"] / "dvc.lock").read_text())
    prepared = next(o["md5"] for o in lock["stages"]["preprocess@reuters"]["outs"])
    inputs = {
        (i.dataset.name, i.tags[0].value if i.tags else None): i.dataset
        for i in c.get_run(run.info.run_id).inputs.dataset_inputs
    }
    assert set(inputs) == {
        ("reuters-train", "training"),
        ("reuters-val", "validation"),
        ("reuters-test", "testing"),
    }  # the last logged by evaluate
    for dataset in inputs.values():
        assert dataset.digest == prepared[:32]
        assert json.loads(dataset.source) == {"uri": "data/prepared/reuters"}


def test_exp_run_reruns_only_the_changed_dataset_and_logs_to_the_default_store(repo):
    env = dict(repo["env"])
    env.pop("MLFLOW_TRACKING_URI")  # MLflow's own default: sqlite:///mlflow.db in the repo root
    path = repo["path"]
    result = dvc(
        "exp",
        "run",
        "-n",
        "short",
        "-S",
        "train.reuters.epochs=1",
        "-S",
        "train.reuters.lr_decay_epochs=[1]",
        # another seed, another model: the baseline's best epoch may be its first, and the same
        # weights are the same model file, which DVC rightly does not evaluate again
        "-S",
        "train.reuters.seed=7",
        cwd=path,
        env=env,
    )
    assert "Running stage 'train@reuters'" in result.stdout
    assert "Running stage 'evaluate@reuters'" in result.stdout
    assert "Running stage '" in result.stdout and "@mnist'" not in result.stdout.replace("@mnist' didn't change", "")
    (run,) = runs_of(f"sqlite:///{path / 'mlflow.db'}", "reuters")
    assert run.data.tags["dvc.exp_name"] == "short"
    assert run.data.params["train.reuters.epochs"] == "1"
    assert run.data.params["train.reuters.lr_decay_epochs"] == "[1]"
    # params.yaml differs from the commit, as -S made it; the params say so, and code is as committed
    assert run.data.tags["git.dirty"] == "false" and "git.changed_files" not in run.data.tags
    assert "test_accuracy" in run.data.metrics
    table = dvc("exp", "show", "--csv", cwd=path, env=env).stdout
    rows = list(csv.DictReader(io.StringIO(table)))
    column = "reports/reuters/metrics.json:test_accuracy"
    baseline = next(r for r in rows if r["rev"] == "main")
    variant = next(r for r in rows if r["Experiment"] == "short")
    assert float(baseline[column]) >= 0 and float(variant[column]) >= 0
    assert variant["train.reuters.epochs"] == "1" and baseline["train.reuters.epochs"] == "10"
    status = sh("git", "status", "--porcelain", cwd=path, env=env).stdout
    assert "mlflow.db" not in status and "mlruns" not in status


METRIC_ROW_JS = """name => {
  const cell = name.parentElement;
  const grids = [...document.querySelectorAll('[role=grid]')];
  const values = grids[grids.indexOf(cell.closest('[role=grid]')) + 1];
  return [...values.querySelectorAll('[role=rowgroup] > div')]
    .filter(d => d.style.top === cell.style.top)
    .sort((a, b) => parseFloat(a.style.left) - parseFloat(b.style.left))
    .map(d => d.innerText.trim());
}"""
# how far the values grid must scroll to put a metric's row at its top
VALUES_SCROLL_JS = """name => {
  const cell = name.parentElement;
  const grids = [...document.querySelectorAll('[role=grid]')];
  const values = grids[grids.indexOf(cell.closest('[role=grid]')) + 1];
  return parseFloat(cell.style.top) - values.scrollTop;
}"""
# where a metric's name and its values are drawn (px from the top), and the values grid's top
ROW_ON_SCREEN_JS = """name => {
  const cell = name.parentElement;
  const grids = [...document.querySelectorAll('[role=grid]')];
  const values = grids[grids.indexOf(cell.closest('[role=grid]')) + 1];
  const y = el => Math.round(el.getBoundingClientRect().top);
  return [y(cell), y(values), [...values.querySelectorAll('[role=rowgroup] > div')]
    .filter(d => d.style.top === cell.style.top).map(y)];
}"""


@pytest.mark.browser
def test_mlflow_ui_compares_one_replica_with_two(repo, tmp_path):
    """What users compare, in MLflow's compare view in a real headless Chromium: the Reuters
    run on one device beside an experiment on two logical devices (MirroredStrategy through
    `dvc exp run`, logged to the server)."""
    from playwright.sync_api import sync_playwright

    url = repo["server"]
    # from the baseline's params: an earlier test's experiment left its own in the workspace
    sh("git", "checkout", "HEAD", "--", "params.yaml", cwd=repo["path"], env=repo["env"])
    dvc(
        "exp",
        "run",
        "-n",
        "two-devices",
        "-S",
        "train.reuters.devices.logical_devices=2",
        cwd=repo["path"],
        env=repo["env"],
    )
    runs = runs_of(url, "reuters")
    (one,) = [
        r
        for r in runs
        if r.data.tags["pipeline.run_name"] == "reuters-fit-1rep-float32"
        and r.data.tags["pipeline.stage"] == "train"
        and "dvc.exp_name" not in r.data.tags
    ]
    (two,) = [r for r in runs if r.info.run_name == "two-devices"]
    assert two.data.tags["pipeline.run_name"] == "reuters-fit-2rep-float32"
    params = two.data.params  # two replicas under MirroredStrategy, as the params asked
    assert (
        params["devices.logical_devices"],
        params["distribute.replicas"],
        params["distribute.workers"],
        params["distribute.strategy"],
        params["train.global_batch_size"],
    ) == ("2", "2", "1", "MirroredStrategy", "512")
    runs = json.dumps([one.info.run_id, two.info.run_id]).replace(" ", "")
    experiments = json.dumps([one.info.experiment_id]).replace(" ", "")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1200})
        page.goto(
            f"{url}/#/compare-runs?runs={urllib.parse.quote(runs)}&experiments={urllib.parse.quote(experiments)}",
            wait_until="load",
        )
        page.get_by_text("Run details").first.wait_for(timeout=60_000)
        first = page.get_by_text("accuracy", exact=True).first  # the metrics grid's first row
        first.wait_for(timeout=60_000)
        # what a user does: close the assistant panel and the charts, show the params that differ
        page.get_by_role("button", name="Close").click()
        page.get_by_text("Visualizations").first.click()
        page.get_by_text("Show diff only").first.click()
        names = [r for r in page.locator("tr").all_inner_texts() if r.startswith("Run Name")][0].split()[2:]
        replicas = [r for r in page.locator("tr").all_inner_texts() if r.startswith("distribute.replicas")]
        differing = [r.split()[0] for r in page.locator("tr").all_inner_texts() if "." in (r.split() or [""])[0]]
        # the metrics are two virtualized grids, names and values, whose cells line up by their
        # `top`, and only the rows near the view are drawn: scroll down with the wheel, as a user
        # would, until test_accuracy is drawn, then read its row from the values grid
        grid = page.locator("[role=grid]").filter(has=first).last.bounding_box()
        assert grid is not None, "the metrics grid is not visible"
        page.mouse.move(grid["x"] + grid["width"] + 100, grid["y"] + grid["height"] / 2)
        metric = page.get_by_text("test_accuracy", exact=True)
        for _ in range(20):
            if metric.count():
                break
            page.mouse.wheel(0, grid["height"] / 2)
            page.wait_for_timeout(300)
        metric = metric.last
        accuracy = metric.evaluate(METRIC_ROW_JS)
        # the picture shows it too: scroll it to the top of the view. MLflow 3.17's names column
        # follows the values one wheel event late, so overshoot by a pixel and come back.
        page.mouse.wheel(0, metric.evaluate(VALUES_SCROLL_JS) + 1)
        page.wait_for_timeout(300)
        page.mouse.wheel(0, -1)
        page.wait_for_timeout(300)
        on_screen = metric.evaluate(ROW_ON_SCREEN_JS)
        page.screenshot(path=str(tmp_path / "compare.png"))
        browser.close()
    assert names == [one.info.run_name, "two-devices"]
    assert [r.split() for r in replicas] == [["distribute.replicas", "1", "2"]]
    # the params table (the tags table below it differs too): the replicas, and with them the
    # strategy (one device trains without distribution) and its all-reduce
    assert sorted(k for k in differing if k in one.data.params) == [
        "devices.logical_devices",
        "distribute.cross_device_ops",
        "distribute.replicas",
        "distribute.strategy",
        "train.global_batch_size",
        "train.reuters.devices.logical_devices",
    ]
    expected = (one.data.metrics["test_accuracy"], two.data.metrics["test_accuracy"])
    assert [float(v) for v in accuracy] == pytest.approx(expected, abs=6e-4), accuracy
    name_y, grid_y, values_y = on_screen  # test_accuracy the first row shown, level with its values
    assert abs(name_y - grid_y) <= 2 and len(values_y) == 2, on_screen
    assert all(abs(y - name_y) <= 2 for y in values_y), on_screen
    shots = os.environ.get("PIPELINE_UI_SCREENSHOTS")
    if shots:  # the README's picture: PIPELINE_UI_SCREENSHOTS=docs
        shutil.copy(tmp_path / "compare.png", Path(shots) / "mlflow-compare.png")


def test_temp_experiment_logs_to_the_main_checkouts_store(repo):
    """`dvc exp run --temp` runs in a copy under .dvc/tmp/exps; its run still lands in the
    repository root's mlflow.db, where `mlflow ui` looks."""
    env = dict(repo["env"])
    env.pop("MLFLOW_TRACKING_URI")
    path = repo["path"]
    dvc(
        "exp",
        "run",
        "--temp",
        "-n",
        "in-temp",
        "-S",
        "train.reuters.epochs=1",
        "-S",
        "train.reuters.seed=7",
        cwd=path,
        env=env,
    )
    runs = runs_of(f"sqlite:///{path / 'mlflow.db'}", "reuters")
    temp = [r for r in runs if r.data.tags.get("dvc.exp_name") == "in-temp"]
    assert len(temp) == 1 and temp[0].data.params["train.reuters.seed"] == "7"
    assert not list((path / ".dvc" / "tmp").rglob("mlflow.db"))


def test_an_evaluate_only_experiment_is_a_run_of_its_own_and_leaves_the_earlier_run_as_it_was(repo):
    """An experiment that changes only evaluate reuses the baseline's training, whose MLflow
    run was evaluated already: that run stays as it was, and the experiment is a complete row
    of its own (the training's params and metrics, its own evaluation)."""
    path, env, url = repo["path"], repo["env"], repo["server"]
    c = client(url)
    # the workspace's model (an earlier test's experiment, or the baseline's): trained and evaluated
    first = c.get_run(json.loads((path / "models" / "reuters" / "run.json").read_text())["run_id"])
    assert "test_accuracy" in first.data.metrics

    def per_class_rows(run_id):
        (path.parent / run_id).mkdir(exist_ok=True)
        folder = c.download_artifacts(run_id, "evaluation/per_class.json", str(path.parent / run_id))
        return json.loads(Path(folder).read_text())["data"]

    rows = per_class_rows(first.info.run_id)
    result = dvc("exp", "run", "--temp", "-n", "top3", "-S", "evaluate.reuters.top_k=3", cwd=path, env=env)
    assert "Running stage 'evaluate@reuters'" in result.stdout and "Running stage 'train@" not in result.stdout
    after = c.get_run(first.info.run_id)
    assert after.data.metrics == first.data.metrics and after.data.params == first.data.params
    assert per_class_rows(first.info.run_id) == rows  # each class once, as first logged
    (second,) = [r for r in runs_of(url, "reuters") if r.data.tags.get("dvc.exp_name") == "top3"]
    assert second.info.run_id != first.info.run_id and second.info.status == "FINISHED"
    tags = second.data.tags
    assert tags["pipeline.model_run_id"] == first.info.run_id
    # its own model (its top k), registered as a version of its own, tagged with the experiment
    (version,) = c.search_model_versions(f"name = 'reuters' and run_id = '{second.info.run_id}'")
    assert version.tags["dvc.experiment"] == "top3" and version.tags["test_top3_accuracy"]
    assert tags["weights.sha256"] == first.data.tags["weights.sha256"]
    assert second.data.params.pop("evaluate.reuters.top_k") == "3"
    assert first.data.params.pop("evaluate.reuters.top_k") == "5"
    assert second.data.params == first.data.params  # train params, devices and samples alike
    assert "test_top3_accuracy" in second.data.metrics and "test_top5_accuracy" not in second.data.metrics
    for key in ("train_seconds", "samples_per_second", "val_accuracy", "loss"):
        assert second.data.metrics[key] == first.data.metrics[key], key
    assert [(m.step, m.value) for m in c.get_metric_history(second.info.run_id, "val_accuracy")] == [
        (m.step, m.value) for m in c.get_metric_history(first.info.run_id, "val_accuracy")
    ]


def test_a_clone_after_dvc_pull_with_an_empty_mlflow_store(repo, trained_project, tmp_path):
    """A new machine: git clone, `dvc pull` from a real local remote, no MLflow store. `dvc repro`
    has nothing to do; an evaluate-only `dvc exp run` logs to a new run that says where the
    model came from (its training run is in another store, found there by the model's digest)."""
    env = dict(repo["env"])
    env.pop("MLFLOW_TRACKING_URI")  # the clone's own, empty sqlite:///mlflow.db
    origin = trained_project.copy(tmp_path / "origin")  # results committed, as a user shares them
    remote = tmp_path / "dvc-remote"
    dvc("remote", "add", "--local", "-f", "-d", "store", str(remote), cwd=origin, env=env)
    dvc("push", cwd=origin, env=env)
    clone = tmp_path / "clone"
    sh("git", "clone", "-q", str(origin), str(clone), cwd=tmp_path, env=env)
    dvc("remote", "add", "--local", "-f", "-d", "store", str(remote), cwd=clone, env=env)
    dvc("pull", cwd=clone, env=env)
    assert (clone / "models" / "reuters" / "model.keras").is_file() and not (clone / "mlflow.db").exists()
    repro = dvc("repro", cwd=clone, env=env)
    assert "Running stage" not in repro.stdout
    result = dvc("exp", "run", "-n", "pulled", "-S", "evaluate.reuters.top_k=3", cwd=clone, env=env)
    assert "Running stage 'evaluate@reuters'" in result.stdout and "Running stage 'train@" not in result.stdout
    assert not (clone / "models" / "reuters" / "run.json").exists()  # every training's own: DVC keeps none
    assert "warning: models/reuters: no run of this tracking store" in result.stderr + result.stdout
    (run,) = runs_of(f"sqlite:///{clone / 'mlflow.db'}", "reuters")
    assert run.info.status == "FINISHED" and "pipeline.model_run_id" not in run.data.tags
    digest = hashlib.sha256((clone / "models" / "reuters" / "model.keras").read_bytes()).hexdigest()
    trained_by = json.loads((origin / "models" / "reuters" / "run.json").read_text())["run_id"]
    assert run.data.tags["pipeline.model_sha256"] == digest
    assert client(repo["server"]).get_run(trained_by).data.tags["model.sha256"] == digest
    assert run.data.tags["pipeline.stage"] == "evaluate" and run.data.tags["dvc.exp_name"] == "pulled"
    lock = yaml.safe_load((clone / "dvc.lock").read_text())
    model_md5 = next(o["md5"] for o in lock["stages"]["train@reuters"]["outs"] if o["path"] == "models/reuters")
    assert run.data.tags["dvc.data.models/reuters"] == model_md5  # the model, as DVC knows it
    assert "test_top3_accuracy" in run.data.metrics
    # the model, logged by this evaluation, is the clone store's first registered version
    from mlflow import MlflowClient

    (version,) = MlflowClient(f"sqlite:///{clone / 'mlflow.db'}").search_model_versions("name = 'reuters'")
    assert int(version.version) == 1 and version.run_id == run.info.run_id


def test_two_dvc_repro_at_once(repo):
    """One runs; the other stops at DVC's repository lock; nothing is corrupted."""
    path, env = repo["path"], repo["env"]
    args = [sys.executable, "-m", "dvc", "repro", "-f", "-s", "evaluate@reuters"]
    first = subprocess.Popen(args, cwd=path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The second starts once the first holds the stage's outputs (DVC's .dvc/tmp/rwlock names its
    # PID): a fixed pause let a slow start hand the race to the second.
    rwlock = path / ".dvc" / "tmp" / "rwlock"
    deadline, holding = time.monotonic() + 300, False
    while not holding and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            writers = json.loads(rwlock.read_text()).get("write", {}).values()
        except (FileNotFoundError, json.JSONDecodeError):
            continue
        holding = any(w["pid"] == first.pid for w in writers)
    assert holding, f"the first dvc repro never held the stage's outputs: {first.poll()=}"
    second = subprocess.run(args, cwd=path, env=env, capture_output=True, text=True, timeout=600)
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    assert second.returncode != 0
    # DVC's repository lock, or its lock on the stage's outputs (.dvc/tmp/rwlock)
    assert re.search(r"Unable to acquire lock|is busy, it is being blocked by", second.stderr), second.stderr
    status = dvc("status", cwd=path, env=env).stdout
    assert "changed" not in status and "modified" not in status, status
    metrics = json.loads((path / "reports" / "reuters" / "metrics.json").read_text())
    assert 0 <= metrics["test_accuracy"] <= 1
    assert not list(path.rglob(".*.tmp"))
