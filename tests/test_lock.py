"""requirements.lock: exact, hashed pins that satisfy pyproject.toml's ranges, for every Python
and Linux platform the project supports, with no index URL, read pin by pin (whether the
environment the tests run in is the lock's, and a run says so: tests/test_environment.py)."""

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
