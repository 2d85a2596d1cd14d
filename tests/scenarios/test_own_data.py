"""docs/own-data.md followed as a user would, on data no part of the project knows: the test
draws three classes of shapes (PNG folders in a tar.gz) and writes a few hundred short texts of
three topics (a CSV), serves both from 127.0.0.1, pastes the page's sections into a copy of the
session's trained project, runs the page's shell blocks (dvc repro, dvc exp run -S, a two-trial
study, promote, selftest, bench) and serves both champions, which must name the class of a
picture and a text they never saw."""

from __future__ import annotations

import base64
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml
from PIL import Image, ImageDraw
from pytest_codeblocks import extract_from_file
from support.processes import project_env, sh
from support.project import ROOT
from support.readme import Session, shell_blocks
from support.servers import free_ports, wait_for_url

from pipeline.config.commands.params_doc import format_params
from pipeline.config.loading.loader import read_yaml

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

PAGE = ROOT / "docs" / "own-data.md"
TEST = "test_own_data.py::test_a_dataset_of_each_kind_is_added_by_the_docs_steps_and_served"
SHAPES = ("circle", "square", "triangle")
TOPICS = {
    "sport": "match goal striker team league season coach players scored win derby referee half",
    "weather": "rain wind storm forecast sunny clouds frost snow temperature coast showers cold",
    "cooking": "bake oven flour butter recipe sauce simmer onions pepper dough salt minutes",
}
FILLER = "the a and of to in on for with this that after before today".split()


def shape(kind: str, rng: random.Random) -> Image.Image:
    """One picture of `kind`: its own hue, any place and size, on a noisy light ground."""
    img = Image.new("RGB", (40, 40), tuple(rng.randint(200, 255) for _ in range(3)))
    draw = ImageDraw.Draw(img)
    size, x, y = rng.randint(14, 24), rng.randint(1, 14), rng.randint(1, 14)
    shade = rng.randint(0, 60)
    color = {"circle": (220, shade, shade), "square": (shade, 180, shade), "triangle": (shade, shade, 220)}[kind]
    if kind == "circle":
        draw.ellipse((x, y, x + size, y + size), fill=color)
    elif kind == "square":
        draw.rectangle((x, y, x + size, y + size), fill=color)
    else:
        draw.polygon([(x, y + size), (x + size, y + size), (x + size // 2, y)], fill=color)
    return img


def png(img: Image.Image) -> bytes:
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def make_shapes(path: Path, per_class: dict[str, int]) -> Path:
    rng = random.Random(1)
    with tarfile.open(path, "w:gz") as tar:
        for split, count in per_class.items():
            for kind in SHAPES:
                for i in range(count):
                    data = png(shape(kind, rng))
                    info = tarfile.TarInfo(f"shapes/{split}/{kind}/{i:03d}.png")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return path


def sentence(topic: str, rng: random.Random) -> str:
    words = [rng.choice(TOPICS[topic].split()) for _ in range(rng.randint(5, 9))]
    words += rng.sample(FILLER, 4)
    rng.shuffle(words)
    return " ".join(words).capitalize() + "."


def make_topics(path: Path, count: int) -> Path:
    rng = random.Random(2)
    lines = ["text,topic"]
    for i in range(count):
        topic = list(TOPICS)[i % 3]
        lines.append(f'"{sentence(topic, rng)}",{topic}')
    path.write_text("\n".join(lines) + "\n")
    return path


def paste_sections(project: Path) -> None:
    """The page's YAML blocks into params.yaml and dvc.yaml, as a user pastes them."""
    blocks = [yaml.safe_load(b.code) for b in extract_from_file(PAGE) if b.syntax == "yaml"]
    params = read_yaml(project / "params.yaml")
    sections = [b for b in blocks if isinstance(b, dict) and "download" in b]
    assert len(sections) == 2, "the page shows one complete example per kind"
    for block in sections:
        for stage, per_dataset in block.items():
            params[stage].update(per_dataset)
    (project / "params.yaml").write_text(format_params(params))
    (foreach,) = [b["foreach"] for b in blocks if isinstance(b, dict) and "foreach" in b]
    text = (project / "dvc.yaml").read_text()
    assert text.count("foreach: [reuters, mnist]") == 4
    (project / "dvc.yaml").write_text(text.replace("foreach: [reuters, mnist]", f"foreach: [{', '.join(foreach)}]"))


def ask(url: str, row: dict) -> dict:
    import urllib.request

    req = urllib.request.Request(
        f"{url}/invocations", data=json.dumps({"inputs": [row]}).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as answer:
        return json.loads(answer.read())["predictions"][0]


def test_a_dataset_of_each_kind_is_added_by_the_docs_steps_and_served(trained_project, tmp_path):
    from mlflow import MlflowClient
    from support.datasets import FileServer

    served = tmp_path / "served"
    served.mkdir()
    make_shapes(served / "shapes.tar.gz", {"train": 40, "test": 8})
    make_topics(served / "topics.csv", 300)
    project = trained_project.copy(tmp_path / "project")
    env = project_env(MLFLOW_TRACKING_URI=trained_project.server)
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"
    paste_sections(project)
    sh("git", "add", "-A", cwd=project, env=env)
    sh("git", "commit", "-qm", "shapes and topics", cwd=project, env=env)
    blocks = [b for b in shell_blocks(PAGE) if b.skip_reason and TEST in b.skip_reason]
    steps, server_block = blocks[:-1], blocks[-1]
    assert "until stopped" in (server_block.skip_reason or "") and len(steps) == 3
    session = Session(project, env, tmp_path)
    with FileServer(served) as files:
        env["PIPELINE_DATA_MIRROR"] = files.url
        for block in steps:
            started = time.time()
            code, output = session.run(block.code, timeout=1500)
            assert code == 0, f"{block.where}: exited {code}:\n{output[-5000:]}"
            assert "Traceback" not in output, f"{block.where}:\n{output[-5000:]}"
            print(f"{block.where}: {time.time() - started:.1f} s")
    assert "best: trial" in output  # the study of two trials
    client = MlflowClient(trained_project.server)
    for name, classes in (("shapes", list(SHAPES)), ("topics", sorted(TOPICS))):
        assert client.get_experiment_by_name(name) is not None, f"no MLflow experiment {name}"
        stats = json.loads((project / "data" / "prepared" / name / "stats.json").read_text())
        assert stats["class_names"] == classes
        metrics = json.loads((project / "reports" / name / "metrics.json").read_text())
        assert metrics["test_accuracy"] >= 0.8, (name, metrics)
        assert client.get_model_version_by_alias(name, "champion")
    assert (project / "data" / "prepared" / "topics" / "word_index.json").is_file()

    shapes_port, topics_port = free_ports(2)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pipeline", "serve", name, "--port", str(port)],
            cwd=project,
            env={k: v for k, v in env.items() if k != "COVERAGE_PROCESS_CONFIG"},
            stdout=open(tmp_path / f"{name}.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for name, port in (("shapes", shapes_port), ("topics", topics_port))
    ]
    try:
        for proc, port, name in zip(procs, (shapes_port, topics_port), ("shapes", "topics")):
            log = tmp_path / f"{name}.log"
            wait_for_url(
                f"http://127.0.0.1:{port}/ping",
                300,
                lambda log=log: log.read_text()[-3000:],
                lambda proc=proc: proc.poll() is None,
            )
        rng = random.Random(99)  # pictures and texts the models never saw
        for kind in SHAPES:
            picture = base64.b64encode(png(shape(kind, rng))).decode()
            assert ask(f"http://127.0.0.1:{shapes_port}", {"image": picture})["label"] == kind
        for topic in TOPICS:
            assert ask(f"http://127.0.0.1:{topics_port}", {"text": sentence(topic, rng)})["label"] == topic
    finally:
        for proc in procs:
            os.killpg(proc.pid, 15)
            proc.wait(timeout=60)
