"""pipeline/cli.py, the group: its help and each stage's, without TensorFlow; the stages found
through the package's entry points, then the commands of pipeline/commands/, each under its
module's name; its version; every failure one line and its exit code; a stage's time and peak
memory. Each command's own tests: tests/commands/test_<command>_command.py."""

import pytest
from support.processes import run_command, run_pipeline, run_python
from support.project import ROOT


def test_help_lists_every_stage_without_importing_tensorflow_or_mlflow():
    result, code, imported = run_command(["--help"])
    assert (code, imported) == (0, set())
    for name in (
        "download",
        "preprocess",
        "train",
        "evaluate",
        "bench",
        "compare",
        "devices",
        "doctor",
        "params",
        "selftest",
        "ui",
    ):
        assert f"  {name} " in result.stdout


@pytest.mark.parametrize("stage", ["download", "preprocess", "train", "evaluate", "bench", "doctor", "selftest"])
def test_stage_help_is_lazy_too(stage):
    result, code, imported = run_command([stage, "--help"])
    assert (code, "tensorflow" in imported) == (0, False)
    assert "--params" in result.stdout


def test_stage_help_is_the_stage_docstring_and_the_order_is_the_pipelines():
    result = run_pipeline("--help")
    listed = [line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()]
    assert listed[:4] == ["download", "preprocess", "train", "evaluate"]
    from stages import evaluate

    help_text = evaluate.command.help
    assert help_text, "the evaluate stage's command has no help"
    first_line = help_text.splitlines()[0]
    assert f"evaluate    {first_line}" in result.stdout


def test_the_group_lists_the_stages_then_a_command_per_module_of_commands():
    """pipeline/commands/<name>.py defines `<name>_command`, and the group lists it as `<name>`
    (cli.py's table of contents): a module left out of the group, or a command without its
    module, fails here."""
    import importlib

    import click

    from pipeline.cli import cli
    from pipeline.config.keys.schema import STAGES

    modules = sorted(p.stem for p in (ROOT / "pipeline" / "commands").glob("*.py") if p.stem != "__init__")
    assert len(modules) == 12
    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == [*STAGES, *modules]
    for name in modules:
        command = getattr(importlib.import_module(f"pipeline.commands.{name}"), f"{name}_command")
        assert cli.get_command(ctx, name) is command and command.name == name


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
        "c.main(['train', '--help'])\n"
    )
    assert result.returncode == 2
    assert result.stderr == (
        "error: pipeline: the stage command 'train' is not installed: run `pip install -e .` in the repository "
        "(the stages are found through its entry points) (see 'pipeline --help')\n"
    )


@pytest.mark.parametrize(
    "args,line",
    [
        (
            ["preprocess", "cifar", "--raw", "r", "--out", "o"],
            "error: unknown dataset 'cifar': params.yaml declares reuters, mnist",
        ),
        (["train", "reuters"], "error: pipeline train: Missing option '--data'. (see 'pipeline train --help')"),
        (["--bogus"], "error: pipeline: No such option '--bogus'. Did you mean '--verbose'? (see 'pipeline --help')"),
        (["trian"], "error: pipeline: No such command 'trian'. Did you mean 'train'? (see 'pipeline --help')"),
        (
            ["devices", "--dataset", "x"],
            "error: unknown dataset 'x': params.yaml declares reuters, mnist",
        ),
    ],
)
def test_usage_errors_are_one_line_in_the_projects_format(args, line):
    result = run_pipeline(*args)
    assert result.returncode == 2
    assert result.stderr == line + "\n"


def test_an_unexpected_exception_is_one_line_and_the_traceback_is_behind_verbose():
    code = (
        "import pipeline.data.fetch as f\n"
        "def broken(*a, **k):\n"
        "    raise RuntimeError('something\\nnobody expected')\n"
        "f.fetch_all = broken\n"
        "from pipeline.cli import main\n"
        "main([{flags}'download', 'reuters', '--out', 'o', '--manifest', 'm.json'])\n"
    )
    result = run_python(code.format(flags=""))
    assert result.returncode == 1
    assert result.stderr == (
        "error: unexpected RuntimeError: something nobody expected; this is a bug: run the "
        "command again with `pipeline -v` to see where\n"
    )
    verbose = run_python(code.format(flags="'-v', "))
    assert verbose.returncode == 1
    assert "Traceback (most recent call last)" in verbose.stderr and "in broken" in verbose.stderr
    assert verbose.stderr.splitlines()[-1].startswith("error: unexpected RuntimeError")


@pytest.mark.cold_start  # the peak memory of a process that imported what it needs itself
def test_a_stage_that_succeeds_ends_with_its_time_and_peak_memory(tmp_path):
    import re

    from support.datasets import make_reuters_npz, make_word_index
    from support.project import write_params

    write_params(tmp_path)
    raw = tmp_path / "raw"
    raw.mkdir()
    make_reuters_npz(raw / "reuters.npz")
    make_word_index(raw / "reuters_word_index.json")
    result = run_pipeline("preprocess", "reuters", "--raw", raw, "--out", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    found = re.fullmatch(r"preprocess reuters: done in (\d+\.\d) s, peak memory ([\d,]+) MB", last)
    assert found, result.stderr
    assert 10 < int(found.group(2).replace(",", "")) < 4000  # MiB of a Python process with numpy
    quiet = run_pipeline("-q", "preprocess", "reuters", "--raw", raw, "--out", "out2", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == ""
