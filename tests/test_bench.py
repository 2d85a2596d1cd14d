"""`pipeline bench`: real measurements on small prepared data, through the real CLI."""

import json

import pytest

from fixtures import make_reuters_npz, make_word_index
from helpers import run_pipeline, subprocess_env, write_params

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    raw = root / "raw"
    raw.mkdir()
    make_reuters_npz(raw / "reuters.npz", n=400)
    make_word_index(raw / "reuters_word_index.json")
    write_params(root, {"preprocess.reuters.max_len": 80})
    result = run_pipeline("preprocess", "reuters", "--raw", raw, "--out", root / "prepared", cwd=root)
    assert result.returncode == 0, result.stderr
    return root


def bench(root, *args, env=None):
    return run_pipeline("bench", "reuters", "--data", root / "prepared", "--warmup", 4, *args, cwd=root,
                        env=env or subprocess_env(MLFLOW_TRACKING_URI=f"sqlite:///{root}/mlflow.db"))


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
    # the terminal: what was measured, then the table
    headline, header, row = result.stdout.splitlines()
    assert headline.startswith("reuters: reuters_conv1d, fit, DefaultStrategy on /device:CPU:0; global batch 32")
    assert header.split()[:2] == ["replicas", "samples/s"]
    assert row.split()[1] == f"{figures['samples_per_second']:,.0f}"

    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{prepared}/mlflow.db")
    (run,) = mlflow.search_runs(experiment_names=["reuters"], output_format="list",
                                filter_string=f"attributes.run_id = '{figures['mlflow_run_id']}'")
    assert run.data.tags["pipeline.benchmark"] == "true"
    assert run.data.tags["pipeline.stage"] == "bench"
    assert run.data.metrics["bench.samples_per_second"] == pytest.approx(figures["samples_per_second"])
    assert run.data.params["bench.timed_steps"] == "16"
    assert run.data.params["train.reuters.batch_size_per_replica"] == "32"


def test_params_are_set_for_the_measurement_only(prepared, tmp_path):
    out = tmp_path / "bench.json"
    before = (prepared / "params.yaml").read_text()
    result = bench(prepared, "--steps", 10, "--json", out, "--no-mlflow",
                   "-S", "train.reuters.steps_per_execution=4", "-S", "train.reuters.batch_size_per_replica=8")
    assert result.returncode == 0, result.stderr
    figures = json.loads(out.read_text())
    # whole executions of 4 steps: 10 asked for, 12 timed
    assert (figures["steps_per_execution"], figures["timed_steps"], figures["global_batch_size"]) == (4, 12, 8)
    assert (prepared / "params.yaml").read_text() == before


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
    assert len(result.stdout.splitlines()) == 4


@pytest.mark.parametrize("args,message", [
    (["--replicas", "1,x"], "error: --replicas 1,x: expected replica counts separated by commas"),
    (["-S", "train.reuters.epoch=3"], "error: -S train.reuters.epoch=3: params.yaml has no key 'epoch' under "
                                      "train.reuters (did you mean 'epochs'?)"),
    (["--steps", "0"], "error: pipeline bench: Invalid value for '--steps'"),
])
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
