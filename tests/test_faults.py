"""Faults in real processes: an output place that is full or read-only (a real tmpfs, mounted
by the test), for every stage: one `error:` line, exit 1, nothing written there."""

import os
import subprocess

import pytest

from helpers import reuters_files_of, run_pipeline, subprocess_env, write_params

pytestmark = [
    pytest.mark.slow, pytest.mark.faults,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root (CI runs as root)"),
]

STAGE_OUTPUTS = {
    "download": lambda o: ["--out", o / "raw", "--manifest", o / "raw.json"],
    "preprocess": lambda o: ["--raw", "raw", "--out", o / "prepared"],
    "train": lambda o: ["--data", "prepared", "--model-dir", o / "model", "--history", o / "history.csv",
                        "--summary", o / "train.json", "--curves", o / "curves.png"],
    "evaluate": lambda o: ["--data", "prepared", "--model-dir", "model", "--metrics", o / "metrics.json",
                           "--per-class", o / "per_class.csv", "--confusion", o / "confusion.csv",
                           "--confusion-png", o / "confusion.png"],
}
OUTPUT_NAMES = {"download": ["raw", "raw.partial", "raw.json"], "preprocess": ["prepared"],
                "train": ["model", "history.csv", "train.json", "curves.png"],
                "evaluate": ["metrics.json", "per_class.csv", "confusion.csv", "confusion.png"]}


@pytest.fixture(scope="module")
def project(tmp_path_factory, dataset_files):
    """A folder where every stage of the Reuters experiment has run once, on fixture data."""
    root = tmp_path_factory.mktemp("faults")
    write_params(root, {"train.reuters.epochs": 1, "download.reuters.files": reuters_files_of(dataset_files)})
    env = subprocess_env(PIPELINE_DATA_MIRROR=dataset_files.as_uri(),
                         MLFLOW_TRACKING_URI=f"sqlite:///{root / 'mlflow.db'}")
    for stage, outputs in STAGE_OUTPUTS.items():
        result = run_pipeline(stage, "reuters", *outputs(root), cwd=root, env=env)
        assert result.returncode == 0, result.stderr
    return root, env


@pytest.fixture
def mount(tmp_path):
    mounted = []

    def make(options: str):
        place = tmp_path / f"place{len(mounted)}"
        place.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(place)], check=True)
        mounted.append(place)
        return place

    yield make
    for place in mounted:
        subprocess.run(["umount", str(place)], check=True)


@pytest.mark.parametrize("stage", list(STAGE_OUTPUTS))
@pytest.mark.parametrize("fault,options,reason", [
    ("full", "size=4k", "No space left on device"),
    ("read-only", "ro,size=1m", "Read-only file system"),
])
def test_an_output_place_that_cannot_take_the_output(project, mount, stage, fault, options, reason):
    root, env = project
    place = mount(options)
    result = run_pipeline(stage, "reuters", *STAGE_OUTPUTS[stage](place), cwd=root, env=env)
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    # the output that failed, or the place when the library does not say which file
    named = line[len("error: "):-len(f": cannot write: {reason}")]
    assert line == f"error: {named}: cannot write: {reason}", line
    assert named == str(place) or named in {str(place / n) for n in OUTPUT_NAMES[stage]}, line
    assert list(place.iterdir()) == []  # nothing half-written, no temporary file
