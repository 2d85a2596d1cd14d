"""pipeline.runtime.environment: the installed packages a run states (against requirements.lock), and the
machine a training ran on: /proc/cpuinfo read into a CPU model and its vector instruction sets,
and reports/<dataset>/machine.json written by the train stage beside its figures (an uncached
DVC out, not a metric)."""

import json
import platform
import re
import subprocess

import pytest
import yaml
from packaging.utils import canonicalize_name
from support.project import ROOT

from pipeline.runtime import environment

LOCK = ROOT / "requirements.lock"
XEON = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512_bf16 amx_bf16 amx_tile
"""
EPYC_ZEN3 = "model name\t: AMD EPYC 7R13 Processor\nflags\t\t: fpu sse2 avx avx2 fma\n"
GRAVITON = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes sve\nCPU implementer\t: 0x41\n"


@pytest.mark.parametrize(
    "cpuinfo,model,sets",
    [
        (XEON, "Intel(R) Xeon(R) Platinum 8480+", ["AVX2", "AVX-512", "AVX512-BF16", "AMX-BF16"]),
        (EPYC_ZEN3, "AMD EPYC 7R13 Processor", ["AVX2"]),
        (GRAVITON, platform.processor() or platform.machine(), ["NEON", "SVE"]),  # Arm: no model name
    ],
)
def test_cpu_reads_the_model_name_and_the_instruction_sets(tmp_path, cpuinfo, model, sets):
    (tmp_path / "cpuinfo").write_text(cpuinfo)
    assert environment.cpu(tmp_path / "cpuinfo") == (model, sets)


def test_without_cpuinfo_the_cpu_is_platforms():
    assert environment.cpu("/nonexistent/cpuinfo") == (platform.processor() or platform.machine(), [])


def test_what_the_train_stage_measured_is_no_out_and_no_git_file_and_only_numbers_are_metrics():
    """machine.json (the host) and measurements.json (times, throughput, memory, devices) differ
    on every run: neither is a stage out (dvc.lock) nor a git file; measurements.json, numbers
    only, is a top-level metric (`dvc metrics show`), machine.json (strings) is none."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    train = spec["stages"]["train"]["do"]
    command = " ".join(train["cmd"].split())
    assert "--machine reports/${item}/machine.json" in command
    assert "--measurements reports/${item}/measurements.json" in command
    declared = json.dumps([train.get("outs", []), train.get("metrics", []), train.get("plots", [])])
    assert "machine.json" not in declared and "measurements.json" not in declared
    datasets = spec["stages"]["train"]["foreach"]
    assert spec["metrics"] == [f"reports/{dataset}/measurements.json" for dataset in datasets]
    ignored = subprocess.run(
        [
            "git",
            "check-ignore",
            "--no-index",
            *[f"reports/{d}/{name}" for d in datasets for name in ("machine.json", "measurements.json")],
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert len(ignored.stdout.split()) == 2 * len(datasets), ignored.stdout + ignored.stderr
    tracked = subprocess.run(["git", "ls-files", "reports"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert tracked and not [path for path in tracked if path.endswith(("/machine.json", "/measurements.json"))]


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

    expected: dict[str, tuple[str, tuple[str, ...]]] = {}
    for dist in metadata.distributions():
        expected.setdefault(canonicalize_name(dist.metadata["Name"]), (dist.version, tuple(dist.requires or ())))
    assert environment._distributions() == expected
    assert len(expected) > 100
