"""requirements.lock: exact, hashed pins that satisfy pyproject.toml's ranges, for every Python
and Linux platform the project supports, with no index URL; the environment the tests run in
is the lock's (`make setup` installs it), and a run says so."""

import re
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from helpers import ROOT
from pipeline import environment

LOCK = ROOT / "requirements.lock"
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
MACHINES = ("x86_64", "aarch64")


def marker_env(python: str, machine: str) -> dict:
    return {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": machine, "os_name": "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def project_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]]


def test_every_pin_is_exact_and_hashed_and_names_no_index():
    pins = environment.read_lock(LOCK)
    assert len(pins) > 100
    assert [name for name, _, _, hashes in pins if not hashes] == []
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for *_, hashes in pins for h in hashes)
    text = LOCK.read_text()
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
            f"requirements.lock pins {name}=={chosen[name]}, outside pyproject.toml's {requirement}: run make lock")


def test_a_line_that_is_not_a_pin_is_named(tmp_path):
    bad = tmp_path / "requirements.lock"
    bad.write_text("# header\nnumpy==2.0 \\\n    --hash=sha256:" + "0" * 64 + "\nnumpy>=2\n")
    with pytest.raises(ValueError, match=r"requirements.lock:4: not a pin: numpy>=2"):
        environment.read_lock(bad)


def test_this_environment_is_the_locks_and_a_run_says_so(monkeypatch):
    """`make setup` installed the lock: every pin that applies here is installed at its
    version, the logged model's requirements are those pins, and the run's tag says
    requirements.lock (container when run in the project's image)."""
    monkeypatch.delenv("PIPELINE_IMAGE", raising=False)
    wanted = environment.lock_pins(environment.read_lock(LOCK))
    tags = environment.describe(LOCK)
    assert tags["python.environment"] == "requirements.lock", tags["python.environment"]
    required = dict(r.split("==") for r in environment.installed_requirements())
    assert {"tensorflow", "keras", "mlflow", "dvc", "click", "numpy"} <= set(required)
    assert "pytest" not in required  # the test extra is not what a model needs
    assert {name: version for name, version in required.items() if wanted.get(name) != version} == {}
    monkeypatch.setenv("PIPELINE_IMAGE", "pipeline:dev")
    assert environment.describe(LOCK)["python.environment"] == "container"


def test_a_package_at_another_version_than_the_locks_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("PIPELINE_IMAGE", raising=False)
    lock = tmp_path / "requirements.lock"
    text = LOCK.read_text()
    lock.write_text(re.sub(r"^click==[^ \\]+", "click==0.1", text, count=1, flags=re.M))
    described = environment.describe(lock)["python.environment"]
    assert described.startswith("requirements.lock, except click==") and described.endswith("(lock 0.1)")
    assert environment.describe(tmp_path / "none.lock")["python.environment"] == "unlocked"


def test_the_installed_distributions_read_from_metadata_headers_are_importlibs():
    """What a run states of its environment is read from each METADATA file's header, not
    through importlib.metadata's full parse: both give the same name, version and requirements
    for every distribution installed here (the first of a name on sys.path)."""
    from importlib import metadata

    expected = {}
    for dist in metadata.distributions():
        expected.setdefault(canonicalize_name(dist.metadata["Name"]), (dist.version, tuple(dist.requires or ())))
    assert environment._distributions() == expected
    assert len(expected) > 100
