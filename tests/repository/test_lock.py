"""requirements.lock: exact, hashed pins that satisfy pyproject.toml's ranges, for every Python
and Linux platform the project supports, with no index URL, read pin by pin (whether the
environment the tests run in is the lock's, and a run says so: tests/runtime/test_environment.py).
And the images' locks (scripts/container-locks.sh): the same form; NVIDIA's image's with its
base's packages meets pyproject.toml and replaces none of them; the CUDA image's is
requirements.lock's TensorFlow's CUDA wheels; the MLflow image's is docker/mlflow.in's
(tests/scenarios/test_container.py checks what the built images hold)."""

import re

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from support.project import ROOT, marker_env

from pipeline.runtime import environment

LOCK = ROOT / "requirements.lock"
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
MACHINES = ("x86_64", "aarch64")


def project_requirements(test_extra: bool = True) -> list[Requirement]:
    """The dependencies and every extra's (the features' extras, postgres and gpu, which `make
    setup` and the images install), the test extra's with `test_extra`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [
        r for name, found in project["optional-dependencies"].items() if test_extra or name != "test" for r in found
    ]
    return [Requirement(r) for r in project["dependencies"] + extras]


DOCKER = ROOT / "docker"
LOCKS = {LOCK: 100, DOCKER / "ngc.lock": 100, DOCKER / "cuda.lock": 10, DOCKER / "mlflow.lock": 80}


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_every_pin_is_exact_and_hashed_and_names_no_index(lock):
    pins = environment.read_lock(lock)
    assert len(pins) > LOCKS[lock]
    assert [name for name, _, _, hashes in pins if not hashes] == []
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for *_, hashes in pins for h in hashes)
    text = lock.read_text()
    assert not re.search(r"^\s*--(index-url|extra-index-url|find-links|trusted-host)", text, re.M)
    assert not re.search(r"https?://", text)


@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize("machine", MACHINES)
def test_the_lock_satisfies_pyproject_on_every_supported_python_and_linux(python, machine):
    """What `make lock` must be rerun for: a range in pyproject.toml that the lock no longer meets."""
    env = marker_env(python, machine)
    chosen = environment.lock_pins(environment.read_lock(LOCK), env)
    for requirement in project_requirements():
        if requirement.marker is not None and not requirement.marker.evaluate(env):
            continue
        name = canonicalize_name(requirement.name)
        assert name in chosen, f"requirements.lock has no {name} for Python {python} on {machine}: run make lock"
        assert Version(chosen[name]) in requirement.specifier, (
            f"requirements.lock pins {name}=={chosen[name]}, outside pyproject.toml's {requirement}: run make lock"
        )


def test_a_line_that_is_not_a_pin_is_named(tmp_path):
    bad = tmp_path / "requirements.lock"
    bad.write_text("# header\nnumpy==2.0 \\\n    --hash=sha256:" + "0" * 64 + "\nnumpy>=2\n")
    with pytest.raises(ValueError, match=r"requirements.lock:4: not a pin: numpy>=2"):
        environment.read_lock(bad)


def base_pins() -> dict[str, str]:
    """docker/ngc-base.txt: the NVIDIA base image's packages, name -> version."""
    return {
        canonicalize_name(name): version
        for name, version in re.findall(r"^([A-Za-z0-9._-]+)==(\S+)$", (DOCKER / "ngc-base.txt").read_text(), re.M)
    }


@pytest.mark.parametrize("python", ("3.11", "3.12"))
@pytest.mark.parametrize("machine", MACHINES)
def test_the_ngc_lock_with_its_base_meets_pyproject_and_replaces_nothing_of_the_base(python, machine):
    """docker/ngc.lock adds to NVIDIA's image (Python 3.12; the stand-in's 3.11) what pyproject.toml
    asks for beyond the base's packages, each at a version pyproject.toml allows, and none of
    the base's: NVIDIA's TensorFlow, Keras and NumPy stay."""
    env = marker_env(python, machine)
    added = environment.lock_pins(environment.read_lock(DOCKER / "ngc.lock"), env)
    base = base_pins()
    assert {"tensorflow", "keras", "numpy"} <= set(base)
    assert sorted(set(added) & set(base)) == [], "docker/ngc.lock would replace the base's packages"
    for requirement in project_requirements(test_extra=False):
        if requirement.marker is not None and not requirement.marker.evaluate(env):
            continue
        name = canonicalize_name(requirement.name)
        version = added.get(name) or base.get(name)
        assert version is not None, f"neither docker/ngc.lock nor the base has {name}: run make lock"
        assert Version(version) in requirement.specifier, f"{name}=={version} is outside {requirement}"


def test_the_cuda_lock_is_the_cuda_wheels_of_the_locks_tensorflow():
    """docker/cuda.lock: what tensorflow[and-cuda] adds to requirements.lock, at versions its
    and-cuda extra allows (read from the TensorFlow this environment has: the lock's)."""
    from importlib.metadata import requires, version

    env = {**marker_env("3.12", "x86_64"), "extra": "and-cuda"}
    locked = environment.lock_pins(environment.read_lock(LOCK), marker_env("3.11", "x86_64"))
    assert version("tensorflow") == locked["tensorflow"]
    tensorflow_requires = requires("tensorflow")
    assert tensorflow_requires is not None, "tensorflow's metadata has no requirements"
    cuda_extra = [Requirement(r) for r in tensorflow_requires if "and-cuda" in r]
    wanted = [r for r in cuda_extra if r.marker is not None and r.marker.evaluate(env)]
    cuda = environment.lock_pins(environment.read_lock(DOCKER / "cuda.lock"), marker_env("3.12", "x86_64"))
    assert wanted and {canonicalize_name(r.name) for r in wanted} == set(cuda), "run make lock"
    assert sorted(set(cuda) & set(locked)) == [], "docker/cuda.lock repeats requirements.lock"
    for requirement in wanted:
        assert Version(cuda[canonicalize_name(requirement.name)]) in requirement.specifier, requirement


def test_the_mlflow_lock_holds_what_mlflow_in_asks_for():
    wanted = [
        Requirement(line)
        for line in (DOCKER / "mlflow.in").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    for python in ("3.11", "3.12"):
        pins = environment.lock_pins(environment.read_lock(DOCKER / "mlflow.lock"), marker_env(python, "x86_64"))
        for requirement in wanted:
            assert Version(pins[canonicalize_name(requirement.name)]) in requirement.specifier, (python, requirement)
