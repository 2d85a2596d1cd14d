"""Training as two MultiWorkerMirroredStrategy workers: real processes, TF_CONFIG, 127.0.0.1."""

import json
import re
import subprocess
import sys

import pytest
from support.datasets import prepared_reuters
from support.processes import run_pipeline, subprocess_env, train_args
from support.project import write_params
from support.servers import free_ports

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def tf_config(ports, index):
    return json.dumps(
        {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker", "index": index}}
    )


@pytest.fixture
def prepared(tmp_path):
    return prepared_reuters(tmp_path)


TRAIN_ARGS = [
    *train_args(
        history="history.csv",
        summary="summary.json",
        curves="curves.png",
        measurements="measured.json",
        backup_dir="backup",
    ),
]


def start_workers(folder, ports, args=TRAIN_ARGS) -> list:
    """Two `pipeline train` workers in `folder`, on `ports` of 127.0.0.1, logging to its mlflow.db."""
    db = folder / "mlflow.db"
    return [
        subprocess.Popen(
            [sys.executable, "-m", "pipeline", *args],
            cwd=folder,
            env=subprocess_env(TF_CONFIG=tf_config(ports, i), MLFLOW_TRACKING_URI=f"sqlite:///{db}"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]


def one_model(procs) -> tuple[list, str]:
    """Both workers' (stdout, stderr) once they exit 0, each having printed its final weights'
    digest, the same on both; and that digest."""
    outputs = [p.communicate(timeout=600) for p in procs]
    for proc, (_out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-4000:]
    digests = {}
    for out, err in outputs:
        found = re.search(r"\[worker-(\d)\]: final weights sha256 ([0-9a-f]{64})", out)
        assert found, (out[-2000:], err[-2000:])
        digests[found.group(1)] = found.group(2)
    assert sorted(digests) == ["0", "1"]
    assert digests["0"] == digests["1"], digests  # the same final weights on both workers
    return outputs, digests["0"]


def test_two_workers_train_one_model_and_log_one_run(prepared):
    """With early stopping (on the training loss, mode max: the first epoch is the best, so
    patience 2 stops both workers after 3 of 4 epochs, with the first epoch's weights)."""
    write_params(
        prepared,
        {
            "preprocess.reuters.max_len": 60,
            "train.reuters.loop": "custom",
            "train.reuters.epochs": 4,
            "train.reuters.batch_size_per_replica": 8,
            "train.reuters.early_stopping.monitor": "loss",
            "train.reuters.early_stopping.mode": "max",
            "train.reuters.early_stopping.patience": 2,
        },
    )
    db = prepared / "mlflow.db"
    outputs, digest = one_model(start_workers(prepared, free_ports(2)))
    assert (prepared / "model" / "model.keras").is_file()
    assert not (prepared / "backup").exists()  # both workers removed their backups
    summary = json.loads((prepared / "summary.json").read_text())
    measured = json.loads((prepared / "measured.json").read_text())
    assert (measured["workers"], measured["replicas"]) == (2, 2)
    assert "reuters: 2 replica(s) on 2 worker(s), MultiWorkerMirroredStrategy," in "".join(outputs[0])
    assert (summary["best_epoch"], summary["kept_epoch"], summary["epochs_trained"]) == (1, 1, 3)
    assert len((prepared / "history.csv").read_text().splitlines()) == 1 + 3

    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("reuters")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1  # only the chief logs
    params = runs[0].data.params
    assert (params["distribute.workers"], params["distribute.replicas"]) == ("2", "2")
    assert params["distribute.strategy"] == "MultiWorkerMirroredStrategy"
    assert runs[0].data.tags["weights.sha256"] == digest
    assert [m.step for m in client.get_metric_history(runs[0].info.run_id, "loss")] == [1, 2, 3]
    assert runs[0].data.metrics["best_epoch"] == 1


def test_a_lost_worker_is_one_line_and_both_resume_together(prepared):
    """A worker killed mid-run (its node lost): the survivor's last line names it and what
    resumes the run, exit 1; both started again resume from the backup and finish one run."""
    import signal
    import time

    from support.datasets import make_reuters_npz as make

    make(prepared / "raw" / "reuters.npz", n=3000)
    write_params(
        prepared, {"train.reuters.loop": "custom", "train.reuters.epochs": 4, "train.reuters.batch_size_per_replica": 8}
    )
    assert run_pipeline("preprocess", "reuters", "--raw", "raw", "--out", "prepared", cwd=prepared).returncode == 0
    db = prepared / "mlflow.db"

    ports = free_ports(2)
    procs = start_workers(prepared, ports)
    backup = prepared / "backup" / "history.json"
    deadline = time.time() + 300
    while not (backup.is_file() and json.loads(backup.read_text() or "[]")):
        assert all(p.poll() is None for p in procs) and time.time() < deadline
        time.sleep(0.05)
    time.sleep(0.4)
    procs[1].send_signal(signal.SIGKILL)
    procs[1].wait()
    _, err = procs[0].communicate(timeout=120)
    assert procs[0].returncode == 1, err[-3000:]
    assert re.fullmatch(
        rf"error: lost worker-1 \(127\.0\.0\.1:{ports[1]}\) mid-training: [a-z ]+; the stage run again on every "
        r"worker resumes it from the backup of its last finished epoch \(backup\)",
        err.strip().splitlines()[-1],
    ), err[-3000:]
    kept = len(json.loads(backup.read_text()))
    assert 1 <= kept < 4

    one_model(start_workers(prepared, free_ports(2)))
    rows = (prepared / "history.csv").read_text().splitlines()[1:]
    assert [int(r.split(",")[0]) for r in rows] == [1, 2, 3, 4]

    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("reuters")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "loss")) == [1, 2, 3, 4]
    assert not (prepared / "backup").exists()


def test_a_worker_whose_peer_never_answers_says_so_within_its_wait(prepared):
    """Worker 0 started, worker 1 never (a wrong port, a firewall): TensorFlow would wait an
    hour; the stage names the worker it cannot reach after cluster_wait_seconds, exit 1."""
    import time

    write_params(prepared, {"train.reuters.loop": "custom", "train.reuters.cluster_wait_seconds": 3})
    ports = free_ports(2)
    started = time.time()
    result = run_pipeline(*TRAIN_ARGS, cwd=prepared, env=subprocess_env(TF_CONFIG=tf_config(ports, 0)), timeout=120)
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: train.reuters: waited 3 s (cluster_wait_seconds) for worker-1 (127.0.0.1:{ports[1]}) to answer; "
        "check that every worker is started, on the address and port its cluster gives it, and that the port is "
        "open between them"
    )
    assert time.time() - started < 60
    assert not (prepared / "model").exists() and not (prepared / "backup").exists()


# a replica's batch and the training pictures the statistics are recomputed from
BATCH, COUNT = 8, 32
# the saved model's BatchNormalization statistics beside those of the same pictures recomputed
# with its weights: the largest difference (BATCH and COUNT set before it)
_STATISTICS_GAP = """
import keras
import numpy as np
from pipeline.data import prepared
from pipeline.data.inputs import image_size_for, make_dataset
from pipeline.training import batchnorm

model = keras.models.load_model("model/model.keras")
layers = batchnorm.layers_of(model)
saved = batchnorm.statistics_of(layers)
data = prepared.read("prepared")
size = image_size_for(data, model)
pictures = make_dataset(data, "train", batch_size=BATCH, shuffle=False, image_size=size, limit=COUNT)
batchnorm.recompute(model, pictures)
print(len(layers), max(float(np.abs(a - b).max()) for a, b in zip(saved, batchnorm.statistics_of(layers))))
"""


def test_two_workers_recompute_the_same_batchnorm_statistics(tmp_path):
    """The small convnet on pictures as two workers, its statistics recomputed each epoch from
    the first 32 training pictures by each worker itself: both end with the same weights,
    statistics included, and those are the pictures' statistics under the final weights. (With
    batchnorm_statistics 0 the two workers' weights differ: each keeps Keras' moving averages of
    its own batches.)"""
    from support.datasets import make_mnist_archive

    (tmp_path / "raw").mkdir()
    make_mnist_archive(tmp_path / "raw" / "mnist_png.tar.gz")  # the archive params.yaml pins
    write_params(
        tmp_path,
        {
            "train.mnist.model": "small_convnet",
            "train.mnist.small_convnet.filters": [4, 8],
            "train.mnist.small_convnet.dense_units": 8,
            "train.mnist.small_convnet.shift": 0.0,  # no augmentation: the check recomputes them
            "train.mnist.small_convnet.zoom": 0.0,
            "train.mnist.small_convnet.batchnorm_statistics": COUNT,
            "train.mnist.loop": "custom",
            "train.mnist.epochs": 2,
            "train.mnist.batch_size_per_replica": BATCH,
            "train.mnist.lr_decay_epochs": [],
        },
    )
    assert run_pipeline("preprocess", "mnist", "--raw", "raw", "--out", "prepared", cwd=tmp_path).returncode == 0
    args = train_args("mnist", history="h.csv", summary="s.json", curves="c.png", measurements="m.json")
    one_model(start_workers(tmp_path, free_ports(2), args))  # the same weights and statistics on both
    from support.processes import run_python

    done = run_python(f"BATCH, COUNT = {BATCH}, {COUNT}\n" + _STATISTICS_GAP, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    count, gap = done.stdout.split()
    assert int(count) == 4 and float(gap) < 1e-4, done.stdout
