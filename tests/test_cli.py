import pytest

from conftest import run_pipeline, run_python


def test_help_lists_every_stage_without_importing_tensorflow_or_mlflow():
    result = run_python(
        "import sys\n"
        "from pipeline.cli import cli\n"
        "try:\n"
        "    cli(['--help'], prog_name='pipeline')\n"
        "except SystemExit as exc:\n"
        "    print('EXIT', exc.code, 'tensorflow' in sys.modules, 'mlflow' in sys.modules)\n"
    )
    assert "EXIT 0 False False" in result.stdout
    for name in ("download", "preprocess", "train", "evaluate", "devices", "doctor"):
        assert f"  {name} " in result.stdout


@pytest.mark.parametrize("stage", ["download", "preprocess", "train", "evaluate", "doctor"])
def test_stage_help_is_lazy_too(stage):
    result = run_python(
        "import sys\n"
        "from pipeline.cli import cli\n"
        "try:\n"
        f"    cli([{stage!r}, '--help'], prog_name='pipeline')\n"
        "except SystemExit as exc:\n"
        "    print('EXIT', exc.code, 'tensorflow' in sys.modules)\n"
    )
    assert "EXIT 0 False" in result.stdout
    assert "--params" in result.stdout


def test_unknown_dataset_is_a_usage_error():
    result = run_pipeline("preprocess", "cifar", "--raw", "r", "--out", "o")
    assert result.returncode == 2
    assert "'cifar' is not one of 'reuters', 'mnist'" in result.stderr


def test_missing_path_option_is_a_usage_error():
    result = run_pipeline("train", "reuters")
    assert result.returncode == 2
    assert "Missing option '--data'" in result.stderr


def test_missing_input_is_one_line(tmp_path):
    from conftest import write_params

    write_params(tmp_path)
    result = run_pipeline("preprocess", "reuters", "--raw", "nowhere", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: nowhere/reuters.npz: missing; run the download stage first"]
    assert not (tmp_path / "out").exists()

