"""pipeline/tracking/runs.py: the runs a training, an evaluation and a benchmark log."""

from helpers import fixture_images_sha256, use_sqlite, write_params
from pipeline.tracking import runs


def test_a_training_run_is_named_by_its_source_and_ends(tmp_path, monkeypatch):
    import mlflow
    from mlflow import MlflowClient

    uri = use_sqlite(tmp_path, monkeypatch)
    monkeypatch.setenv("DVC_STAGE", "train@reuters")
    with runs.TrainingRun.open("reuters", "reuters-fit-1rep-float32") as run:
        pass
    tags = MlflowClient(uri).get_run(run.run_id).data.tags
    assert tags["mlflow.source.name"] == "train@reuters"  # not MLflow's `__main__.py`
    assert tags["mlflow.source.type"] == "LOCAL"
    assert mlflow.active_run() is None


def test_a_training_on_a_download_nothing_pins_says_so_in_its_run(tmp_path, monkeypatch):
    """The download stage warns once; the run a model is traced back to carries it too."""
    import numpy as np
    from mlflow import MlflowClient

    from pipeline.config import load_params

    uri = use_sqlite(tmp_path, monkeypatch)
    data = tmp_path / "prepared"
    data.mkdir()
    x, y = np.zeros((4, 28, 28), np.uint8), np.arange(4, dtype=np.uint8)
    tags = {}
    for digest in (fixture_images_sha256(), None):
        params = load_params(write_params(tmp_path, {"preprocess.mnist.images_sha256": digest}), "mnist")
        with runs.TrainingRun.open("mnist", "mnist-run") as run:
            run.log_setup(params, {"replicas": 1}, data, {"train": (x, y), "val": (x, y)})
        tags[digest] = MlflowClient(uri).get_run(run.run_id).data.tags
    assert "data.unpinned" not in tags[fixture_images_sha256()]
    assert tags[None]["data.unpinned"] == params.unpinned()[0]
    assert tags[None]["data.unpinned"].startswith("download.mnist.files[0] (https://github.com/myleott/mnist_png/raw/")
