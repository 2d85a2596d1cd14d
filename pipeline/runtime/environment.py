"""The environment a run ran in: the exact version of every package the pipeline needs, as
installed, and how that compares with requirements.lock; and the machine (CPU, its vector
instruction sets, GPUs), which decides the last digits of a result.

`make setup` installs requirements.lock (exact versions, sha256 hashes); the container keeps
NVIDIA's TensorFlow and installs the rest against it. A run records which of the two it ran
in, and its logged model states the versions it was trained with. The train stage writes the
machine to reports/<dataset>/machine.json beside its figures.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import os
import platform
import re
from importlib import metadata
from pathlib import Path
from typing import Optional

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

LOCK_FILE = "requirements.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


@functools.cache
def _distributions() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Every installed distribution: canonical name -> (version, Requires-Dist lines). Read
    from the header of each METADATA file (the first of a name on sys.path wins, as for an
    import): importlib.metadata's own parse of a whole file costs ~20x more for the same fields."""
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for dist in metadata.distributions():
        text = dist.read_text("METADATA")
        if text is None:  # an egg-info install: the general, slower way
            fields = {"Name": dist.metadata["Name"], "Version": dist.version}
            requires = list(dist.requires or [])
        else:
            fields, requires = {}, []
            for line in text.split("\n\n", 1)[0].splitlines():
                key, _, value = line.partition(": ")
                if key == "Requires-Dist":
                    requires.append(value.strip())
                elif key in ("Name", "Version"):
                    fields.setdefault(key, value.strip())
        if fields.get("Name"):
            found.setdefault(canonicalize_name(fields["Name"]), (fields.get("Version", ""), tuple(requires)))
    return found


def installed_requirements(root: str = "pipeline") -> list[str]:
    """`name==version` of every installed package that `root` needs, directly or through
    another (extras followed, markers evaluated here), sorted by name; `root` itself left out."""
    return [pin for pin in requirements_of(root) if pin.split("==")[0] != canonicalize_name(root)]


def requirements_of(*names: str) -> list[str]:
    """`name==version` of the installed packages `names` and of every package they need,
    directly or through another (extras followed, markers evaluated here), sorted by name. A
    name that is not installed is skipped (`tensorflow` where `tensorflow-cpu` is the build)."""
    installed = _distributions()
    found: dict[str, str] = {}
    todo: list[tuple[str, tuple[str, ...]]] = [(canonicalize_name(name), ()) for name in names]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen or name not in installed:
            continue
        seen.add((name, extras))
        version, requires = installed[name]
        found[name] = version
        for text in requires:
            requirement = Requirement(text)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in ("", *extras)):
                todo.append((canonicalize_name(requirement.name), tuple(sorted(requirement.extras))))
    return [f"{name}=={version}" for name, version in sorted(found.items())]


def read_lock(path: Path) -> list[tuple[str, str, Optional[str], list[str]]]:
    """requirements.lock's pins: (name, version, marker or None, sha256 hashes). A line that
    is neither a pin, a hash nor a comment raises ValueError naming it."""
    pins: list[tuple[str, str, Optional[str], list[str]]] = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("--hash=") and pins:
            pins[-1][3].append(stripped.removeprefix("--hash=").rstrip(" \\"))
            continue
        match = _PIN.match(stripped)
        if match is None:
            raise ValueError(f"{path}:{number}: not a pin: {stripped}")
        name, version, marker = match.groups()
        pins.append((canonicalize_name(name), version, marker, []))
    return pins


def lock_pins(pins, env: Optional[dict] = None) -> dict[str, str]:
    """The pins that install in `env` (a marker environment; default: this interpreter's),
    name -> version; ValueError when two pins of one name apply."""
    chosen: dict[str, str] = {}
    for name, version, marker, _ in pins:
        if marker is None or Marker(marker).evaluate(env):
            if name in chosen:
                raise ValueError(f"two pins of {name} apply")
            chosen[name] = version
    return chosen


def describe(lock: Path = Path(LOCK_FILE)) -> dict[str, str]:
    """Tags of the environment: `python.environment` (`container` when run in the project's
    image, `requirements.lock` when every package installed is at the lock's version,
    `requirements.lock, except ...` listing the others, `unlocked` without a lock file) and
    `python.requirements_sha256` (equal for two runs in the same environment)."""
    installed = installed_requirements()
    tags = {"python.requirements_sha256": hashlib.sha256("\n".join(installed).encode()).hexdigest()}
    if os.environ.get("PIPELINE_IMAGE"):
        tags["python.environment"] = "container"
        return tags
    if not lock.is_file():
        tags["python.environment"] = "unlocked"
        return tags
    wanted = lock_pins(read_lock(lock))
    have = {name: version for name, (version, _) in _distributions().items()}
    differ = sorted(
        f"{name}=={have.get(name, 'missing')} (lock {version})"
        for name, version in wanted.items()
        if have.get(name) != version
    )
    tags["python.environment"] = LOCK_FILE if not differ else f"{LOCK_FILE}, except " + ", ".join(differ)[:400]
    return tags


# The vector instruction sets that change which CPU kernels TensorFlow runs (Eigen's, oneDNN's),
# and so the order in which sums are added: /proc/cpuinfo's flag (x86 "flags", Arm "Features")
# -> the name a reader knows. Two hosts that differ here may differ in a result's last digits.
INSTRUCTION_SETS = (
    ("avx2", "AVX2"),
    ("avx512f", "AVX-512"),
    ("avx512_bf16", "AVX512-BF16"),
    ("amx_bf16", "AMX-BF16"),
    ("asimd", "NEON"),
    ("sve", "SVE"),
)


def cpuinfo_fields(cpuinfo: Path | str = "/proc/cpuinfo") -> dict[str, str]:
    """The first processor's fields of `cpuinfo` (Linux), by name; none where it cannot be read."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())  # the first processor's
    return fields


def cpu(cpuinfo: Path | str = "/proc/cpuinfo") -> tuple[str, list[str]]:
    """(the CPU's model name, its INSTRUCTION_SETS present) from `cpuinfo` (Linux); where that
    has no model name, platform.processor() (or the architecture), and no instruction sets
    where it has no flags."""
    fields = cpuinfo_fields(cpuinfo)
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    model = fields.get("model name") or platform.processor() or platform.machine() or "unknown"
    return model, [name for flag, name in INSTRUCTION_SETS if flag in flags]


def gpu_names() -> list[str]:
    """The name of each GPU TensorFlow sees (its device details; the device's own name where
    they have none), in TensorFlow's order."""
    import tensorflow as tf

    return [
        tf.config.experimental.get_device_details(gpu).get("device_name") or gpu.name
        for gpu in tf.config.list_physical_devices("GPU")
    ]


def machine() -> dict:
    """The machine a training ran on, for reports/<dataset>/machine.json: CPU model, logical
    cores, vector instruction sets, GPU names (TensorFlow's physical devices), TensorFlow,
    Keras and Python versions, and the date (UTC)."""
    import keras
    import tensorflow as tf

    model, instruction_sets = cpu()
    return {
        "cpu": model,
        "cpu_cores": os.cpu_count(),
        "instruction_sets": instruction_sets,
        "gpus": gpu_names(),
        "tensorflow_version": tf.__version__,
        "keras_version": keras.__version__,
        "python_version": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
    }
