"""`pipeline add` followed by DVC for real: in a clone of the project (a git repository), a
dataset of image folders that no part of the project knows, served from 127.0.0.1, is added
with one command; DVC then lists its four stages and `dvc repro evaluate@NAME` runs them (one
epoch), and `pipeline remove` takes the stages out again, leaving its files."""

from __future__ import annotations

import json
import sys

import pytest
from support.datasets import FileServer, make_mnist_archive
from support.processes import dvc, git_repo, project_env, sh
from support.project import copy_project

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
            "  train.shapes.epochs: as -S sets it, not 150 (50 training pictures: 1,200 epochs to see 60,000, "
            "within 30 to 150)",
            "  preprocess.shapes.color: grey (0 of all 80 pictures have colour)",
            "  train.shapes.class_weight: none, the template's (the classes have 6 to 6 training pictures (1.0x); "
            "balanced weighs each class by its size, for the small classes)",
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


def customers(count: int) -> str:
    """A customers' export: an id, a name and a date on every row (what identifies it), an age, a
    plan and a region (what describes it, some missing), and whether the customer left."""
    import random

    rng = random.Random(3)
    lines = ["customer_id,name,signed_up,age,plan,region,churned"]
    for i in range(count):
        age, plan = rng.randint(18, 80), rng.choice(["basic", "plus", "pro"])
        region = "" if i % 9 == 4 else rng.choice(["north", "south", "east", "west"])
        churned = "yes" if (age < 35) != (plan == "pro") else "no"
        lines.append(f"{1000 + i},customer {i},2024-{i % 12 + 1:02d}-{i % 28 + 1:02d},{age},{plan},{region},{churned}")
    return "\n".join(lines) + "\n"


def test_a_table_is_added_trained_and_served_as_rows_of_its_columns(tmp_path):
    import subprocess
    import urllib.error
    import urllib.request

    from support.servers import free_ports, wait_for_url

    served = tmp_path / "served"
    served.mkdir()
    (served / "customers.csv").write_text(customers(300))
    project = copy_project(tmp_path / "project")
    env = project_env()
    git_repo(project, env)
    with FileServer(served) as files:
        url = f"{files.url}/customers.csv"
        added = sh(
            sys.executable, "-m", "pipeline", "add", "churn", "--kind", "tables", "--url", url,
            "-S", "preprocess.churn.label_column=churned", cwd=project, env=env,
        )  # fmt: skip
        # the lines docs/own-data.md shows
        assert added.stdout.splitlines()[1:4] == [
            "  preprocess.churn.categorical: [plan, region] (categories: plan: 3 values, region: 4 values; numbers: "
            "age)",
            "  preprocess.churn.ignore: [customer_id, name, signed_up] (what identifies a row: customer_id: a "
            "different integer on 300 of 300 rows; name: 300 different values in 300 rows; signed_up: a date on every "
            "row)",
            "  train.churn.class_weight: none, the template's (the classes have 122 to 178 rows (1.5x); "
            "balanced weighs each class by its size, for the small classes)",
        ]
        dvc("repro", "evaluate@churn", cwd=project, env=env)
    stats = json.loads((project / "data" / "prepared" / "churn" / "stats.json").read_text())
    assert [c["name"] for c in stats["columns"]] == ["age", "plan", "region"]
    assert stats["columns"][2]["missing"] == 33  # every ninth region left empty
    metrics = json.loads((project / "reports" / "churn" / "metrics.json").read_text())
    assert metrics["test_accuracy"] >= 0.9, metrics
    sh(sys.executable, "-m", "pipeline", "promote", "churn", cwd=project, env=env)

    (port,) = free_ports(1)
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline", "serve", "churn", "--port", str(port)],
            cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        server = f"http://127.0.0.1:{port}"
        wait_for_url(f"{server}/ping", 300, lambda: log.read_text()[-3000:], lambda: proc.poll() is None)

        def ask(rows: list[dict]) -> tuple[int, dict]:
            body = json.dumps({"inputs": rows}).encode()
            req = urllib.request.Request(
                f"{server}/invocations", data=body, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(req, timeout=120) as answer:
                    return answer.status, json.loads(answer.read())
            except urllib.error.HTTPError as error:
                return error.code, json.loads(error.read())

        # rows as the export has them, an id and a missing region among them
        code, answer = ask(
            [
                {"customer_id": 7, "age": 25, "plan": "basic", "region": "north"},
                {"customer_id": 8, "age": 60, "plan": "pro", "region": None},
                {"customer_id": 9, "age": 70, "plan": "basic", "region": "west"},
            ]
        )
        assert code == 200, answer
        assert [p["label"] for p in answer["predictions"]] == ["yes", "yes", "no"]
        code, answer = ask([{"age": "old", "plan": "pro", "region": "east"}])
        assert (code, answer["message"]) == (400, "row 0: age: expected a number, got a str 'old'")
        code, answer = ask([{"age": 40, "plan": "pro"}])
        assert code == 400 and answer["message"].startswith("no column 'region': expected the columns age, plan")
    finally:
        import os

        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)
