"""`pipeline add` followed by DVC for real: in a clone of the project (a git repository), a
dataset of image folders that no part of the project knows, served from 127.0.0.1, is added
with one command; DVC then lists its four stages and `dvc repro evaluate@NAME` runs them (one
epoch), and `pipeline remove` takes the stages out again, leaving its files."""

from __future__ import annotations

import json
import sys

import pytest
from fixtures import FileServer, make_mnist_archive
from helpers import copy_project, dvc, git_repo, project_env, sh

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

STAGES = [f"{stage}@shapes" for stage in ("download", "preprocess", "train", "evaluate")]


def stage_names(project, env) -> list[str]:
    return [line.split()[0] for line in dvc("stage", "list", cwd=project, env=env).stdout.splitlines() if line]


def test_an_added_dataset_runs_its_stages_and_is_removed(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    # pictures in a folder per class, under one top folder, named as the folders reader takes them
    make_mnist_archive(served / "shapes.tar.gz", per_class=(6, 2), splits=("train", "test"), top="shapes")
    project = copy_project(tmp_path / "project")
    env = project_env()
    git_repo(project, env)
    with FileServer(served) as files:
        url = f"{files.url}/shapes.tar.gz"
        added = sh(
            sys.executable, "-m", "pipeline", "add", "shapes", "--kind", "image_folders", "--url", url,
            "-S", "train.shapes.epochs=1", cwd=project, env=env,
        )  # fmt: skip
        # what it read from the pictures served, then what it did
        assert added.stdout.splitlines() == [
            f"read {url}:",
            "  preprocess.shapes.image_size: 32 (the median side of all 80 pictures is 28 px, within 32 to 48)",
            "  preprocess.shapes.color: grey (0 of all 80 pictures have colour)",
            "  train.shapes.class_weight: none (the classes have 6 to 6 training pictures (1.0x): balanced enough to "
            "weigh alike)",
            "added shapes (image_folders) to params.yaml and dvc.yaml: dvc repro evaluate@shapes",
        ]
        assert [name for name in stage_names(project, env) if name.endswith("@shapes")] == STAGES
        dvc("repro", "evaluate@shapes", cwd=project, env=env)
    metrics = json.loads((project / "reports" / "shapes" / "metrics.json").read_text())
    assert metrics["test_samples"] == 20  # 2 test pictures of each of the 10 classes
    shown = dvc("metrics", "show", "--json", cwd=project, env=env).stdout
    assert "reports/shapes/measurements.json" in shown and "reports/shapes/metrics.json" in shown
    assert "evaluate@shapes" in (project / "dvc.lock").read_text()
    status = dvc("status", *STAGES, cwd=project, env=env).stdout
    assert "up to date" in status.lower() or status.strip() == "", status

    removed = sh(sys.executable, "-m", "pipeline", "remove", "shapes", cwd=project, env=env)
    assert removed.stdout.startswith("removed shapes from params.yaml and dvc.yaml\nleft alone: data/raw/shapes,")
    assert not any(name.endswith("@shapes") for name in stage_names(project, env))
    assert (project / "data" / "raw" / "shapes").is_dir() and (project / "models" / "shapes").is_dir()
    sh("git", "diff", "--exit-code", "HEAD", "--", "params.yaml", "dvc.yaml", cwd=project, env=env)
