"""`pipeline bench` (pipeline/commands/bench.py): real measurements on small prepared data,
through the real CLI: the figures, the terminal's table and the MLflow run; -S for the
measurement only; a split smaller than the batch; scaling over replica counts; bad arguments and
missing data in one line."""

import json
import re

import pytest
from support.datasets import make_reuters_npz, make_word_index
from support.processes import run_pipeline, subprocess_env
from support.project import write_params

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    raw = root / "raw"
    raw.mkdir()
    make_reuters_npz(raw / "reuters.npz", n=400)
    make_word_index(raw / "reuters_word_index.json")
    # batch 32 (the defaults' 256 would be more than the 400 texts hold: one batch an epoch)
    write_params(root, {"preprocess.reuters.max_len": 80, "train.reuters.batch_size_per_replica": 32})
    result = run_pipeline("preprocess", "reuters", "--raw", raw, "--out", root / "prepared", cwd=root)
    assert result.returncode == 0, result.stderr
    return root


def bench(root, *args, env=None):
    return run_pipeline(
        "bench",
        "reuters",
        "--data",
        root / "prepared",
        "--warmup",
        4,
        *args,
        cwd=root,
        env=env or subprocess_env(MLFLOW_TRACKING_URI=f"sqlite:///{root}/mlflow.db"),
    )


def test_measures_and_logs_a_benchmark_run(prepared, tmp_path):
    out = tmp_path / "bench.json"
    result = bench(prepared, "--steps", 16, "--json", out)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    figures = json.loads(out.read_text())
    assert (figures["replicas"], figures["strategy"], figures["timed_steps"]) == (1, "DefaultStrategy", 16)
    assert figures["global_batch_size"] == 32 and figures["precision"] == "float32"
    assert figures["samples_per_second"] == pytest.approx(32 * 16 / figures["seconds"])
    assert 0 < figures["step_ms_median"] <= figures["step_ms_p95"]
    assert 0 <= figures["input_wait_percent"] < 100
    assert figures["cpu_percent"] > 0 and figures["peak_rss_mb"] > 100
    # the arithmetic: the model's FLOPs as TensorFlow counts them (max_len 80: Keras' lookup
    # compares and shifts each id; each convolution's products and bias; a pooling compares
    # each input; the dense layer), three times for training, against this CPU's peak
    forward = (
        2 * 80
        + (2 * 76 * 5 * 7 * 64 + 76 * 64)
        + 76 * 64
        + (2 * 36 * 3 * 64 * 32 + 36 * 32)
        + 36 * 32
        + (2 * 576 * 46 + 46)
    )
    assert figures["flops_per_sample"] == 3 * forward
    assert figures["gflops"] == pytest.approx(figures["samples_per_second"] * 3 * forward / 1e9)
    assert figures["percent_of_peak"] == pytest.approx(100 * figures["gflops"] / figures["peak_gflops"])
    # the terminal: what was measured, then the table, then the peak
    headline, header, row, peak = result.stdout.splitlines()
    assert headline.startswith("reuters: conv1d, fit, DefaultStrategy on /device:CPU:0; global batch 32")
    assert headline.endswith(f"; {3 * forward / 1e6:.1f} MFLOP per training sample")
    assert header.split()[:4] == ["replicas", "samples/s", "per", "replica"] and "GFLOP/s" in header
    assert row.split()[1] == f"{figures['samples_per_second']:,.0f}"
    assert peak == f"peak: {figures['peak_gflops']:,.1f} GFLOP/s = {figures['peak']}"
    assert re.search(r" = \d+ cores? x \d+\.\d\d GHz \((max )?clock\) x ", peak), peak

    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{prepared}/mlflow.db")
    (run,) = mlflow.search_runs(
        experiment_names=["reuters"],
        output_format="list",
        filter_string=f"attributes.run_id = '{figures['mlflow_run_id']}'",
    )
    assert run.data.tags["pipeline.benchmark"] == "true"
    assert run.data.tags["pipeline.stage"] == "bench"
    assert run.data.metrics["bench.samples_per_second"] == pytest.approx(figures["samples_per_second"])
    assert run.data.metrics["bench.percent_of_peak"] == pytest.approx(figures["percent_of_peak"])
    assert run.data.metrics["bench.flops_per_sample"] == figures["flops_per_sample"]
    assert run.data.params["bench.timed_steps"] == "16"
    assert run.data.params["train.reuters.batch_size_per_replica"] == "32"


def test_params_are_set_for_the_measurement_only(prepared, tmp_path):
    out = tmp_path / "bench.json"
    before = (prepared / "params.yaml").read_text()
    result = bench(
        prepared,
        "--steps",
        10,
        "--json",
        out,
        "--no-mlflow",
        "-S",
        "train.reuters.steps_per_execution=4",
        "-S",
        "train.reuters.batch_size_per_replica=8",
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(out.read_text())
    # whole executions of 4 steps: 10 asked for, 12 timed
    assert (figures["steps_per_execution"], figures["timed_steps"], figures["global_batch_size"]) == (4, 12, 8)
    assert (prepared / "params.yaml").read_text() == before


def test_a_split_smaller_than_the_batch_is_measured_as_one_batch(prepared, tmp_path):
    """Training takes the whole split as its batch then: so does the measurement (it once
    waited forever for a full batch of the params' size)."""
    from pipeline.data import prepared as prepared_data

    out = tmp_path / "bench.json"
    result = bench(
        prepared,
        "--steps",
        4,
        "--warmup",
        1,
        "--json",
        out,
        "--no-mlflow",
        "-S",
        "train.reuters.batch_size_per_replica=4096",
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(out.read_text())
    train_samples = prepared_data.read(prepared / "prepared").samples("train")
    assert 0 < train_samples < 4096 and figures["global_batch_size"] == train_samples
    assert f"; global batch {train_samples}, " in result.stdout.splitlines()[0]
    assert "; 4 steps timed after 1 step of warm-up; " in result.stdout.splitlines()[0]
    assert figures["samples_per_second"] == pytest.approx(train_samples * 4 / figures["seconds"])


@pytest.mark.distributed
def test_scaling_over_replicas_each_in_its_own_process(prepared, tmp_path):
    out = tmp_path / "scaling.json"
    result = bench(prepared, "--steps", 8, "--replicas", "1,2", "--json", out, "--no-mlflow")
    assert result.returncode == 0, result.stderr
    one, two = json.loads(out.read_text())
    assert (one["replicas"], one["strategy"]) == (1, "DefaultStrategy")
    assert (two["replicas"], two["strategy"], len(two["devices"])) == (2, "MirroredStrategy", 2)
    assert two["global_batch_size"] == 64  # batch_size_per_replica is per replica
    assert one["scaling_efficiency"] == 1.0
    assert two["scaling_efficiency"] == pytest.approx(two["samples_per_second"] / (2 * one["samples_per_second"]))
    assert result.stdout.splitlines()[1].split()[-1] == "efficiency"
    lines = result.stdout.splitlines()  # headline, header, a row per count, the peak (the same CPU)
    assert len(lines) == 5 and lines[-1].startswith("peak: ")
    assert one["peak_gflops"] == two["peak_gflops"] and one["flops_per_sample"] == two["flops_per_sample"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--replicas", "1,x"], "error: --replicas 1,x: expected replica counts separated by commas"),
        (
            ["-S", "train.reuters.epoch=3"],
            "error: -S train.reuters.epoch=3: params.yaml has no key 'epoch' under "
            "train.reuters (did you mean 'epochs'?)",
        ),
        (["--steps", "0"], "error: pipeline bench: Invalid value for '--steps'"),
    ],
)
def test_bad_arguments_are_one_line(prepared, args, message):
    result = bench(prepared, *args)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(message), result.stderr


def test_missing_prepared_data_is_a_data_error(tmp_path):
    write_params(tmp_path)
    result = run_pipeline("bench", "reuters", "--no-mlflow", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("error: data/prepared/reuters"), result.stderr
    assert len(result.stderr.splitlines()) == 1
