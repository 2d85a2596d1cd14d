"""Expected failures: their exit codes, and one `error:` line from the command."""

import pytest
from support.processes import run_pipeline, run_python, subprocess_env, train_args
from support.project import write_params

from pipeline import errors


@pytest.mark.parametrize(
    "cls,code", [(errors.ConfigError, 2), (errors.DataError, 1), (errors.DownloadError, 1), (errors.TrackingError, 1)]
)
def test_exit_codes_usage_and_config_2_data_1(cls, code):
    assert issubclass(cls, errors.PipelineError) and cls("x").exit_code == code


def test_a_data_error_is_one_line_and_exit_1(tmp_path):
    write_params(tmp_path)
    result = run_pipeline(
        "preprocess", "reuters", "--raw", tmp_path / "nothing", "--out", tmp_path / "out", cwd=tmp_path
    )
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
    assert str(tmp_path / "nothing") in result.stderr
    assert not (tmp_path / "out").exists()  # nothing half-written


@pytest.mark.slow
def test_a_prepared_shard_cut_short_stops_train_in_one_line(tmp_path):
    import numpy as np

    from pipeline.data.prepared import write_arrays
    from pipeline.kinds.labelled_texts import full_length_facts

    write_params(tmp_path)
    prepared = tmp_path / "prepared"
    x, y = np.ones((40, 30), np.int32), np.arange(40, dtype=np.int32) % 46
    names = [str(c) for c in range(46)]
    found = write_arrays(
        prepared,
        {"train": (x, y), "val": (x, y)},
        input_="sequences",
        class_names=names,
        facts=full_length_facts(30, 10),
    )
    shard = found.shard_paths("train")[0]
    whole = shard.read_bytes()
    shard.write_bytes(whole[: len(whole) // 2])  # an interrupted copy
    result = run_pipeline(
        *train_args(
            data=prepared,
            model_dir=tmp_path / "model",
            history=tmp_path / "h.csv",
            summary=tmp_path / "s.json",
            curves=tmp_path / "c.png",
        ),
        cwd=tmp_path,
        env=subprocess_env(MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}"),
    )
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line == (
        f"error: {shard}: cut short ({len(whole) // 2} bytes, expected {len(whole)}); run the preprocess stage again"
    ), line
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize(
    "raised,code,line",
    [
        (
            'errors.ConfigError("params.yaml: train.reuters.epochs: expected a positive integer, got 0")',
            2,
            "error: params.yaml: train.reuters.epochs: expected a positive integer, got 0",
        ),
        (
            'errors.DataError("data/prepared/reuters/train-00000-of-00001.bin: missing")',
            1,
            "error: data/prepared/reuters/train-00000-of-00001.bin: missing",
        ),
        ("KeyboardInterrupt()", 130, "error: interrupted"),
        (
            'ZeroDivisionError("division by zero")',
            1,
            "error: unexpected ZeroDivisionError: division by zero; this is a "
            "bug: run the command again with `pipeline -v` to see where",
        ),
    ],
)
def test_report_turns_each_failure_into_one_line_and_its_exit_code(raised, code, line):
    """errors.report, the boundary of `pipeline` and of the processes it starts."""
    script = (
        "import sys\nfrom pipeline import errors, log\nlog.configure(0)\n"
        f"def fail():\n    raise {raised}\n"
        "assert errors.report(lambda: None) == 0 and errors.report(lambda: 3) == 3\n"
        "sys.exit(errors.report(fail))\n"
    )
    result = run_python(script)
    assert (result.returncode, result.stderr.splitlines()) == (code, [line])
