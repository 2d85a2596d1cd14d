"""The project's image and compose stack, built and run by a real Docker engine.

NVIDIA's and Docker Hub's images cannot be pulled here, so the bases are stand-ins made from
Debian's packages (tests/container/): TensorFlow 2.17.0 installed the way NVIDIA's image has
it (docker/ngc-base.txt's packages), Debian's Python for NVIDIA's CUDA image and Docker Hub's
Python, and PostgreSQL. The project's own files (docker/Dockerfile, docker/cuda.Dockerfile,
docker/mlflow.Dockerfile, docker/compose.yaml) are used as shipped; only the base images and
the database image differ, and the CUDA image is built without its CUDA wheels (no GPU here).
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from runner.docker_builds import CUDA_IMAGE, HERE, IMAGE, MLFLOW_IMAGE, PY312_IMAGE, STANDIN_PY312, STANDIN_TF, run
from runner.images import wait_for_images
from support.processes import child_json, child_lines, run_python
from support.project import ROOT, copy_project, marker_env, write_params
from support.readme import README, shell_blocks
from support.servers import free_ports, wait_for_url

from pipeline.runtime import environment

pytestmark = [pytest.mark.container, pytest.mark.slow]

UID, GID = 1234, 1234  # the clone's owner: not root, not a user the image knows


def memlock_limit() -> str:
    """`-1` (unlimited, as NVIDIA recommends) where this host lets a process raise its locked-
    memory limit; otherwise the host's hard limit in bytes, the most a container can get (a
    sandbox without CAP_SYS_RESOURCE: runc then fails with "error setting rlimit type 8")."""
    import resource

    if subprocess.run(["prlimit", "--memlock=unlimited:unlimited", "true"], capture_output=True).returncode == 0:
        return "-1"
    return str(resource.getrlimit(resource.RLIMIT_MEMLOCK)[1])


def user_copy(dest: Path) -> Path:
    """What a user's clone holds, without the results and tests (the image builds none)."""
    return copy_project(dest, exclude=("reports/", "models/", "tests/"))


@pytest.fixture(scope="module")
def made():
    """The engine and images the session made in the background (tests/runner/images.py)."""
    return wait_for_images()


@pytest.fixture(scope="module")
def docker(made):
    """The session's Docker engine, with the stand-in bases and both images; what the tests
    start in it is removed at the end (the session stops the engine)."""
    env = {**os.environ, "DOCKER_HOST": made["DOCKER_HOST"], "DOCKER_BUILDKIT": "0"}
    yield env
    for what in (["container", "prune", "-f"], ["volume", "prune", "-f"], ["network", "prune", "-f"]):
        run(["docker", *what], env, check=False)


@pytest.fixture(scope="module")
def image(made):
    """The project's image on the TF 2.17 stand-in: a cold build, then a source-only rebuild."""
    return {"cold": made["cold"], "warm": made["warm"]}


def cached_steps(build_output: str) -> dict[str, bool]:
    """Each RUN step of a classic `docker build` log -> whether it came from the cache."""
    steps, current = {}, None
    for line in build_output.splitlines():
        if line.startswith("Step "):
            current = line.split(" : ", 1)[1] if line.split(" : ", 1)[1].startswith("RUN") else None
            if current:
                steps[current] = False
        elif current and "Using cache" in line:
            steps[current] = True
    return steps


def in_image(docker, *args, user=None, volumes=(), check=True, workdir=None, image=IMAGE, entrypoint=None):
    cmd = ["docker", "run", "--rm", "--network", "none"]
    for v in volumes:
        cmd += ["-v", v]
    if user:
        cmd += ["--user", user]
    if workdir:
        cmd += ["-w", workdir]
    if entrypoint:
        cmd += ["--entrypoint", entrypoint]
    return run([*cmd, image, *args], docker, check=check)


def installed(docker, image: str, python: str = "python3") -> dict[str, str]:
    """name -> version of every Python package `python` in `image` sees, pip's own tools left out."""
    out = in_image(
        docker, "-m", "pip", "list", "--format=json", "--disable-pip-version-check", image=image, entrypoint=python
    )
    from packaging.utils import canonicalize_name

    return {
        canonicalize_name(p["name"]): p["version"]
        for p in child_json(out, last_line=True)
        if canonicalize_name(p["name"]) not in ("pip", "setuptools", "wheel")
    }


def lock_for(path: Path, python: str) -> dict[str, str]:
    """What a lock installs on Linux with `python`, pip's own tools left out (as `installed`)."""
    pins = environment.lock_pins(environment.read_lock(path), marker_env(python, os.uname().machine))
    return {name: version for name, version in pins.items() if name not in ("pip", "setuptools", "wheel")}


def test_image_keeps_the_bases_tensorflow_and_pip_check_is_clean(docker, image):
    out = in_image(
        docker, "python", "-c", "import tensorflow as tf, keras; print(tf.__version__, keras.__version__, tf.__file__)"
    )
    version, keras_version, where = child_lines(out)[0].split()
    assert version == "2.17.0"
    assert keras_version == "3.8.0"
    # NVIDIA's copy, from the base's site-packages, not a second one in the project's venv
    assert where.startswith("/usr/local/lib/python3.11/dist-packages/"), where
    assert in_image(docker, "pip", "check").returncode == 0
    listed = in_image(
        docker, "pip", "list", "--format=json", "--path", "/opt/pipeline/venv/lib/python3.11/site-packages"
    )
    in_venv = {p["name"].lower() for p in child_json(listed, last_line=True)}
    assert {"mlflow", "dvc", "pipeline"} <= in_venv
    assert not in_venv & {"tensorflow", "tensorflow-cpu", "keras", "numpy", "protobuf", "h5py", "ml-dtypes"}


def test_every_image_holds_exactly_its_locks(docker, image, made):
    """NVIDIA's image: its base's packages (docker/ngc-base.txt) and docker/ngc.lock's; the CUDA
    image: requirements.lock's (what the host's .venv holds); the MLflow image: docker/mlflow.lock's.
    Each with the project where it belongs, and nothing else."""
    from packaging.utils import canonicalize_name

    base: dict[str, str] = {
        canonicalize_name(n): v
        for n, v in re.findall(r"^([A-Za-z0-9._-]+)==(\S+)$", (ROOT / "docker" / "ngc-base.txt").read_text(), re.M)
    }
    ngc = installed(docker, IMAGE, python="/opt/pipeline/venv/bin/python")
    assert ngc == {**base, **lock_for(ROOT / "docker" / "ngc.lock", "3.11"), "pipeline": ngc["pipeline"]}
    cuda = installed(docker, CUDA_IMAGE, python="/opt/pipeline/venv/bin/python")
    assert cuda == {**lock_for(ROOT / "requirements.lock", "3.11"), "pipeline": cuda["pipeline"]}
    assert installed(docker, MLFLOW_IMAGE, python="/opt/mlflow/bin/python") == lock_for(
        ROOT / "docker" / "mlflow.lock", "3.11"
    )
    assert (
        ngc["tensorflow"] == "2.17.0"
        and cuda["tensorflow"] == lock_for(ROOT / "requirements.lock", "3.11")["tensorflow"]
    )


def shown(output: str) -> list[str]:
    """A build's output lines, without the colours the builder gives a step's stderr."""
    return re.sub(r"\x1b\[[0-9;]*m", "", output).splitlines()


def image_file(docker, image: str, path: str) -> str:
    return in_image(docker, path, image=image, entrypoint="cat").stdout


def strict_line(base: str) -> str:
    return f"base {base}: its Python packages are docker/ngc-base.txt's; installing docker/ngc.lock as locked"


def test_a_base_unlike_the_list_builds_with_a_lock_resolved_against_it(docker, made, tmp_path):
    """The stand-in that imitates NVIDIA's image where it differs from docker/ngc-base.txt
    (Python 3.12, TensorFlow 2.17.0+nv25.2, JupyterLab, pyyaml/attrs/jinja2/psutil at other
    versions than docker/ngc.lock's): the README's build succeeds, says so in one line, leaves
    every package of the base as it was, adds exactly the lock it carries (its digest in a
    label), and the documented pin makes the next build on that base strict."""
    from packaging.utils import canonicalize_name

    base = installed(docker, STANDIN_PY312)
    committed = lock_for(ROOT / "docker" / "ngc.lock", "3.12")
    listed = {
        canonicalize_name(n): v
        for n, v in re.findall(r"^([A-Za-z0-9._-]+)==(\S+)$", (ROOT / "docker" / "ngc-base.txt").read_text(), re.M)
    }
    # what the stand-in imitates
    assert in_image(docker, "--version", image=STANDIN_PY312, entrypoint="python3").stdout.startswith("Python 3.12.")
    assert base["tensorflow"] == "2.17.0+nv25.2" and "jupyterlab" in base and "jupyterlab" not in listed
    assert [name for name in ("pyyaml", "attrs", "jinja2", "psutil") if base[name] != committed[name]] == [
        "pyyaml",
        "attrs",
        "jinja2",
        "psutil",
    ]

    lines = shown(made["py312"])
    said = [line for line in lines if line.startswith(f"base {STANDIN_PY312}:")]
    assert len(said) == 1 and "its Python packages are not docker/ngc-base.txt's" in said[0], said
    assert "scripts/base-packages.sh --pin IMAGE" in said[0]
    assert [line for line in lines if line.startswith("error:")] == []

    lock_text = image_file(docker, PY312_IMAGE, "/opt/pipeline/ngc.lock")
    (tmp_path / "ngc.lock").write_text(lock_text)
    pins = environment.read_lock(tmp_path / "ngc.lock")
    assert pins and all(hashes for _, _, _, hashes in pins), "a pin without its hashes"
    lock = lock_for(tmp_path / "ngc.lock", "3.12")
    assert not set(lock) & set(base), "the lock would replace the base's packages"
    sees = installed(docker, PY312_IMAGE, python="/opt/pipeline/venv/bin/python")
    assert {name: sees[name] for name in base} == base  # every package of the base, as it was
    assert sees == {**base, **lock, "pipeline": sees["pipeline"]}
    listed_venv = in_image(
        docker,
        "-m",
        "pip",
        "list",
        "--format=json",
        "--path",
        "/opt/pipeline/venv/lib/python3.12/site-packages",
        image=PY312_IMAGE,
        entrypoint="/opt/pipeline/venv/bin/python",
    )
    in_venv = {
        canonicalize_name(p["name"]): p["version"]
        for p in child_json(listed_venv, last_line=True)
        if canonicalize_name(p["name"]) != "pip"
    }  # the venv's own pip, which `venv` puts there
    assert in_venv == {**lock, "pipeline": sees["pipeline"]}  # what the image added: exactly its lock
    where = child_lines(
        in_image(docker, "python", "-c", "import tensorflow as tf; print(tf.__file__)", image=PY312_IMAGE)
    )[-1]
    assert where.startswith("/root/.pyenv/versions/3.12.1/lib/python3.12/site-packages/"), where
    assert in_image(docker, "pip", "check", image=PY312_IMAGE).returncode == 0
    labels = child_json(run(["docker", "image", "inspect", "-f", "{{json .Config.Labels}}", PY312_IMAGE], docker))
    assert labels["org.pipeline.lock.sha256"] == hashlib.sha256(lock_text.encode()).hexdigest()

    # `scripts/base-packages.sh --pin IMAGE` wrote the image's lock and the base's list into the clone
    assert made["pinned_lock"] == lock_text
    assert made["pinned_list"] == image_file(docker, PY312_IMAGE, "/opt/pipeline/ngc-base.txt")
    assert {
        canonicalize_name(n): v for n, v in re.findall(r"^([A-Za-z0-9._-]+)==(\S+)$", made["pinned_list"], re.M)
    } == {name: v for name, v in base.items()}
    # and the next build on that base is strict: the Dockerfile's check, on the clone's files in
    # that base, keeps the lock as committed (which installs as PY312_IMAGE's did, hashes checked)
    assert strict_line(STANDIN_PY312) in shown(made["py312_pinned"])
    assert made["py312_pinned"].endswith(lock_text)


def test_a_base_the_project_cannot_be_resolved_on_stops_the_build_in_one_line(docker, made, tmp_path):
    """A base whose packages leave the project no solution (here: the stand-in with click 7,
    where pyproject.toml needs 8) stops the build with one line, and no image is made."""
    (tmp_path / "Dockerfile").write_text(
        f"FROM {STANDIN_TF}\nRUN python3 -m pip install --no-cache-dir --break-system-packages --no-deps click==7.1.2\n"
    )
    run(["docker", "build", "-q", "--network", "host", "-t", "pipeline-standin/click7", tmp_path], docker)
    context = copy_project(tmp_path / "context", exclude=("reports/", "models/", "tests/"))
    out = run(
        [
            "bash",
            context / "scripts" / "build-image.sh",
            "--network",
            "host",
            "--build-arg",
            "BASE_IMAGE=pipeline-standin/click7",
            "-t",
            "pipeline:click7",
        ],
        docker,
        check=False,
    )
    made_image = run(["docker", "image", "inspect", "pipeline:click7"], docker, check=False).returncode == 0
    run(["docker", "image", "rm", "-f", "pipeline-standin/click7", "pipeline:click7"], docker, check=False)
    assert out.returncode != 0 and not made_image
    errors = [line for line in shown(out.stdout + out.stderr) if line.startswith("error:")]
    assert len(errors) == 1, errors
    assert errors[0].startswith(
        "error: cannot resolve pyproject.toml's dependencies against the base's installed packages: "
    ), errors
    assert "click" in errors[0]


def test_source_change_rebuilds_from_the_cached_dependency_layer(image):
    cold, warm = cached_steps(image["cold"]), cached_steps(image["warm"])
    deps = [step for step in warm if "-r /opt/pipeline/ngc.lock" in step]
    assert len(deps) == 1 and warm[deps[0]] is True and cold[deps[0]] is False
    sources = [step for step in warm if "--no-deps ." in step]
    assert len(sources) == 1 and warm[sources[0]] is False


def test_the_engine_starts_with_nothing_of_an_earlier_session_but_what_it_keeps(made):
    """The engine keeps its images from one session to the next (tests/runner/images.py): when this
    one starts, it holds no container or volume, and no image but the stand-ins and the kept
    installs (`pipeline-kept/...`), so that the project's image above is built cold."""
    found = made["found"]
    assert found["container"] == [] and found["volume"] == [], found
    kept = ("pipeline-standin/", "pipeline-kept/")
    assert all(tag.startswith(kept) or tag == "<none>:<none>" for tag in found["image"]), found["image"]


def test_image_labels_and_lineage_environment(docker, image):
    labels = child_json(run(["docker", "image", "inspect", "-f", "{{json .Config.Labels}}", IMAGE], docker))
    assert labels["org.opencontainers.image.base.name"] == STANDIN_TF
    assert labels["org.opencontainers.image.version"] == "ctest"
    assert labels["org.opencontainers.image.title"] == "pipeline"
    # the base is docker/ngc-base.txt's: the committed lock, installed as locked, is the label's
    assert labels["org.pipeline.lock.sha256"] == hashlib.sha256((ROOT / "docker" / "ngc.lock").read_bytes()).hexdigest()
    assert strict_line(STANDIN_TF) in shown(image["cold"])
    env = in_image(docker, "env").stdout
    assert "PIPELINE_IMAGE=pipeline:ctest" in env
    assert "NVIDIA_TENSORFLOW_VERSION=25.02-tf2-py3" in env


def test_read_only_clone_and_missing_clone_get_one_line(docker, image, tmp_path):
    clone = user_copy(tmp_path / "clone")
    os.chown(clone, UID, GID)
    before = sorted(p.name for p in clone.iterdir())
    ro = in_image(docker, "dvc", "repro", user=f"{UID}:{GID}", volumes=[f"{clone}:/workspace/project:ro"], check=False)
    assert ro.returncode == 2
    assert ro.stderr.strip() == (
        f"error: /workspace/project is not writable by uid {UID}: mount the clone "
        'read-write and run as its owner (--user "$(id -u):$(id -g)")'
    )
    assert sorted(p.name for p in clone.iterdir()) == before
    empty = in_image(docker, "dvc", "repro", check=False)
    assert empty.returncode == 2
    assert empty.stderr.strip() == (
        'error: /workspace/project has no dvc.yaml: mount your clone there (-v "$PWD":/workspace/project)'
    )


def test_gpus_asked_for_on_a_host_without_any_is_one_config_line(docker, image, tmp_path):
    clone = user_copy(tmp_path / "clone")
    write_params(clone, {"train.reuters.devices.visible_gpus": [0]})
    out = in_image(
        docker, "pipeline", "devices", "--dataset", "reuters", volumes=[f"{clone}:/workspace/project"], check=False
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    # TF 2.17 itself logs CUDA plugin notices at import (see docs/known-issues.md)
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert errors == [out.stderr.strip().splitlines()[-1]], out.stderr
    assert errors[0].startswith("error: train.reuters.devices.visible_gpus: asked for GPU 0"), out.stderr


def test_reuters_embedding_on_two_replicas_trains_on_tf_2_17(docker, image, tmp_path):
    """keras-team/keras#21069: Embedding + fit on two devices failed on TF 2.17/2.18."""
    from support.datasets import make_reuters_npz, make_word_index

    clone = user_copy(tmp_path / "clone")
    make_reuters_npz(tmp_path / "reuters.npz")
    make_word_index(tmp_path / "reuters_word_index.json")
    script = (
        "set -e; pipeline preprocess reuters --raw /raw --out /tmp/prepared --params p.yaml >/dev/null; "
        "for loop in fit custom; do pipeline devices --dataset reuters --params p.yaml --json "
        '| python -c \'import json,sys; print("replicas", json.load(sys.stdin)["replicas"])\'; '
        "python - \"$loop\" <<'EOF'\n"
        "import sys, yaml\n"
        "raw = yaml.safe_load(open('p.yaml')); raw['train']['reuters']['loop'] = sys.argv[1]\n"
        "yaml.safe_dump(raw, open('p2.yaml', 'w'))\n"
        "EOF\n"
        "MLFLOW_TRACKING_URI=sqlite:////tmp/mlflow.db pipeline train reuters --data /tmp/prepared "
        "--model-dir /tmp/m-$loop --history /tmp/h-$loop.csv --summary /tmp/s-$loop.json --curves /tmp/c-$loop.png "
        "--measurements /tmp/x-$loop.json --params p2.yaml; "
        "python -c \"import json; print('$loop', json.load(open('/tmp/x-$loop.json'))['replicas'])\"; done"
    )
    write_params(
        clone,
        {
            "train.reuters.devices.logical_devices": 2,
            "train.reuters.epochs": 2,
            "train.reuters.batch_size_per_replica": 16,
        },
    ).rename(clone / "p.yaml")
    raw = tmp_path / "raw"
    raw.mkdir()
    for name in ("reuters.npz", "reuters_word_index.json"):
        shutil.move(tmp_path / name, raw / name)
    out = in_image(docker, "bash", "-c", script, volumes=[f"{clone}:/workspace/project", f"{raw}:/raw:ro"], check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    lines = out.stdout.splitlines()
    assert "fit 2" in lines and "custom 2" in lines, out.stdout


# --- the compose stack -------------------------------------------------------------------


def user_clone(dest: Path, dataset_files: Path, overrides: dict) -> Path:
    """A committed clone with small params and the fixtures' sha256 values (so that the real
    check runs), owned by the non-root user UID."""
    import hashlib

    clone = user_copy(dest)
    write_params(clone, overrides)
    raw = yaml.safe_load((clone / "params.yaml").read_text())
    for entry in raw["download"]["reuters"]["files"]:
        entry["sha256"] = hashlib.sha256((dataset_files / Path(entry["url"]).name).read_bytes()).hexdigest()
    (clone / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    git = {
        **os.environ,
        "GIT_AUTHOR_NAME": "c",
        "GIT_AUTHOR_EMAIL": "c@example.org",
        "GIT_COMMITTER_NAME": "c",
        "GIT_COMMITTER_EMAIL": "c@example.org",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "project"]):
        run(["git", *args], git, cwd=clone)
    subprocess.run(["chown", "-R", f"{UID}:{GID}", clone], check=True)
    return clone


@pytest.fixture(scope="module")
def stack(docker, image, tmp_path_factory, dataset_files):
    """docker/compose.yaml up (db, mlflow) on a clone owned by a non-root user."""
    base = tmp_path_factory.mktemp("stack")
    clone = user_clone(
        base / "project",
        dataset_files,
        {
            "train.reuters.epochs": 2,
            "train.reuters.batch_size_per_replica": 16,
            "train.reuters.devices.logical_devices": 2,
            "train.mnist.epochs": 1,
            "train.mnist.batch_size_per_replica": 16,
            "evaluate.mnist.batch_size": 32,
        },
    )
    (port,) = free_ports(1)
    (clone / "docker" / ".env").write_text(
        "POSTGRES_USER=mlflow\nPOSTGRES_PASSWORD=ctest0secret\nPOSTGRES_DB=mlflow\n"
        f"PIPELINE_UID={UID}\nPIPELINE_GID={GID}\nPIPELINE_VERSION=ctest\nMLFLOW_PUBLISH=127.0.0.1:{port}\n"
    )
    subprocess.run(["chown", f"{UID}:{GID}", clone / "docker" / ".env"], check=True)
    fixtures = base / "fixtures"
    shutil.copytree(dataset_files, fixtures)
    fixtures.chmod(0o755)  # read by the container's non-root user

    project = f"ctest{os.getpid()}"
    compose = [
        "docker-compose",
        "-p",
        project,
        "-f",
        clone / "docker" / "compose.yaml",
        "-f",
        HERE / "compose.standin.yaml",
    ]
    if memlock_limit() != "-1":
        (base / "memlock.yaml").write_text(f"services:\n  pipeline:\n    ulimits:\n      memlock: {memlock_limit()}\n")
        compose += ["-f", base / "memlock.yaml"]
    t0 = time.time()
    run([*compose, "up", "-d", "--no-build", "mlflow"], docker)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 240
    while True:
        state = run(
            ["docker", "inspect", "-f", "{{.State.Health.Status}}", f"{project}_mlflow_1"], docker, check=False
        ).stdout.strip()
        if state == "healthy":
            break
        if time.time() > deadline:
            logs = run([*compose, "logs", "--no-color", "--tail", "50"], docker, check=False).stdout
            raise AssertionError(f"mlflow did not become healthy ({state}):\n{logs}")
        time.sleep(2)
    print(f"db + mlflow healthy after {time.time() - t0:.0f} s")
    yield {"clone": clone, "compose": compose, "url": url, "fixtures": fixtures, "env": docker, "project": project}
    run([*compose, "down", "-v", "--remove-orphans"], docker, check=False)


def in_stack(stack, *args, service="pipeline", check=True, extra=()):
    return run([*stack["compose"], "run", "--rm", "-T", *extra, service, *args], stack["env"], check=check)


@pytest.fixture(scope="module")
def repro(stack):
    """`dvc repro` in the pipeline service, as the clone's owner, data served from 127.0.0.1."""
    t0 = time.time()
    out = in_stack(
        stack,
        "bash",
        "-c",
        "python3 -m http.server --bind 127.0.0.1 --directory /fixtures 8765 >/dev/null 2>&1 & exec dvc repro",
        extra=["-v", f"{stack['fixtures']}:/fixtures:ro", "-e", "PIPELINE_DATA_MIRROR=http://127.0.0.1:8765"],
        check=False,
    )
    print(f"\ndvc repro in the pipeline service: {time.time() - t0:.0f} s")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    return out


def test_compose_repro_writes_outputs_owned_by_the_user(stack, repro):
    clone = stack["clone"]
    for path in (
        "models/reuters/model.keras",
        "models/mnist/model.keras",
        "reports/reuters/metrics.json",
        "reports/mnist/metrics.json",
        "dvc.lock",
        "data/prepared/reuters/train-00000-of-00001.bin",
    ):
        st = (clone / path).stat()
        assert (st.st_uid, st.st_gid) == (UID, GID), path
    written = [p for p in clone.rglob("*") if p.stat().st_uid != UID and ".git" not in p.parts]
    assert written == []


def test_compose_runs_reach_the_server_with_the_image_tag(stack, repro):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=stack["url"])
    for dataset in ("reuters", "mnist"):
        exp = client.get_experiment_by_name(dataset)
        assert exp is not None, dataset
        (run_,) = client.search_runs([exp.experiment_id])
        assert run_.info.status == "FINISHED"
        assert run_.data.tags["container.image"] == "pipeline:ctest"
        assert run_.data.tags["container.nvidia_tensorflow"] == "25.02-tf2-py3"
        assert run_.data.tags["tensorflow.version"] == "2.17.0"
        assert run_.data.tags["python.environment"] == "container"  # not requirements.lock's
        assert "test_accuracy" in run_.data.metrics
        assert run_.data.params["distribute.replicas"] == ("2" if dataset == "reuters" else "1")
        assert run_.info.artifact_uri.startswith("mlflow-artifacts:")
    # artifacts went through the server onto its volume; runs are rows in PostgreSQL
    stored = in_stack(
        stack, "/mlflow/artifacts", "-name", "history.csv", service="mlflow", extra=["--entrypoint", "find"]
    ).stdout.split()
    assert len(stored) == 2, stored
    rows = run(
        [
            *stack["compose"],
            "exec",
            "-T",
            "db",
            "psql",
            "-U",
            "mlflow",
            "-d",
            "mlflow",
            "-tAc",
            "SELECT count(*) FROM runs WHERE status = 'FINISHED'",
        ],
        stack["env"],
    ).stdout.strip()
    assert int(rows) == 2


def test_doctor_in_the_pipeline_service(stack, repro):
    # as root on a clone owned by another uid: git's "dubious ownership" must not bite
    out = in_stack(stack, "pipeline", "doctor", "--json", extra=["--user", "0:0"], check=False)
    checks = {c["name"]: c for c in child_json(out, start="[")}
    assert checks["tracking"]["status"] == "pass", checks["tracking"]
    assert "http://mlflow:5000" in checks["tracking"]["detail"]
    assert checks["git"]["status"] == "pass", checks["git"]
    assert out.returncode == (1 if any(c["status"] == "fail" for c in checks.values()) else 0)


def test_the_tracking_server_runs_without_mlflows_job_runners(stack):
    """The server's container: the start script's `mlflow server` and its one worker, without
    MLflow's GenAI job runner and its Huey consumers (docker/compose.yaml turns them off)."""
    top = run(["docker", "top", f"{stack['project']}_mlflow_1", "-eo", "pid,args"], stack["env"]).stdout
    assert "mlflow.server.fastapi" in top, top  # the server's worker
    assert "_job_runner" not in top and "huey" not in top, top


def test_wrong_database_password_is_one_line(stack):
    out = in_stack(
        stack,
        service="mlflow",
        check=False,
        extra=["-e", "MLFLOW_BACKEND_STORE_URI=postgresql://mlflow:wrong@db:5432/mlflow"],
    )
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: cannot open the backend store postgresql://mlflow:***@db:5432/mlflow: ")
    assert "password authentication failed" in lines[0] and "docker/.env" in lines[0]


def test_basic_auth_refuses_anonymous_requests_and_the_pipeline_logs_with_credentials(stack, repro):
    (port,) = free_ports(1)
    name = f"{stack['project']}_mlflow_auth"
    run(
        [
            *stack["compose"],
            "run",
            "-d",
            "--name",
            name,
            "-p",
            f"127.0.0.1:{port}:5000",
            "-e",
            "MLFLOW_AUTH_ADMIN_PASSWORD=ctest-admin-pw",
            "-e",
            f"MLFLOW_ALLOWED_HOSTS={name}:5000,127.0.0.1:*",
            "mlflow",
        ],
        stack["env"],
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_url(f"{url}/health", 180, lambda: "the basic-auth server did not start")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{url}/api/2.0/mlflow/experiments/search?max_results=1", timeout=10)
        assert refused.value.code == 401
        out = in_stack(
            stack,
            "dvc",
            "repro",
            "--force",
            "--single-item",
            "train@reuters",
            "evaluate@reuters",
            check=False,
            extra=[
                "-e",
                f"MLFLOW_TRACKING_URI=http://{name}:5000",
                "-e",
                "MLFLOW_TRACKING_USERNAME=admin",
                "-e",
                "MLFLOW_TRACKING_PASSWORD=ctest-admin-pw",
            ],
        )
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        from mlflow import MlflowClient

        os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = "admin", "ctest-admin-pw"
        try:
            client = MlflowClient(tracking_uri=url)
            exp = client.get_experiment_by_name("reuters")
            assert exp is not None
            runs = client.search_runs([exp.experiment_id])
        finally:
            del os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"]
        assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    finally:
        run(["docker", "rm", "-f", name], stack["env"], check=False)


def test_database_down_is_reported_by_doctor(stack, repro):
    run([*stack["compose"], "stop", "db"], stack["env"])
    try:
        out = in_stack(stack, "pipeline", "doctor", "--json", check=False, extra=["--no-deps"])
        checks = {c["name"]: c for c in child_json(out, start="[")}
        assert out.returncode == 1
        assert checks["tracking"]["status"] == "fail", checks["tracking"]
        assert "database" in checks["tracking"]["detail"] + checks["tracking"]["fix"]
    finally:
        run([*stack["compose"], "start", "db"], stack["env"])


def test_the_serve_profile_serves_the_champion_from_the_server(stack, repro):
    """`pipeline promote` in the pipeline service, then `docker compose --profile serve up
    serve-reuters`: the champion, from the server's registry, answers a newswire's text on
    the published port."""
    promoted = in_stack(stack, "pipeline", "promote", "reuters")
    # after the image's banner
    assert re.match(
        r"reuters: version \d+ \(test_accuracy 0\.\d{4}\) is the champion \(there was none\)$",
        promoted.stdout.strip().splitlines()[-1],
    ), promoted.stdout + promoted.stderr
    (port,) = free_ports(1)
    env = {**stack["env"], "SERVE_REUTERS_PUBLISH": f"127.0.0.1:{port}"}
    run([*stack["compose"], "--profile", "serve", "up", "-d", "--no-build", "serve-reuters"], env)
    try:
        wait_for_url(
            f"http://127.0.0.1:{port}/ping",
            300,
            lambda: run([*stack["compose"], "logs", "--no-color", "serve-reuters"], env, check=False).stdout[-3000:],
        )
        body = json.dumps({"inputs": [{"text": "Wheat and grain exports rose, the ministry said"}]}).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/invocations", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=60) as answer:
            (prediction,) = json.loads(answer.read())["predictions"]
        assert isinstance(prediction["label"], str) and 0 <= prediction["class"] < 46
        assert 0 < prediction["probability"] <= 1 and len(prediction["top_k"]) == 5
        logs = run([*stack["compose"], "logs", "--no-color", "serve-reuters"], env, check=False).stdout
        assert "models:/reuters@champion, version" in logs and "Traceback" not in logs
    finally:
        run([*stack["compose"], "--profile", "serve", "rm", "-sf", "serve-reuters"], env, check=False)


def test_compose_up_runs_the_pipeline_once_the_server_is_healthy(stack, repro):
    """`docker compose up` as the README gives it (images already built on the stand-ins):
    the pipeline service waits for a healthy server, runs `dvc repro` (up to date after the
    repro above) and its exit code is the command's. It stops the stack: keep this last."""
    out = run(
        [*stack["compose"], "up", "--no-build", "--no-color", "--exit-code-from", "pipeline"], stack["env"], check=False
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    # `up` replays the other services' earlier logs too (the server's own tracebacks from the
    # database outage above): only the pipeline service's lines are the pipeline's output.
    pipeline = [
        line.split("|", 1)[1].strip() for line in out.stdout.splitlines() if re.match(r"pipeline[_-]1\s+\|", line)
    ]
    assert "Data and pipelines are up to date." in pipeline, out.stdout[-3000:]
    assert not any("Traceback" in line for line in pipeline), pipeline
    assert "Traceback" not in out.stderr


def readme_block(containing: str) -> str:
    """The README's bash block holding `containing`, as a user would paste it."""
    (block,) = [b.code for b in shell_blocks(README) if b.syntax == "bash" and containing in b.code]
    return block


@pytest.fixture
def shared_tmp():
    """A folder another user can enter (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="pipeline-ctest-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_readme_docker_run_line_runs_the_pipeline_as_the_user(docker, stack, repro, shared_tmp):
    """The README's `docker run` lines, pasted by a non-root user in a clone (the stand-in
    hook accepts `--gpus all`); only the image tag and a file mirror of the data are added.
    The clone is the compose stack's after its `dvc repro`, with one param changed, so that the
    image trains (Reuters) and skips what is up to date."""
    block = readme_block("-e MLFLOW_TRACKING_URI pipeline")
    assert block.rstrip().endswith(" pipeline")
    script = block.rstrip()[: -len(" pipeline")].replace(
        "--ulimit memlock=-1", f"--ulimit memlock={memlock_limit()}"
    ) + (' -e PIPELINE_DATA_MIRROR=file:///fixtures -v "$FIXTURES":/fixtures:ro ' + IMAGE + "\n")
    clone = shutil.copytree(stack["clone"], shared_tmp / "clone", symlinks=True)
    params = yaml.safe_load((clone / "params.yaml").read_text())
    params["train"]["reuters"]["epochs"] = 1
    (clone / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    home = shared_tmp / "home"
    cache = home / ".cache" / "pipeline-dvc"  # what the README mounts as the DVC cache: the clone's, so far
    cache.parent.mkdir(parents=True)
    shutil.move(clone / ".dvc" / "cache", cache)
    (clone / ".dvc" / "cache").mkdir()  # where it is mounted
    subprocess.run(["chown", "-R", f"{UID}:{GID}", clone, home], check=True)
    # the user reaches the test's engine: its socket, and the folder holding it
    sock = Path(docker["DOCKER_HOST"].removeprefix("unix://"))
    sock.parent.chmod(0o711)
    sock.chmod(0o666)
    env = {**docker, "HOME": str(home), "FIXTURES": str(stack["fixtures"])}
    env.pop("MLFLOW_TRACKING_URI", None)
    t0 = time.time()
    out = run(
        ["setpriv", f"--reuid={UID}", f"--regid={GID}", "--clear-groups", "bash", "-euc", script],
        env,
        check=False,
        cwd=clone,
    )
    print(f"\nREADME docker run line (dvc repro): {time.time() - t0:.0f} s")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    ran = re.findall(r"Running stage '([^']+)'", out.stdout)
    assert ran == ["train@reuters", "evaluate@reuters"], out.stdout[-3000:]
    assert (clone / "reports" / "reuters" / "metrics.json").stat().st_uid == UID
    assert [p for p in clone.rglob("*") if p.stat().st_uid != UID] == []
    lock = yaml.safe_load((clone / "dvc.lock").read_text())
    model = next(o["md5"] for o in lock["stages"]["train@reuters"]["outs"] if o["path"] == "models/reuters")
    assert (cache / "files" / "md5" / model[:2] / model[2:]).is_file(), "the new model is in the host's DVC cache"
    assert not any((clone / ".dvc" / "cache").iterdir())
    # no tracking URI: runs went to mlflow.db in the clone, tagged with the image
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{clone / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("reuters")
    assert experiment is not None
    (run_,) = client.search_runs([experiment.experiment_id])
    assert run_.data.tags["container.image"] == "pipeline:ctest"


DIGEST = (
    "import sys; from pipeline.training import model_folder, trainer; "
    "print(trainer.weights_digest(model_folder.load_model(sys.argv[1])))"
)


def test_the_cuda_image_trains_the_hosts_weights_and_the_ngc_images_figures_are_shown(
    docker, image, made, trained_project, tmp_path
):
    """The Reuters training at the defaults on the fixture data, as the session's trained project
    ran it on this host: in the CUDA image (requirements.lock's TensorFlow) it ends with the same
    weights to the bit (weights.sha256) and the same per-epoch figures. In NVIDIA's image
    (TensorFlow 2.17, Keras 3.8) nothing promises as much: its figures and digest are printed
    beside the host's (docs/containers.md quotes them), and its losses must be numbers."""
    clone = trained_project.copy(tmp_path / "clone")
    host = run_python(DIGEST, args=[clone / "models" / "reuters"])
    assert host.returncode == 0, host.stderr
    script = (
        "set -e; MLFLOW_TRACKING_URI=sqlite:////tmp/mlflow.db pipeline -q train reuters --data "
        "data/prepared/reuters --model-dir /tmp/m --history /tmp/h.csv --summary /tmp/s.json --curves /tmp/c.png; "
        f"echo @@digest; python -c '{DIGEST}' /tmp/m; echo @@history; cat /tmp/h.csv"
    )
    runs = {}
    for name, tag in (("cuda", CUDA_IMAGE), ("ngc", IMAGE)):
        out = in_image(docker, "bash", "-c", script, volumes=[f"{clone}:/workspace/project:ro"], image=tag, check=False)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        digest, history = out.stdout.split("@@digest\n", 1)[1].split("@@history\n", 1)
        runs[name] = (digest.strip(), history.strip().splitlines())
    host_rows = history_table(history_rows(clone))
    assert runs["cuda"][0] == host.stdout.strip(), "the CUDA image's training ended with other weights than the host's"
    assert history_table(runs["cuda"][1]) == host_rows
    ngc_rows = history_table(runs["ngc"][1])
    print("\nReuters at the defaults on the fixture data, per epoch (host = CUDA image, then NVIDIA's image):")
    for key in ("loss", "val_loss", "val_accuracy"):
        print(f"  {key:<13} host {' '.join(host_rows[key])}\n  {'':<13} ngc  {' '.join(ngc_rows[key])}")
    print(f"  weights.sha256 host {host.stdout.strip()[:16]}..., ngc {runs['ngc'][0][:16]}...")
    assert all(float(v) == float(v) for v in ngc_rows["loss"])  # no NaN in NVIDIA's build either


def history_rows(clone: Path) -> list[str]:
    return (clone / "reports" / "reuters" / "history.csv").read_text().strip().splitlines()


def history_table(rows: list[str]) -> dict[str, list[str]]:
    """history.csv's columns by name, the timing ones left out (they differ run to run)."""
    header, *values = [row.split(",") for row in rows]
    return {key: [v[i] for v in values] for i, key in enumerate(header) if "second" not in key}


def test_readme_selftest_line_passes_in_the_image(docker, image, tmp_path):
    """The README's `pipeline selftest` line in a clone, with the image tag and Reuters only
    (its minutes are the MNIST model's too on a GPU host): on the stand-in, two logical CPU
    devices and TensorFlow 2.17."""
    block = readme_block("pipeline selftest")
    assert block.rstrip().endswith(" pipeline pipeline selftest")
    script = (
        block.rstrip()[: -len(" pipeline pipeline selftest")].replace(
            "--ulimit memlock=-1", f"--ulimit memlock={memlock_limit()}"
        )
        + f" {IMAGE} pipeline selftest --dataset reuters\n"
    )
    clone = user_copy(tmp_path / "clone")
    t0 = time.time()
    out = run(["bash", "-euc", script], docker, check=False, cwd=clone)
    print(f"\nREADME selftest line (Reuters): {time.time() - t0:.0f} s")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert [line.split()[0] for line in out.stdout.splitlines()[-4:]] == ["pass", "pass", "pass", "selftest:"], (
        out.stdout
    )
