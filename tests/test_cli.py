import os

import pytest

from helpers import run_pipeline, run_python


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
    for name in ("download", "preprocess", "train", "evaluate", "devices", "doctor", "ui"):
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


def test_stage_help_is_the_stage_docstring_and_the_order_is_the_pipelines():
    result = run_pipeline("--help")
    listed = [line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()]
    assert listed[:4] == ["download", "preprocess", "train", "evaluate"]
    from stages import evaluate

    first_line = evaluate.command.help.splitlines()[0]
    assert f"evaluate    {first_line}" in result.stdout


def test_version_is_the_packages():
    from importlib.metadata import version

    import pipeline

    result = run_pipeline("--version")
    assert result.stdout == f"pipeline {pipeline.__version__}\n"
    assert version("pipeline") == pipeline.__version__  # pyproject reads it from the package


def test_a_clone_without_the_package_installed_says_how_to_install_it():
    result = run_python(
        "import pipeline.cli as c\n"
        "c.entry_points = lambda group: []  # what a clone run without `pip install -e .` finds\n"
        "c.cli(['train', '--help'], prog_name='pipeline')\n")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: the stage command 'train' is not installed: run `pip install -e .` in the repository "
        "(the stages are found through its entry points)")


def test_unknown_dataset_is_a_usage_error():
    result = run_pipeline("preprocess", "cifar", "--raw", "r", "--out", "o")
    assert result.returncode == 2
    assert "'cifar' is not one of 'reuters', 'mnist'" in result.stderr


def test_missing_path_option_is_a_usage_error():
    result = run_pipeline("train", "reuters")
    assert result.returncode == 2
    assert "Missing option '--data'" in result.stderr


def test_missing_input_is_one_line(tmp_path):
    from helpers import write_params

    write_params(tmp_path)
    result = run_pipeline("preprocess", "reuters", "--raw", "nowhere", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: nowhere/reuters.npz: missing; run the download stage first"]
    assert not (tmp_path / "out").exists()



@pytest.mark.slow
def test_ui_serves_the_projects_store_and_prints_its_url(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    from helpers import free_ports, subprocess_env

    (port,) = free_ports(1)
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "ui", "--port", str(port)], cwd=tmp_path,
                            env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        first = proc.stdout.readline().strip()
        assert first == (f"MLflow UI: http://127.0.0.1:{port} (runs in sqlite:///{tmp_path / 'mlflow.db'}); "
                         "Ctrl+C stops it")
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    assert r.status == 200
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, proc.stderr.read()
                time.sleep(0.5)
        assert (tmp_path / "mlflow.db").is_file()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.stderr.read().strip() == ""  # quiet: no access log, no notices


def test_ui_with_a_tracking_server_prints_its_url(tmp_path):
    from helpers import subprocess_env

    result = run_pipeline("ui", cwd=tmp_path, env=subprocess_env(MLFLOW_TRACKING_URI="http://127.0.0.1:5999"))
    assert result.returncode == 0
    assert result.stdout.strip() == "MLflow UI: http://127.0.0.1:5999 (the tracking server's own)"
