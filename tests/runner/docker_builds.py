"""The Docker commands the container tests' images are made with (runner/images.py runs them in
the background): a build with its log and time, an install layer kept beside the stand-in
bases under the hash of what decides it and reused as the next build's cache, and the engine
tidied down to the stand-ins and what was kept. The names of the images and where the stand-ins
are kept are here, for the tests that run the images."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

from support.processes import sh
from support.project import ROOT

HERE = ROOT / "tests" / "container"
STANDIN_DEBIAN = "pipeline-standin/debian:bookworm"
STANDIN_TF = "pipeline-standin/tensorflow:25.02-tf2-py3"
STANDIN_PY312 = "pipeline-standin/tensorflow:py312"  # NVIDIA's image where it differs from docker/ngc-base.txt
IMAGE = "pipeline:ctest"
PY312_IMAGE = "pipeline:py312"  # docker/Dockerfile on STANDIN_PY312, its lock resolved there
CUDA_IMAGE = "pipeline-cuda:ctest"  # docker/cuda.Dockerfile on the Debian stand-in, no CUDA wheels
MLFLOW_IMAGE = "pipeline-mlflow:3.17.2"  # the name docker/compose.yaml gives it
STANDIN_CACHE = Path(os.environ.get("PIPELINE_STANDIN_CACHE", "/var/tmp/pipeline-standins"))
KEPT_ROOT = STANDIN_CACHE / "engine"  # the engine's images, containers and volumes, between sessions
KEPT = "pipeline-kept/"  # the tag of what a recipe made, in KEPT_ROOT (tests/container/kept.sh)


def run(args, env, check=True, timeout=1800, cwd=None) -> subprocess.CompletedProcess:
    """`helpers.sh` with the argument list and environment first, as the container tests call it."""
    return sh(*args, cwd=cwd, env=env, check=check, timeout=timeout)


def build(
    env, context: Path, dockerfile: str, tag: str, base: str, version="ctest", cache_from=None, **args
) -> tuple[str, float]:
    """`docker build` of `dockerfile` in `context` on `base` (other build args: `args`), with the
    layers of the image `cache_from` as its cache when given: (its log, seconds)."""
    t0 = time.time()
    extra = [f"--build-arg={name}={value}" for name, value in args.items()]
    extra += ["--cache-from", cache_from] if cache_from else []
    out = run(
        [
            "docker",
            "build",
            "--network",
            "host",
            "-f",
            context / dockerfile,
            "--build-arg",
            f"BASE_IMAGE={base}",
            "--build-arg",
            f"VERSION={version}",
            *extra,
            "-t",
            tag,
            context,
        ],
        env,
    )
    return out.stdout, time.time() - t0


def reused(env, dockerfile: Path, inputs: list[Path], tag: str, base: str, **args) -> tuple[Path, bool]:
    """The save of `tag` whose install layer these `inputs` (the files the Dockerfile copies
    before it), the Dockerfile, its build args and the base's image ID make; loaded when a
    run made it before, so that a build with `--cache-from tag` takes that layer from it."""
    base_id = run(["docker", "image", "inspect", "-f", "{{.Id}}", base], env).stdout.strip()
    recipe = hashlib.sha256(f"{base_id} {sorted(args.items())}".encode())
    for path in (dockerfile, *inputs):
        recipe.update(path.read_bytes())
    name = tag.split(":")[0].replace("/", "-")
    saved = STANDIN_CACHE / f"{name}-{recipe.hexdigest()[:16]}.tar"
    if run(["docker", "image", "inspect", kept_tag(saved)], env, check=False).returncode == 0:
        run(["docker", "tag", kept_tag(saved), tag], env)
        return saved, True
    if saved.is_file():
        run(["docker", "load", "-q", "-i", saved], env)
        return saved, True
    return saved, False


def kept_tag(saved: Path) -> str:
    """The tag that marks, in an engine that keeps its images, what the save `saved` holds."""
    name, recipe = saved.stem.rsplit("-", 1)
    return f"{KEPT}{name}:{recipe}"


def keep(env, tag: str, saved: Path) -> None:
    """`tag` saved as `saved`, in place of the saves of older recipes, and marked as that save in
    the engine (where older recipes' marks go)."""
    for old in saved.parent.glob(f"{saved.name.rsplit('-', 1)[0]}-*.tar"):
        old.unlink()
    run(["docker", "save", "-o", f"{saved}.part", tag], env)
    os.replace(f"{saved}.part", saved)
    mark = kept_tag(saved)
    marks = run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}", mark.split(":")[0]], env).stdout.split()
    older = [old for old in marks if old != mark]
    if older:
        run(["docker", "rmi", *older], env)
    run(["docker", "tag", tag, mark], env)


def held(env) -> dict[str, list[str]]:
    """The engine's containers and volumes (IDs, names) and images (tags, `<none>:<none>` for
    an untagged one)."""
    return {
        "container": run(["docker", "ps", "-aq"], env).stdout.split(),
        "volume": run(["docker", "volume", "ls", "-q"], env).stdout.split(),
        "image": run(["docker", "images", "-a", "--format", "{{.Repository}}:{{.Tag}}"], env).stdout.split(),
    }


def tidy(env) -> None:
    """The engine as a fresh one would be, but for the stand-ins and what is marked kept: no
    containers, volumes, networks of its own or other images."""
    found = held(env)
    if found["container"]:
        run(["docker", "rm", "-f", "-v", *found["container"]], env)
    if found["volume"]:
        run(["docker", "volume", "rm", "-f", *found["volume"]], env)
    run(["docker", "network", "prune", "-f"], env)
    others = [tag for tag in found["image"] if not tag.startswith(("pipeline-standin/", KEPT)) and "<none>" not in tag]
    if others:
        run(["docker", "rmi", *others], env)
    run(["docker", "image", "prune", "-f"], env)


def build_labelled(env, context: Path, tag: str, base: str, version="ctest") -> tuple[str, float]:
    """docker/Dockerfile built as the README says, by `scripts/build-image.sh` (the build, then
    the label with its lock's digest) in `context` on `base`: (its output, seconds)."""
    t0 = time.time()
    out = run(
        [
            "bash",
            context / "scripts" / "build-image.sh",
            "--network",
            "host",
            "--build-arg",
            f"BASE_IMAGE={base}",
            "--build-arg",
            f"VERSION={version}",
            "-t",
            tag,
        ],
        env,
    )
    return out.stdout, time.time() - t0
