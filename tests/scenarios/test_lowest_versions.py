"""pyproject.toml's ranges at their low ends, on the lowest Python the README promises: the project
and its extras resolved with uv's `--resolution lowest-direct` (each direct dependency at the
lowest version its range allows, the rest at the newest that fit) into an environment of its own,
where the unit tests that need no TensorFlow run, then a preprocessing, a short training, its
evaluation and a tuning trial on fixture data. The suite's own environment is requirements.lock's
newest versions; this is the other end of every range. And an extra's package missing: one line."""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from support.processes import evaluate_args, run_command, sh, train_args
from support.project import ROOT, write_params

pytestmark = [pytest.mark.slow]

# pyproject.toml's requires-python and the README's "Python 3.10 to 3.13"
LOWEST_PYTHON = "3.10"
EXTRAS = ("postgres", "gpu")
# what the unit tests below need of the test extra (at its ranges' low ends too)
TEST_TOOLS = ("pytest", "hypothesis")
# Unit tests that need no TensorFlow and do not compare output with the suite's environment: the
# configuration, the study (a journal file and a real PostgreSQL through the postgres extra, and
# `pipeline tune`'s refusals), the data formats, the MLflow store and its errors; about 100 s
# (test_params_doc, left out, would add 115 s of params files rewritten). Each module whole, but:
UNIT_MODULES = (
    "config/loading/test_loader",
    "config/loading/test_build",
    "config/keys/test_schema",
    "config/loading/test_search_space",
    "test_options",
    "test_errors",
    "tuning/test_studies",
    "tuning/test_storage",
    "tuning/test_attributes",
    "tuning/test_study_runs",
    "commands/test_tune_command",
    "data/test_archives",
    "data/test_prepared",
    "test_io",
    "tracking/test_lineage",
    "tracking/test_store",
    "tracking/test_probe",
)
DESELECTED = {
    # MLflow 3.10 still opens a file:// store (deprecated); from 3.16 it refuses it, which that
    # case checks is said in one line
    "tracking/test_probe.py::test_a_store_that_cannot_be_opened_is_a_tracking_error_naming_it": "the file store case",
}


def project():
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def lowest_python() -> str:
    """Python LOWEST_PYTHON: PIPELINE_LOWEST_PYTHON, else pyenv's, else python3.10 on PATH (the
    first of them that runs and is that version)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [
        os.environ.get("PIPELINE_LOWEST_PYTHON"),
        *map(str, sorted(pyenv.glob(f"{LOWEST_PYTHON}.*/bin/python"), reverse=True)),
        shutil.which(f"python{LOWEST_PYTHON}"),
    ]
    tried = []
    for candidate in filter(None, candidates):
        done = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
        )
        if done.returncode == 0 and done.stdout.strip() == LOWEST_PYTHON:
            return candidate
        tried.append(f"{candidate} ({done.stdout.strip() or done.stderr.strip()[-200:] or done.returncode})")
    pytest.fail(
        f"Python {LOWEST_PYTHON}, the lowest the project supports, was not found (tried: "
        f"{', '.join(tried) or 'none'}): install it (pyenv install {LOWEST_PYTHON}), or set "
        f"PIPELINE_LOWEST_PYTHON to its python"
    )


def test_the_lowest_python_is_the_one_pyproject_and_the_readme_promise():
    assert project()["requires-python"] == f">={LOWEST_PYTHON}"
    assert f"Python {LOWEST_PYTHON} to 3.13" in (ROOT / "README.md").read_text()


def tool_requirements() -> list[str]:
    return [r for r in project()["optional-dependencies"]["test"] if Requirement(r).name in TEST_TOOLS]


@pytest.fixture(scope="module")
def lowest(tmp_path_factory):
    """A virtual environment of Python LOWEST_PYTHON with the project (editable, its extras) and
    the unit tests' tools, every direct dependency at its range's lowest version: its bin folder."""
    uv = Path(sys.executable).parent / "uv"
    venv = tmp_path_factory.mktemp("lowest") / "venv"
    started = time.monotonic()
    sh(uv, "venv", "--quiet", "--python", lowest_python(), venv, cwd=ROOT, env=dict(os.environ))
    sh(
        uv,
        "pip",
        "install",
        "--quiet",
        "--python",
        venv / "bin" / "python",
        "--resolution",
        "lowest-direct",
        "-e",
        f"{ROOT}[{','.join(EXTRAS)}]",
        *tool_requirements(),
        cwd=ROOT,
        env=dict(os.environ),
        timeout=1800,
    )
    print(f"environment at the lowest versions made in {time.monotonic() - started:.0f} s")
    return venv / "bin"


def lowest_env(bindir: Path, **extra) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "MLFLOW_TRACKING_URI", "VIRTUAL_ENV", "PIPELINE_DATA_MIRROR")
    }
    env.update(
        {
            "PATH": f"{bindir}{os.pathsep}{env['PATH']}",
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "CUDA_VISIBLE_DEVICES": "-1",
            "DVC_NO_ANALYTICS": "1",
        },
        **extra,
    )
    return env


def installed(bindir: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    import json

    out = sh(bindir / "python", "-c", code, cwd=ROOT, env=lowest_env(bindir)).stdout
    return {canonicalize_name(name): version for name, version in json.loads(out).items()}


def test_every_direct_dependency_is_at_its_ranges_low_end_and_they_fit(lowest):
    """The low ends are what runs here: each direct dependency's release starts with its range's
    lower bound (click>=8.1 may be 8.1.3 when 8.1.0 is not installable), and pip check is clean."""
    versions = installed(lowest)
    reqs = [Requirement(r) for r in project()["dependencies"]]
    reqs += [Requirement(r) for extra in EXTRAS for r in project()["optional-dependencies"][extra]]
    env = {"python_version": LOWEST_PYTHON, "platform_python_implementation": "CPython"}
    for req in reqs:
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        (low,) = [Version(s.version) for s in req.specifier if s.operator == ">="]
        got = Version(versions[canonicalize_name(req.name)])
        assert got.release[: len(low.release)] == low.release, f"{req.name} {got}: not at the low end of {req}"
    sh(
        Path(sys.executable).parent / "uv",
        "pip",
        "check",
        "--python",
        lowest / "python",
        cwd=ROOT,
        env=dict(os.environ),
    )


def test_the_unit_tests_without_tensorflow_pass_at_the_lowest_versions(lowest):
    args = [
        lowest / "python",
        "-m",
        "pytest",
        "-o",
        "addopts=-ra --strict-markers",
        "-p",
        "no:cacheprovider",
        "-q",
        "-m",
        "not slow and not distributed and not e2e and not browser and not slurm and not container "
        "and not faults and not gpu",
    ]
    args += [f"tests/{name}.py" for name in UNIT_MODULES]
    args += [f"--deselect=tests/{test}" for test in DESELECTED]
    # its own options only: the session's PYTEST_ADDOPTS (`-n`, which needs xdist, or
    # --junitxml, which this run would write over) are not this run's
    env = {k: v for k, v in lowest_env(lowest).items() if k != "PYTEST_ADDOPTS"}
    result = sh(*args, cwd=ROOT, env=env, check=False, timeout=1200)
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    counts = re.search(r"(\d+) passed", result.stdout)
    assert counts and int(counts.group(1)) > 100 and " failed" not in result.stdout, result.stdout[-3000:]


def test_a_training_its_evaluation_and_a_tuning_trial_run_at_the_lowest_versions(lowest, tmp_path):
    env = lowest_env(lowest, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}")
    # the fixture data written by the low end's NumPy (an object array pickled by NumPy 2 does
    # not load in 1.26, as Keras' own reuters.npz, written by NumPy 1, loads in both)
    sh(
        lowest / "python",
        "-c",
        "import sys; from pathlib import Path; from support.datasets import make_reuters_raw; "
        "make_reuters_raw(Path(sys.argv[1]), n=200)",
        tmp_path / "raw",
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT / "tests")},
    )
    write_params(tmp_path, {"train.reuters.epochs": 2, "preprocess.reuters.max_len": 40})

    def pipeline(*args):
        return sh(lowest / "pipeline", *args, cwd=tmp_path, env=env, timeout=900)

    pipeline("preprocess", "reuters", "--raw", "raw", "--out", "prepared")
    trained = pipeline(
        *train_args(),
    )
    assert "best epoch" in trained.stdout + trained.stderr
    pipeline(
        *evaluate_args(),
    )
    import json

    metrics = json.loads((tmp_path / "m.json").read_text())
    assert 0 <= metrics["test_accuracy"] <= 1 and metrics["test_samples"] == 40
    tuned = pipeline(
        "tune", "reuters", "--data", "prepared", "-S", "tune.reuters.trials=1", "-S", "tune.reuters.startup_trials=1"
    )
    assert "reuters trial 0: " in tuned.stdout and "1 complete, 0 pruned, 0 failed of 1 trials" in tuned.stdout, (
        tuned.stdout
    )


def test_a_postgresql_study_without_the_postgres_extra_is_one_line(tmp_path):
    """psycopg is the postgres extra's: where it is not installed, a study in PostgreSQL says
    which extra to install, exit 2, before TensorFlow or MLflow is imported."""
    from support.datasets import make_reuters_raw
    from support.processes import run_pipeline

    write_params(tmp_path)
    make_reuters_raw(tmp_path / "raw", n=100)
    assert run_pipeline("preprocess", "reuters", "--raw", "raw", "--out", "prepared", cwd=tmp_path).returncode == 0
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['psycopg'] = None  # as if not installed\n")
    from support.processes import subprocess_env

    env = subprocess_env(PYTHONPATH=f"{hide}{os.pathsep}{ROOT}")
    result, code, imported = run_command(
        ["tune", "reuters", "--data", "prepared", "--storage", "postgresql://u:secret@127.0.0.1:1/optuna"],
        cwd=tmp_path,
        env=env,
    )
    (line,) = result.stderr.splitlines()
    assert code == 2 and imported == set(), result.stderr
    assert line == (
        "error: postgresql://u:***@127.0.0.1:1/optuna: a study in PostgreSQL needs psycopg, which is "
        "not installed: install pipeline[postgres] (make setup does)"
    )
