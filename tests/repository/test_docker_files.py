"""The container files as written: hadolint-clean, the compose file as Compose reads it, and
the deploy examples pointing at the project's image. (tests/scenarios/test_container.py builds and runs them.)"""

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.project import ROOT

DOCKERFILES = [
    ROOT / "docker" / "Dockerfile",
    ROOT / "docker" / "cuda.Dockerfile",
    ROOT / "docker" / "mlflow.Dockerfile",
    *sorted((ROOT / "tests" / "container").glob("*.Dockerfile")),
]


def test_dockerfiles_are_hadolint_clean():
    hadolint = Path(sys.executable).parent / "hadolint"
    out = subprocess.run([str(hadolint), "--no-color", *map(str, DOCKERFILES)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_image_has_the_container_bases_tensorflow_as_its_default():
    text = (ROOT / "docker" / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=nvcr.io/nvidia/tensorflow:25.02-tf2-py3\nFROM ${BASE_IMAGE}" in text
    # the dependency layer comes before the sources, so a code change does not reinstall it
    assert text.index("-r /opt/pipeline/ngc.lock") < text.index("COPY pipeline/")


def test_every_image_installs_from_a_hashed_lock_only():
    """pip in the images installs hashed locks (`--require-hashes --no-deps`), or the project
    itself (`--no-deps .`): no range is resolved at build time."""
    for dockerfile in (ROOT / "docker").glob("*Dockerfile"):
        text = dockerfile.read_text().replace("\\\n", " ")
        installs = re.findall(r"pip install ([^&;]*)", text)
        assert installs, dockerfile
        for args in installs:
            assert "--no-deps" in args and ("--require-hashes" in args or args.rstrip().endswith(" .")), (
                f"{dockerfile.name}: pip install {args.strip()}"
            )


def test_the_cuda_image_is_on_nvidias_cuda_runtime_with_the_hosts_lock():
    text = (ROOT / "docker" / "cuda.Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=nvcr\.io/nvidia/cuda:[\d.]+-cudnn-runtime-ubuntu24\.04$", text, re.M)
    assert "-r /opt/pipeline/requirements.lock" in text and "-r /opt/pipeline/cuda.lock" in text


def test_dockerignore_keeps_data_stores_and_environments_out():
    """What the build context holds, by Docker's rules: the package and the start scripts."""
    patterns = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert patterns[0] == "*"  # everything out, then the few things the images need back in
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    assert allowed == {
        "pyproject.toml",
        "README.md",
        "requirements.lock",
        "pipeline",
        "stages",
        "docker/entrypoint.sh",
        "docker/mlflow-serve.py",
        "docker/check-base.py",
        "docker/ngc-base.txt",
        "docker/*.lock",
    }
    copied: set[str] = set()
    for dockerfile in DOCKERFILES[:3]:
        for line in dockerfile.read_text().splitlines():
            if line.startswith("COPY "):
                copied.update(p.rstrip("/") for p in line.split()[1:-1])
    assert [c for c in copied if not any(fnmatch.fnmatch(c, a) for a in allowed)] == []


@pytest.fixture
def compose_config(tmp_path):
    compose = shutil.which("docker-compose")
    if compose is None:  # installed by scripts/system-deps.sh, which `make test` runs
        pytest.fail("docker-compose is not installed: run scripts/system-deps.sh")
    out = subprocess.run(
        [
            compose,
            "--env-file",
            str(ROOT / "docker" / ".env.example"),
            "-f",
            str(ROOT / "docker" / "compose.yaml"),
            "config",
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("POSTGRES_")},
    )
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def test_compose_stack_as_compose_reads_it(compose_config):
    services = compose_config["services"]
    assert set(services) == {"db", "mlflow", "pipeline", "serve-reuters", "serve-mnist"}
    pipeline = services["pipeline"]
    for dataset, port in (("reuters", 5001), ("mnist", 5002)):  # started with --profile serve only
        serve = services[f"serve-{dataset}"]
        assert serve["profiles"] == ["serve"] and serve["image"] == pipeline["image"]
        assert serve["command"] == ["pipeline", "serve", dataset, "--host", "0.0.0.0", "--port", str(port)]
        assert serve["environment"]["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
        assert serve["depends_on"] == {"mlflow": {"condition": "service_healthy"}}
        assert serve["ports"] == [f"127.0.0.1:{port}:{port}/tcp"]
        assert [v.endswith(":/workspace/project:ro") for v in serve["volumes"]] == [True]
    assert pipeline["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}
    ]
    assert pipeline["ipc"] == "host"
    assert pipeline["ulimits"] == {"memlock": -1, "stack": 67108864}
    assert pipeline["depends_on"] == {"mlflow": {"condition": "service_healthy"}}
    assert pipeline["environment"]["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert pipeline["working_dir"] == "/workspace/project"
    assert services["mlflow"]["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert services["mlflow"]["environment"]["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert [p["host_ip"] if isinstance(p, dict) else p.split(":")[0] for p in services["mlflow"]["ports"]] == [
        "127.0.0.1"
    ]
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])


def test_compose_file_holds_no_credentials():
    text = (ROOT / "docker" / "compose.yaml").read_text()
    example = dict(
        line.split("=", 1)
        for line in (ROOT / "docker" / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert example["POSTGRES_PASSWORD"] not in text
    for key in ("POSTGRES_PASSWORD", "MLFLOW_AUTH_ADMIN_PASSWORD", "MLFLOW_TRACKING_PASSWORD"):
        assert f"${{{key}" in text  # from docker/.env, nowhere else
    ignored = subprocess.run(["git", "check-ignore", "-q", "docker/.env"], cwd=ROOT)
    assert ignored.returncode == 0, "docker/.env must be git-ignored"


def test_compose_refuses_to_start_without_a_database_password(tmp_path):
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.fail("docker-compose is not installed: run scripts/system-deps.sh")
    env_file = tmp_path / ".env"
    env_file.write_text("POSTGRES_USER=mlflow\n")
    out = subprocess.run(
        [compose, "--env-file", str(env_file), "-f", str(ROOT / "docker" / "compose.yaml"), "config"],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("POSTGRES_")},
    )
    assert out.returncode != 0
    assert "set POSTGRES_PASSWORD in docker/.env" in out.stderr


def test_deploy_examples_run_the_projects_image():
    tfjob = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "tfjob-train.yaml").read_text())
    container = tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["image"].split(":")[0].endswith("/pipeline")
    assert container["workingDir"] == "/workspace/project"
    sbatch = (ROOT / "deploy" / "slurm" / "train.sbatch").read_text()
    assert "--container-image" in sbatch and "pipeline" in sbatch


def check_base(folder: Path, image="site/tensorflow:1") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "docker" / "check-base.py"), str(folder), image], capture_output=True, text=True
    )


def test_check_base_keeps_the_committed_lock_on_the_base_the_list_describes(tmp_path):
    """This interpreter as the base, its packages as the list: the lock stays as committed.
    (tests/scenarios/test_container.py builds on stand-in bases, the listed one and another.)"""
    freeze = subprocess.run(
        [sys.executable, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (tmp_path / "ngc-base.txt").write_text("# a list\n" + freeze)
    (tmp_path / "ngc.lock").write_text("committed\n")
    out = check_base(tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "base site/tensorflow:1: its Python packages are docker/ngc-base.txt's; installing docker/ngc.lock as locked"
    ]
    assert (tmp_path / "ngc.lock").read_text() == "committed\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ngc-base.txt", "ngc.lock"]


def test_check_base_without_its_list_stops_in_one_line(tmp_path):
    out = check_base(tmp_path)
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr.splitlines() == [f"error: cannot read {tmp_path}/ngc-base.txt: No such file or directory"]
    assert list(tmp_path.iterdir()) == []


def test_the_builds_resolver_is_the_projects_uv_with_its_hashes():
    """docker/check-base.py installs uv at the Makefile's version, each wheel's sha256 given."""
    text = (ROOT / "docker" / "check-base.py").read_text()
    uv_version = re.search(r"^UV_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert uv_version, "no UV_VERSION in the Makefile"
    version = uv_version.group(1)
    pinned = re.search(r'^UV = """uv==(\S+) \\\\\n((?:    --hash=sha256:[0-9a-f]{64}(?: \\\\)?\n)+)"""', text, re.M)
    assert pinned and pinned.group(1) == version
    assert len(pinned.group(2).splitlines()) >= 10  # one per platform's wheel, and the sdist
