"""The container tests' Docker engine and images, made in the background from the start of
the session, while the tests that need the CPU run.

Starting an engine, making the stand-in bases and building the images wait on the disk
and the network for minutes; training waits on the CPU. So the session (the pytest process,
or xdist's controller when the tests run in workers) starts them in a thread of their own as
soon as it knows that container tests were collected, and the container tests' fixture waits
for what they made. The outcome (the engine's DOCKER_HOST and each build's log and time, or
the error) is a JSON file named by PIPELINE_TEST_IMAGES, which xdist's workers inherit.

The stand-in bases are kept per machine (tests/container/standins.sh) and reused while their
recipe is unchanged. The project's image (docker/Dockerfile) is built cold on every run, then
again after a source-only change, since how it builds is what the tests check. The CUDA image
and the MLflow server's install their lock in one layer that only the Dockerfile, the lock and
the base decide: that image is saved beside the stand-ins under the hash of those, and a later
run builds with it as its cache (`reused`), so that the layer is made again only when one of
them changed; the layers after it (the project's source) are built on every run.

The engine keeps its images from one session to the next (`KEPT_ROOT`, one session at a time:
another session's engine at the same moment starts empty and loads the saves): the stand-ins
and those installs are then there already (10 GB that a fresh engine loads, about 120 s of the
engine's CPU), each under the tag pipeline-kept/NAME:RECIPE that says what made it. Everything
else goes when the session starts and when it ends (`tidy`): containers, volumes, networks and
every other image, the project's own among them, so that its build is cold.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from runner.docker_builds import (
    CUDA_IMAGE,
    HERE,
    IMAGE,
    KEPT_ROOT,
    MLFLOW_IMAGE,
    PY312_IMAGE,
    STANDIN_CACHE,
    STANDIN_DEBIAN,
    STANDIN_PY312,
    STANDIN_TF,
    build,
    build_labelled,
    held,
    keep,
    reused,
    run,
    tidy,
)
from support.project import copy_project

OUTCOME_VARIABLE = "PIPELINE_TEST_IMAGES"


class Builder:
    """The engine and the images, made by a background thread; `finish()` stops the engine."""

    def __init__(self, outcome: Path):
        self.outcome = outcome
        self.state = Path(tempfile.mkdtemp(prefix="pipeline-docker-", dir="/var/tmp"))
        self.thread = threading.Thread(target=self._make, name="container images", daemon=True)
        self.made: dict | None = None  # what _make made, once it is done
        self.root: Path | None = None  # KEPT_ROOT, while this session holds it
        self.env: dict | None = None  # the engine's, once it runs

    def start(self) -> None:
        self.thread.start()

    def _claim(self) -> Path | None:
        """KEPT_ROOT, locked until `finish`; None when another session holds it."""
        STANDIN_CACHE.mkdir(parents=True, exist_ok=True)
        self.lock = os.open(STANDIN_CACHE / "engine.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.lock)
            return None
        return KEPT_ROOT

    def _engine(self) -> dict:
        """The engine started (on KEPT_ROOT when this session may have it; afresh when it will
        not start there) and tidied: its environment."""
        self.root = self._claim()
        root = [self.root] if self.root else []
        started = run(["bash", HERE / "engine.sh", "start", self.state, *root], dict(os.environ), check=not root)
        if started.returncode != 0:  # a kept state it cannot start on: afresh there
            subprocess.run(["bash", HERE / "engine.sh", "stop", self.state, *root], capture_output=True)
            shutil.rmtree(KEPT_ROOT, ignore_errors=True)
            started = run(["bash", HERE / "engine.sh", "start", self.state, *root], dict(os.environ))
        self.env = {**os.environ, "DOCKER_HOST": started.stdout.strip(), "DOCKER_BUILDKIT": "0"}
        if self.root:
            tidy(self.env)
        return self.env

    def _make(self) -> None:
        made: dict = {}
        try:
            if os.geteuid() != 0:
                raise PermissionError("the container tests start a Docker engine of their own: run them as root")
            t0 = time.time()
            env = self._engine()
            made["DOCKER_HOST"] = env["DOCKER_HOST"]
            made["found"] = held(env)  # before the stand-ins are made: what `tidy` left
            run(["bash", HERE / "standins.sh", STANDIN_CACHE], env)
            run(["bash", HERE / "py312-standin.sh", STANDIN_CACHE], env)
            made["standins_s"] = time.time() - t0
            context = copy_project(self.state / "context", exclude=("reports/", "models/"))
            made["cold"], made["cold_s"] = build_labelled(env, context, IMAGE, STANDIN_TF)
            with open(context / "pipeline" / "__init__.py", "a") as fh:
                fh.write("# a source-only change\n")
            made["warm"], made["warm_s"] = build_labelled(env, context, IMAGE, STANDIN_TF)
            made["size"] = int(run(["docker", "image", "inspect", "-f", "{{.Size}}", IMAGE], env).stdout)
            to_keep = []
            for key, dockerfile, inputs, tag, args in (
                ("mlflow", "mlflow.Dockerfile", ["mlflow.lock"], MLFLOW_IMAGE, {}),
                ("cuda", "cuda.Dockerfile", ["../requirements.lock", "cuda.lock"], CUDA_IMAGE, {"CUDA_WHEELS": 0}),
            ):
                t1 = time.time()
                docker = context / "docker"
                saved, made[f"{key}_reused"] = reused(
                    env, docker / dockerfile, [docker / i for i in inputs], tag, STANDIN_DEBIAN, **args
                )
                cache_from = tag if made[f"{key}_reused"] else None
                build(env, context, f"docker/{dockerfile}", tag, STANDIN_DEBIAN, cache_from=cache_from, **args)
                made[f"{key}_s"] = time.time() - t1
                if not made[f"{key}_reused"]:
                    to_keep.append((tag, saved))
            made["cuda_size"] = int(run(["docker", "image", "inspect", "-f", "{{.Size}}", CUDA_IMAGE], env).stdout)
            # a base unlike docker/ngc-base.txt: the build resolves its lock there; then that lock and
            # the base's list pinned in a clone by the documented line, and the Dockerfile's choice
            # of lock on that base from the clone's files (its install step is the one above, and
            # a strict build's, of the main image: a whole rebuild would only repeat them)
            made["py312"], made["py312_s"] = build_labelled(env, context, PY312_IMAGE, STANDIN_PY312)
            pinned = copy_project(self.state / "pinned", exclude=("reports/", "models/"))
            made["pin"] = run(["bash", pinned / "scripts" / "base-packages.sh", "--pin", PY312_IMAGE], env).stdout
            made["pinned_lock"] = (pinned / "docker" / "ngc.lock").read_text()
            made["pinned_list"] = (pinned / "docker" / "ngc-base.txt").read_text()
            t1 = time.time()
            chosen = run(
                [
                    "docker",
                    "run",
                    "--rm",
                    "--network",
                    "none",
                    "-v",
                    f"{pinned}:/project:ro",
                    STANDIN_PY312,
                    "sh",
                    "-c",
                    "mkdir /tmp/lock && cp /project/pyproject.toml "
                    "/project/docker/ngc-base.txt /project/docker/ngc.lock /tmp/lock/ && python3 "
                    f"/project/docker/check-base.py /tmp/lock {STANDIN_PY312} && cat /tmp/lock/ngc.lock",
                ],
                env,
            )
            made["py312_pinned"], made["py312_pinned_s"] = chosen.stdout, time.time() - t1
            made["seconds"] = time.time() - t0
        except Exception as exc:  # the container tests report it; the others go on
            made["error"] = f"{type(exc).__name__}: {exc}"
            to_keep = []
        self.made = made
        part = self.outcome.with_suffix(".part")
        part.write_text(json.dumps(made))
        part.rename(self.outcome)
        for tag, saved in to_keep:  # once the container tests have what they wait for
            keep(env, tag, saved)

    def finish(self) -> None:
        """Stop the engine and remove its state (containers, the project's images, volumes).
        Once the images are made, after the thread has saved what it keeps; before (a session
        interrupted, or one whose container tests never waited), at once: the build in progress
        then fails with the engine, and nobody waits for it."""
        if self.made is not None:
            self.thread.join(timeout=1800)
        root = [self.root] if self.root else []
        if root and self.env and not self.thread.is_alive():
            try:
                tidy(self.env)
            except AssertionError:  # a docker command failed: the next session's start tidies it
                pass
        subprocess.run(["bash", HERE / "engine.sh", "stop", self.state, *root], capture_output=True)
        self.thread.join(timeout=120)
        shutil.rmtree(self.state, ignore_errors=True)
        if root:
            os.close(self.lock)


def summary(made: dict) -> str:
    """One line on what the builder made, and how long each part took."""
    if "error" in made:
        return f"container images: {made['error']}"
    return (
        f"container images, made in the background in {made['seconds']:.0f} s: engine "
        f"({'its images kept from the last session' if made.get('found', {}).get('image') else 'afresh'}) and "
        "stand-in bases "
        f"{made['standins_s']:.0f} s, project image cold {made['cold_s']:.0f} s and after a source-only "
        f"change {made['warm_s']:.0f} s ({made['size'] / 1e9:.2f} GB with its base), MLflow image "
        f"{made['mlflow_s']:.0f} s{' (install layer reused)' if made.get('mlflow_reused') else ''}, CUDA image "
        f"(no CUDA wheels) {made['cuda_s']:.0f} s{' (install layer reused)' if made.get('cuda_reused') else ' cold'} "
        f"({made['cuda_size'] / 1e9:.2f} GB), on the Python 3.12 stand-in {made['py312_s']:.0f} s (lock resolved "
        f"there), its lock chosen after pinning {made['py312_pinned_s']:.0f} s (strict)"
    )


def wait_for_images(poll: float = 2.0, hang: float = 3600) -> dict:
    """What the session's builder made (DOCKER_HOST, build logs and times); raises with its
    error when it failed. Waits while it is still at work (`hang`: a guard against a builder
    that died without a word, not a time limit)."""
    name = os.environ.get(OUTCOME_VARIABLE)
    if not name:
        raise RuntimeError("the session started no container builds: are the container tests selected, as root?")
    outcome = Path(name)
    deadline = time.time() + hang
    while not outcome.exists():
        if time.time() > deadline:
            raise RuntimeError(f"no word from the session's container builds in {hang:.0f} s ({outcome})")
        time.sleep(poll)
    made = json.loads(outcome.read_text())
    if "error" in made:
        raise AssertionError(f"the container images could not be made: {made['error']}")
    return made
