"""The champions served for real: the session's trained project registered its models on the
real MLflow server; `pipeline promote` makes them champions there, then MLflow's own model
server answers HTTP requests from this test: `mlflow models serve -m models:/reuters@champion
--env-manager local` typed as a user would, and `pipeline serve mnist`. A test-split newswire
rebuilt as text and real PNG files (the fixture's, and a larger photographed-style JPEG) are
classified as the offline model classifies the prepared test split; bad requests get a 400 and
one line. The load benchmark runs against the same servers."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support.processes import child_json, project_env
from support.project import ROOT
from support.servers import free_ports, wait_for_url

pytestmark = pytest.mark.slow


def request(url: str, body) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}/invocations", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def start(args: list[str], cwd: Path, env: dict, log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_until_up(url: str, proc: subprocess.Popen, log: Path) -> None:
    wait_for_url(f"{url}/ping", 300, lambda: log.read_text()[-3000:], alive=lambda: proc.poll() is None)


@pytest.fixture(scope="module")
def served(trained_project, tmp_path_factory):
    """Both champions promoted on the tracking server and served; what the tests need."""
    project, folder = trained_project.path, tmp_path_factory.mktemp("serve")
    env = project_env(MLFLOW_TRACKING_URI=trained_project.server)
    env.pop("COVERAGE_PROCESS_CONFIG", None)  # the servers run the model's own copy of the code
    from mlflow import MlflowClient

    client = MlflowClient(trained_project.server)
    promoted = {}
    for dataset in ("reuters", "mnist"):
        run_id = json.loads((project / "models" / dataset / "run.json").read_text())["run_id"]
        (version,) = client.search_model_versions(f"name = '{dataset}' and run_id = '{run_id}'")
        done = subprocess.run(
            [sys.executable, "-m", "pipeline", "promote", dataset, str(version.version)],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        promoted[dataset] = (int(version.version), done.stdout)
    reuters_port, mnist_port = free_ports(2)
    procs = {
        # the exact command docs/serving.md gives, in a shell whose PATH has the environment
        "reuters": start(
            [
                sys.executable,
                "-m",
                "mlflow",
                "models",
                "serve",
                "-m",
                "models:/reuters@champion",
                "--env-manager",
                "local",
                "-p",
                str(reuters_port),
            ],
            project,
            env,
            folder / "reuters.log",
        ),
        "mnist": start(
            [sys.executable, "-m", "pipeline", "serve", "mnist", "--port", str(mnist_port)],
            project,
            env,
            folder / "mnist.log",
        ),
    }
    urls = {"reuters": f"http://127.0.0.1:{reuters_port}", "mnist": f"http://127.0.0.1:{mnist_port}"}
    try:
        for dataset, proc in procs.items():
            wait_until_up(urls[dataset], proc, folder / f"{dataset}.log")
        yield {"project": project, "urls": urls, "promoted": promoted, "logs": folder, "env": env}
    finally:
        for proc in procs.values():
            os.killpg(proc.pid, 15)
            proc.wait(timeout=60)


@pytest.fixture(scope="module")
def offline(served):
    """The Keras models' answers on the prepared test splits, through the evaluate stage's code."""
    from pipeline.data import prepared
    from pipeline.data.inputs import image_size_for
    from pipeline.serving.classifier import probabilities
    from pipeline.training import model_folder
    from pipeline.training.evaluation import predict_logits

    found: dict[str, tuple] = {}
    for dataset in ("reuters", "mnist"):
        data = prepared.read(served["project"] / "data" / "prepared" / dataset)
        model = model_folder.load_model(served["project"] / "models" / dataset)
        x, _ = data.head("test", 10**6)
        size = image_size_for(data, model)
        found[dataset] = (x, probabilities(predict_logits(model, data, batch_size=64, image_size=size)))
        found[f"{dataset}-model"] = (model, size)
    return found


def test_promote_names_the_version_and_the_server_holds_the_alias(served):
    from mlflow import MlflowClient

    version, line = served["promoted"]["reuters"]
    assert line.startswith(f"reuters: version {version} (test_accuracy ")
    client = MlflowClient(served["env"]["MLFLOW_TRACKING_URI"])
    assert int(client.get_model_version_by_alias("reuters", "champion").version) == version
    assert "models:/mnist@champion, version" in (served["logs"] / "mnist.log").read_text().splitlines()[0]


def test_a_newswire_as_text_is_classified_as_the_offline_model_does(served, offline):
    from pipeline.data import reuters, texts
    from pipeline.io import read_json
    from pipeline.kinds import labelled_texts

    data = served["project"] / "data" / "prepared" / "reuters"
    x, probs = offline["reuters"]
    index = labelled_texts.load_word_index(data / reuters.WORD_INDEX_NAME)
    offset = read_json(data / "stats.json")["encoding"]["index_from"]
    rows = list(range(12))
    written = [t.capitalize() + "." for t in texts.texts(x[rows], index, offset)]
    status, answer = request(served["urls"]["reuters"], {"dataframe_records": [{"text": t} for t in written]})
    assert status == 200, answer
    predictions = answer["predictions"]
    import keras

    labels = keras.datasets.reuters.get_label_names()
    for row, got in zip(rows, predictions):
        assert got["class"] == int(probs[row].argmax()) and got["label"] == labels[got["class"]]
        assert got["probability"] == pytest.approx(float(probs[row].max()), abs=1e-5)
        assert len(got["top_k"]) == 5 and got["top_k"][0]["label"] == got["label"]
    # the same newswires as Keras' word-id sequences, and another k
    ids = [[int(i) for i in x[row] if i] for row in rows[:3]]
    status, answer = request(served["urls"]["reuters"], {"inputs": [{"ids": s} for s in ids], "params": {"top_k": 2}})
    assert status == 200 and [p["class"] for p in answer["predictions"]] == [int(probs[r].argmax()) for r in rows[:3]]
    assert all(len(p["top_k"]) == 2 for p in answer["predictions"])


def digits(folder: Path) -> dict[str, tuple[int, bytes]]:
    """The fixture archive's test PNG files, as a user has them: name -> (label, bytes)."""
    (archive,) = (folder / "data" / "raw" / "mnist").glob("*.tar.gz")
    found = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if member.isfile() and "testing" in parts:
                file = tar.extractfile(member)
                assert file is not None, member.name
                found[member.name] = (int(parts[-2]), file.read())
    return dict(sorted(found.items(), key=lambda kv: (kv[1][0], kv[0])))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def test_digit_pictures_are_classified_as_the_offline_model_does(served, offline):
    x, probs = offline["mnist"]
    files = digits(served["project"])
    assert len(files) == len(x)  # the prepared test split holds them in this order
    status, answer = request(
        served["urls"]["mnist"], {"dataframe_records": [{"image": b64(png)} for _, png in files.values()]}
    )
    assert status == 200, answer
    for row, got in enumerate(answer["predictions"]):
        assert got["class"] == int(probs[row].argmax()) and got["label"] == str(got["class"])
        assert got["probability"] == pytest.approx(float(probs[row].max()), abs=1e-5)
        assert len(got["top_k"]) == 3
    # one photographed-style: dark ink on light paper, RGB, 5x the size, JPEG
    first = np.asarray(Image.open(io.BytesIO(next(iter(files.values()))[1])))
    photo = Image.fromarray(255 - first, "L").resize((140, 140), Image.Resampling.NEAREST).convert("RGB")
    jpeg = io.BytesIO()
    photo.save(jpeg, format="JPEG", quality=95)
    answers = [
        request(served["urls"]["mnist"], {"inputs": [row]})
        for row in ({"image": b64(jpeg.getvalue())}, {"pixels": first.tolist()})
    ]
    assert [status for status, _ in answers] == [200, 200], answers
    (from_photo,), (from_pixels,) = [answer["predictions"] for _, answer in answers]
    assert from_pixels["class"] == int(probs[0].argmax())
    assert from_pixels["probability"] == pytest.approx(float(probs[0].max()), abs=1e-5)
    # the photograph as the offline model sees it after the dataset's own reading of a digit
    from pipeline.data import mnist
    from pipeline.data.inputs import model_inputs
    from pipeline.serving.classifier import probabilities

    model, size = offline["mnist-model"]
    seen = mnist.read_digit(jpeg.getvalue(), "photo.jpg", 28)
    assert np.abs(seen.astype(int) - first.astype(int)).mean() < 3  # the digit, back from the photograph
    photo_probs = probabilities(np.asarray(model.predict_on_batch(model_inputs(seen[None], size))))[0]
    assert from_photo["class"] == int(photo_probs.argmax())
    assert from_photo["probability"] == pytest.approx(float(photo_probs.max()), abs=1e-5)
    # a batch of 32 in one request
    batch = [{"image": b64(png)} for _, png in list(files.values()) * 2][:32]
    status, answer = request(served["urls"]["mnist"], {"dataframe_records": batch})
    assert status == 200 and len(answer["predictions"]) == 32


@pytest.mark.parametrize(
    "dataset,body,reason",
    [
        ("reuters", {"inputs": [{"text": ""}]}, "row 0: text: expected a text's words, got an empty text"),
        ("reuters", {"inputs": [{"txt": "grain"}]}, "expected a column 'text' or 'ids', got no columns"),
        ("reuters", {"inputs": {"text": ["grain", "oil"]}}, "row 0: text: expected a string, got a list of 2"),
        (
            "mnist",
            {"inputs": [{"image": b64(b"%PDF-1.4 not a digit")}]},
            "row 0: image: unreadable image: not a PNG or JPEG file",
        ),
        (
            "mnist",
            {"inputs": [{"pixels": [[0, 1], [2, 3]]}]},
            "row 0: pixels: expected a 28x28 array of grey values 0-255, got 2x2 values 0..3",
        ),
        (
            "mnist",
            {"inputs": [{"image": b64(b"\x89PNG\r\n\x1a\n")}], "params": {"top_k": 11}},
            "params.top_k: expected an integer from 1 to 10, got 11",
        ),
    ],
)
def test_a_bad_request_is_a_400_with_one_line(served, dataset, body, reason):
    status, answer = request(served["urls"][dataset], body)
    assert status == 400
    assert answer["message"].startswith(reason) and "\n" not in answer["message"], answer
    assert "stack_trace" not in answer and "Traceback" not in json.dumps(answer)


def test_a_request_that_is_not_json_is_a_400_without_a_traceback(served):
    status, answer = request(served["urls"]["reuters"], b'{"inputs": [{"text": ')
    assert status == 400 and answer["error_code"] == "BAD_REQUEST"
    assert "valid JSON" in answer["message"] and "Traceback" not in json.dumps(answer)
    for dataset in ("reuters", "mnist"):  # neither server logged a traceback for any bad request
        assert "Traceback" not in (served["logs"] / f"{dataset}.log").read_text()


def test_the_load_benchmark_reports_rates_and_latencies(served):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "serve.py"),
            served["urls"]["reuters"],
            "--dataset",
            "reuters",
            "--data",
            str(served["project"] / "data" / "prepared" / "reuters"),
            "--requests",
            "12",
            "--concurrency",
            "2",
            "--warmup",
            "2",
            "--batch",
            "1",
            "--batch",
            "4",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=served["env"],
    )
    assert done.returncode == 0, done.stderr
    figures = child_json(done)
    assert [f["batch"] for f in figures] == [1, 4] and all(f["ok"] == 12 and not f["failed"] for f in figures)
    for f in figures:
        assert 0 < f["p50_ms"] <= f["p99_ms"] and f["rows_per_second"] == pytest.approx(
            f["requests_per_second"] * f["batch"]
        )
    refused = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "serve.py"), "http://10.1.2.3:5001", "--dataset", "reuters"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "the load goes to this host only (127.0.0.1)" in refused.stderr


def test_a_fresh_environment_made_from_the_models_requirements_alone_loads_and_answers(served, offline, tmp_path):
    """`mlflow models predict --env-manager uv` on each champion: MLflow makes a new virtual
    environment from the logged model's requirements alone (not the project's: no DVC, Optuna,
    psycopg or NVML) and answers a newswire's text and a digit's PNG as the offline model does."""
    import keras
    import mlflow
    from mlflow.artifacts import download_artifacts

    env = {**served["env"], "MLFLOW_LOGGING_LEVEL": "INFO"}
    requirements = {}
    # models:/ resolves in the registry in force: this server's (conftest puts this process's
    # URIs, and the MLFLOW_* variables they set, back as they were after the test)
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    mlflow.set_registry_uri(env["MLFLOW_TRACKING_URI"])
    for dataset in ("reuters", "mnist"):
        text = Path(
            download_artifacts(f"models:/{dataset}@champion/requirements.txt", dst_path=str(tmp_path / dataset))
        ).read_text()
        requirements[dataset] = {line.split("==")[0] for line in text.split() if "==" in line}
    assert requirements["reuters"] == requirements["mnist"]
    assert {"mlflow", "tensorflow", "keras", "numpy", "pandas", "pillow"} <= requirements["reuters"]
    assert (
        not {"dvc", "optuna", "psycopg", "psycopg-binary", "nvidia-ml-py", "click-didyoumean"} & requirements["reuters"]
    )
    x, probs = offline["reuters"]
    from pipeline.data import reuters, texts
    from pipeline.io import read_json
    from pipeline.kinds import labelled_texts

    data = served["project"] / "data" / "prepared" / "reuters"
    text = texts.texts(
        x[:1],
        labelled_texts.load_word_index(data / reuters.WORD_INDEX_NAME),
        read_json(data / "stats.json")["encoding"]["index_from"],
    )[0]
    ((label, png),) = list(digits(served["project"]).values())[:1]
    inputs = {"reuters": {"dataframe_records": [{"text": text}]}, "mnist": {"dataframe_records": [{"image": b64(png)}]}}
    expected = {
        "reuters": keras.datasets.reuters.get_label_names()[int(probs[0].argmax())],
        "mnist": str(int(offline["mnist"][1][0].argmax())),
    }
    for dataset, body in inputs.items():
        (tmp_path / f"{dataset}.json").write_text(json.dumps(body))
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mlflow",
                "models",
                "predict",
                "-m",
                f"models:/{dataset}@champion",
                "--env-manager",
                "uv",
                "-i",
                str(tmp_path / f"{dataset}.json"),
                "-t",
                "json",
                "-o",
                str(tmp_path / f"{dataset}.out"),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
        # a new environment (in a folder of its own, removed afterwards), from the requirements
        made = re.search(r"Creating a new environment in (\S+) with python version \S+ using uv", done.stderr)
        assert made and "Installing dependencies" in done.stderr, done.stderr[-5000:]
        assert not made.group(1).startswith(sys.prefix)
        (answer,) = json.loads((tmp_path / f"{dataset}.out").read_text())["predictions"]
        assert answer["label"] == expected[dataset], answer
