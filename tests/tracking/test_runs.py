"""pipeline/tracking/runs.py: the runs a training, an evaluation and a benchmark log."""

import dataclasses
import hashlib
import json
from pathlib import Path

from support.models import samples
from support.project import fixture_images_sha256, write_params
from support.tracking import use_sqlite

from pipeline.tracking import runs


def test_a_training_run_is_named_by_its_source_and_ends(tmp_path, monkeypatch):
    import mlflow
    from mlflow import MlflowClient

    uri = use_sqlite(tmp_path, monkeypatch)
    monkeypatch.setenv("DVC_STAGE", "train@reuters")
    with runs.TrainingRun.open("reuters", "reuters-fit-1rep-float32") as run:
        pass
    assert run.run_id is not None  # the chief's run
    tags = MlflowClient(uri).get_run(run.run_id).data.tags
    assert tags["mlflow.source.name"] == "train@reuters"  # not MLflow's `__main__.py`
    assert tags["mlflow.source.type"] == "LOCAL"
    assert mlflow.active_run() is None


def test_an_epoch_without_a_validation_split_logs_no_val_metrics(tmp_path, monkeypatch):
    """A row's val_ figures are NaN when there is no validation split: the run has none of them
    (as Keras' History), while a NaN loss, a training gone wrong, is logged as it is."""
    from mlflow import MlflowClient

    uri = use_sqlite(tmp_path, monkeypatch)
    nan = float("nan")
    with runs.TrainingRun.open("notes", "notes-run") as run:
        run.log_epoch(1, {"epoch": 1, "loss": 0.5, "accuracy": 0.75, "val_loss": nan, "val_accuracy": nan})
        run.log_epoch(2, {"epoch": 2, "loss": nan, "accuracy": 0.5, "val_loss": 0.25, "val_accuracy": 0.5})
    assert run.run_id is not None
    client = MlflowClient(uri)
    logged = {key: [(m.step, m.value) for m in client.get_metric_history(run.run_id, key)] for key in
              ("loss", "accuracy", "val_loss", "val_accuracy")}  # fmt: skip
    assert logged["accuracy"] == [(1, 0.75), (2, 0.5)]
    assert logged["loss"][0] == (1, 0.5) and logged["loss"][1][0] == 2 and logged["loss"][1][1] != logged["loss"][1][1]
    assert logged["val_loss"] == [(2, 0.25)] and logged["val_accuracy"] == [(2, 0.5)]


def test_a_training_on_a_download_nothing_pins_says_so_in_its_run(tmp_path, monkeypatch):
    """The download stage warns once; the run a model is traced back to carries it too."""
    from mlflow import MlflowClient

    from pipeline.config.loading.loader import load_params

    uri = use_sqlite(tmp_path, monkeypatch)
    data = tmp_path / "prepared"
    data.mkdir()
    tags = {}
    for digest in (fixture_images_sha256(), None):
        params = load_params(write_params(tmp_path, {"preprocess.mnist.images_sha256": digest}), "mnist")
        with runs.TrainingRun.open("mnist", "mnist-run") as run:
            run.log_setup(params, {"replicas": 1}, dataclasses.replace(samples(train=4, val=4), folder=data))
        assert run.run_id is not None
        tags[digest] = MlflowClient(uri).get_run(run.run_id).data.tags
    assert "data.unpinned" not in tags[fixture_images_sha256()]
    assert tags[None]["data.unpinned"] == params.unpinned()[0]
    assert tags[None]["data.unpinned"].startswith("download.mnist.files[0] (https://github.com/myleott/mnist_png/raw/")


def test_a_training_run_records_where_the_download_fetched_its_files(tmp_path, monkeypatch):
    """The manifest (a DVC out) is the same on every host; where the bytes came from on this one
    is the run's tag, read from the sources file the download stage leaves beside the folder."""
    from mlflow import MlflowClient

    from pipeline.config.loading.loader import load_params
    from pipeline.data.fetch import FetchResult, sources_path
    from pipeline.io import write_json

    uri = use_sqlite(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    got = FetchResult(
        "mnist_png.tar.gz", "https://example.org/mnist_png.tar.gz", "file:///srv/m/mnist_png.tar.gz", "1" * 64, 3, False
    )
    write_json("data/raw/mnist.manifest.json", {"dataset": "mnist", "files": [got.described()]})
    write_json(sources_path("data/raw/mnist"), {"dataset": "mnist", "files": [got.source()]})
    data = tmp_path / "prepared"
    data.mkdir()
    params = load_params(write_params(tmp_path), "mnist")
    with runs.TrainingRun.open("mnist", "mnist-run") as run:
        run.log_setup(params, {"replicas": 1}, dataclasses.replace(samples(train=4, val=4), folder=data))
    assert run.run_id is not None
    tags = MlflowClient(uri).get_run(run.run_id).data.tags
    assert tags["data.source.mnist_png.tar.gz"] == "file:///srv/m/mnist_png.tar.gz"


def test_a_model_without_its_run_json_is_evaluated_into_the_run_tagged_with_its_digest(tmp_path, monkeypatch):
    """DVC keeps no run.json: for a model brought back by `dvc checkout`, evaluate finds the
    training run by the `model.sha256` tag the train stage sets (the newest such run); a model
    no run of the store trained gets a new run, tagged with its digest."""
    from mlflow import MlflowClient

    from pipeline.config.loading.loader import load_params
    from pipeline.tracking import store

    uri = use_sqlite(tmp_path, monkeypatch)
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.keras").write_bytes(b"the model's bytes")
    digest = hashlib.sha256(b"the model's bytes").hexdigest()
    assert store.run_that_trained("reuters", digest) is None  # no experiment yet
    trained = []
    for tag in ("0" * 64, digest, digest, "f" * 64):
        with runs.TrainingRun.open("reuters", "reuters-run") as run:
            assert run.run_id is not None
            MlflowClient(uri).set_tag(run.run_id, "model.sha256", tag)
        trained.append(run.run_id)
    assert store.run_that_trained("reuters", digest).info.run_id == trained[2]
    params = load_params(write_params(tmp_path), "reuters")
    with runs.TrainingRun.for_evaluation(params, None, model, digest) as run:
        assert run.run_id == trained[2]  # not evaluated yet: the evaluation goes into it
    (model / "model.keras").write_bytes(b"another model")
    with runs.TrainingRun.for_evaluation(params, None, model, hashlib.sha256(b"another model").hexdigest()) as run:
        assert run.run_id is not None
        tags = MlflowClient(uri).get_run(run.run_id).data.tags
    assert run.run_id not in trained and "pipeline.model_run_id" not in tags
    assert tags["pipeline.model_sha256"] == hashlib.sha256(b"another model").hexdigest()


def test_a_run_trained_with_balanced_class_weights_records_each_classs_weight(tmp_path, monkeypatch):
    """class_weights.json: each class by name, its training count and the weight the training
    applies; none records no such file (the param says none), and a class with no training
    sample is one error before anything is logged."""
    import numpy as np
    import pytest
    from mlflow import MlflowClient

    from pipeline.config.loading.loader import load_params
    from pipeline.data import prepared
    from pipeline.errors import DataError
    from pipeline.kinds.image_folders import ImageFoldersFacts

    uri = use_sqlite(tmp_path, monkeypatch)
    y = np.array([0] * 6 + [1] * 3 + [2] * 1, dtype=np.uint8)
    x = np.zeros((len(y), 28, 28), np.uint8)
    names = ["cat", "dog", "rare bird"]
    grey = ImageFoldersFacts(28, "grey", "folders", images_sha256=None)
    data = prepared.write_arrays(
        tmp_path / "prepared", {"train": (x, y), "val": (x[:2], y[:2])}, input_="images", class_names=names,
        facts=grey,
    )  # fmt: skip
    found = {}
    for choice in ("balanced", "none"):
        params = load_params(write_params(tmp_path, {"train.mnist.class_weight": choice}), "mnist")
        with runs.TrainingRun.open("mnist", "mnist-run") as run:
            run.log_setup(params, {"replicas": 1}, data)
        assert run.run_id is not None
        client = MlflowClient(uri)
        found[choice] = [a.path for a in client.list_artifacts(run.run_id)]
        assert client.get_run(run.run_id).data.params["train.mnist.class_weight"] == choice
        if choice == "balanced":
            logged = client.download_artifacts(run.run_id, runs.CLASS_WEIGHTS, str(tmp_path / "got"))
            recorded = json.loads(Path(logged).read_text())
    assert runs.CLASS_WEIGHTS in found["balanced"] and runs.CLASS_WEIGHTS not in found["none"]
    assert list(recorded["classes"]) == names and recorded["train_samples"] == 10
    assert recorded["classes"]["rare bird"] == {"train_samples": 1, "weight": pytest.approx(10 / 3)}
    assert [c["weight"] for c in recorded["classes"].values()] == pytest.approx(data.class_weights("train"))
    lacking = prepared.write_arrays(
        tmp_path / "lacking", {"train": (x[:9], y[:9])}, input_="images", class_names=names, facts=grey
    )
    params = load_params(write_params(tmp_path, {"train.mnist.class_weight": "balanced"}), "mnist")
    with runs.TrainingRun.open("mnist", "mnist-run") as run, pytest.raises(DataError, match="class 'rare bird'"):
        run.log_setup(params, {"replicas": 1}, lacking)
    assert run.run_id is not None
    assert not MlflowClient(uri).get_run(run.run_id).data.params  # nothing logged before the error
