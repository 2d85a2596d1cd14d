"""Fixtures: small dataset files served from 127.0.0.1, a one-node Slurm cluster."""

import subprocess
from pathlib import Path

import pytest

from fixtures import FileServer, make_mnist_archive, make_reuters_npz, make_word_index
from helpers import ROOT


@pytest.fixture(scope="session")
def dataset_files(tmp_path_factory) -> Path:
    """A folder holding small files in the real formats, under the published base names."""
    root = tmp_path_factory.mktemp("served")
    make_reuters_npz(root / "reuters.npz")
    make_word_index(root / "reuters_word_index.json")
    make_mnist_archive(root / "mnist_png.tar.gz")
    return root


@pytest.fixture
def file_server(dataset_files):
    with FileServer(dataset_files) as server:
        yield server


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A real one-node Slurm cluster (munged, slurmctld, slurmd), started for these tests."""
    folder = tmp_path_factory.mktemp("slurm")
    script = ROOT / "scripts" / "slurm-local.sh"
    started = subprocess.run(["bash", str(script), "start", str(folder)], capture_output=True, text=True)
    assert started.returncode == 0, started.stderr + started.stdout
    yield {"SLURM_CONF": str(folder / "slurm.conf")}
    subprocess.run(["bash", str(script), "stop", str(folder)], capture_output=True)
