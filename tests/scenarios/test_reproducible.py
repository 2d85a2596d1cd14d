"""Identical reruns at the defaults: the train stage run twice with the shipped params (fewer
epochs, small data in the real formats), on one device and on two logical devices, gives
bit-identical weights, with `deterministic: false` as shipped. What this holds on is a CPU
host of one kind with the same lock (see docs/reproducibility.md)."""

import json

import pytest
from support.datasets import reuters_files_of
from support.processes import run_pipeline, subprocess_env, train_args
from support.project import write_params

# cold_start: each training's process starts as a user's does, with a hash seed of its own
pytestmark = [pytest.mark.slow, pytest.mark.cold_start]

TRAIN: dict[str, dict[str, object]] = {
    # batch 32: the fixture's split is smaller than the defaults' 256, and two replicas must
    # take twice the global batch for the different training to show
    "reuters": {"train.reuters.epochs": 2, "train.reuters.batch_size_per_replica": 32},
    "mnist": {"train.mnist.epochs": 2, "train.mnist.lr_decay_epochs": [1]},
}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, dataset_files):
    """Both datasets downloaded and preprocessed once, from the fixture files."""
    root = tmp_path_factory.mktemp("reproducible")
    write_params(root, {"download.reuters.files": reuters_files_of(dataset_files)})  # the fixture's sha256
    env = subprocess_env(PIPELINE_DATA_MIRROR=dataset_files.as_uri())
    for dataset in TRAIN:
        for args in (
            ["download", dataset, "--out", f"raw/{dataset}", "--manifest", f"raw/{dataset}.json"],
            ["preprocess", dataset, "--raw", f"raw/{dataset}", "--out", f"prepared/{dataset}"],
        ):
            result = run_pipeline(*args, cwd=root, env=env)
            assert result.returncode == 0, result.stderr
    return root


def weights_of_a_training(root, tmp_path, dataset: str, devices: int, attempt, **changes) -> str:
    """The MLflow run's weights.sha256 of one train stage at the defaults (and `changes`)."""
    from mlflow import MlflowClient

    folder = tmp_path / f"{devices}-{attempt}"
    folder.mkdir()
    write_params(folder, {**TRAIN[dataset], f"train.{dataset}.devices.logical_devices": devices, **changes})
    store = f"sqlite:///{folder / 'mlflow.db'}"
    result = run_pipeline(
        *train_args(
            dataset,
            data=f"prepared/{dataset}",
            model_dir=folder / "model",
            history=folder / "history.csv",
            summary=folder / "train.json",
            curves=folder / "curves.png",
            measurements=folder / "measurements.json",
            params=folder / "params.yaml",
        ),
        cwd=root,
        env=subprocess_env(MLFLOW_TRACKING_URI=store),
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((folder / "train.json").read_text())
    measured = json.loads((folder / "measurements.json").read_text())
    assert (measured["replicas"], summary["epochs_trained"]) == (devices, TRAIN[dataset][f"train.{dataset}.epochs"])
    client = MlflowClient(store)
    experiment = client.get_experiment_by_name(dataset)
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    return run.data.tags["weights.sha256"]


def test_reuters_twice_on_one_and_on_two_replicas_gives_bit_identical_weights(prepared, tmp_path):
    one, two = (
        [weights_of_a_training(prepared, tmp_path, "reuters", devices, attempt) for attempt in (1, 2)]
        for devices in (1, 2)
    )
    assert one[0] == one[1] and two[0] == two[1]
    assert one[0] != two[0]  # a training that differs shows (two replicas: twice the global batch)


def test_mnist_twice_gives_bit_identical_weights(prepared, tmp_path):
    first, second = (weights_of_a_training(prepared, tmp_path, "mnist", 1, attempt) for attempt in (1, 2))
    assert first == second


def test_the_committed_results_are_this_codes():
    """dvc.lock and reports/ come from a `dvc repro` of the code and params beside them: `dvc
    status` shows no modified dependency or param (outputs a fresh clone lacks are fine)."""
    import subprocess
    import sys
    from pathlib import Path

    from support.project import ROOT

    dvc = Path(sys.executable).with_name("dvc")
    result = subprocess.run(
        [str(dvc), "status", "--json"], cwd=ROOT, capture_output=True, text=True, env=subprocess_env(), timeout=300
    )
    assert result.returncode == 0, result.stderr
    stale = sorted(
        f"{stage}: {path} ({kind})"
        for stage, changes in json.loads(result.stdout or "{}").items()
        for change in changes
        if isinstance(change, dict)
        for kind in ("changed deps", "changed params")
        for path, state in (change.get(kind) or {}).items()
        if state == "modified" or isinstance(state, dict)
    )
    assert stale == [], "rerun `dvc repro` and commit dvc.lock and reports/ with the change:\n" + "\n".join(stale)


def test_every_module_the_training_runs_is_a_dependency_of_the_train_stage():
    """A change to code that shapes a model must rerun train (and show in `dvc status`): every
    module pipeline/training/trainer.py imports, directly or through another, is a dep in dvc.yaml,
    but for those that change no result (errors and log: messages; usage: the peak-memory figure)."""
    import ast

    import yaml
    from support.project import ROOT

    def module_file(name: str):
        for path in (ROOT / f"{name.replace('.', '/')}.py", ROOT / name.replace(".", "/") / "__init__.py"):
            if path.is_file():
                return path
        return None

    def imported(path) -> set:
        names = set()
        tree = ast.parse(path.read_text())
        # what only the type checker reads is not run: `if TYPE_CHECKING:` blocks
        typing_only = {
            id(n)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for n in ast.walk(block)
        }
        for node in (n for n in ast.walk(tree) if id(n) not in typing_only):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        return {module_file(n) for n in names if n.startswith("pipeline")} - {None}

    found, todo = set(), [ROOT / "pipeline" / "training" / "trainer.py"]
    while todo:
        path = todo.pop()
        if path not in found:
            found.add(path)
            todo.extend(imported(path))
    # a package's __init__ holds its docstring alone
    modules = {str(p.relative_to(ROOT)) for p in found if p.name != "__init__.py"} - {
        "pipeline/errors.py",
        "pipeline/log.py",
        "pipeline/runtime/usage.py",
    }
    deps = set(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["train"]["do"]["deps"])
    assert sorted(modules - deps) == []
