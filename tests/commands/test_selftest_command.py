"""`pipeline selftest` (pipeline/commands/selftest.py) on this host's two logical CPU devices: it
passes as the host is, and fails, in one line per check with what to try and exit 1, when the
all-reduce drops a replica's values or a loss turns NaN (each fault put into every process of the
selftest by a sitecustomize module on PYTHONPATH: TensorFlow's and the project's own code, patched)."""

import pytest
from support.processes import run_pipeline, subprocess_env
from support.project import write_params

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

FAULTS = """
import os

fault = os.environ.get("SELFTEST_FAULT")
if fault == "all_reduce":  # every replica's value replaced by the first replica's
    from tensorflow.python.distribute import cross_device_ops, values

    def first_only(value):
        if isinstance(value, values.PerReplica):
            return values.PerReplica([value.values[0]] * len(value.values))
        return value

    for cls in (cross_device_ops.CollectiveAllReduce, cross_device_ops.ReductionToOneDevice):
        reduce, batch = cls.reduce_implementation, cls.batch_reduce_implementation
        cls.reduce_implementation = (
            lambda reduce: lambda self, op, value, *rest: reduce(self, op, first_only(value), *rest)
        )(reduce)
        cls.batch_reduce_implementation = (lambda batch: lambda self, op, pairs, *rest: batch(
            self, op, [(first_only(v), d) for v, d in pairs], *rest))(batch)
elif fault == "nan":  # the loss of every step NaN
    from pipeline.training import models

    plain = models.loss
    models.loss = lambda *args, **kwargs: (lambda y, p: plain(*args, **kwargs)(y, p) * float("nan"))
"""


def selftest(folder, fault=None):
    env = subprocess_env()
    if fault:
        (folder / "faults").mkdir(exist_ok=True)
        (folder / "faults" / "sitecustomize.py").write_text(FAULTS)
        env = subprocess_env(PYTHONPATH=f"{folder / 'faults'}:{env.get('PYTHONPATH', '')}", SELFTEST_FAULT=fault)
    write_params(folder)
    return run_pipeline("selftest", "--dataset", "reuters", "--steps", "2", cwd=folder, env=env, timeout=900)


def test_two_replicas_and_one_device_agree_here(tmp_path):
    result = selftest(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert [line.split()[:3] for line in lines[:3]] == [
        ["pass", "reuters", "loss"],
        ["pass", "reuters", "update"],
        ["pass", "all-reduce", "CollectiveAllReduce"],
    ], result.stdout
    assert (
        "2 replicas (2 logical CPU devices, MirroredStrategy, loop fit) and one device agree at each of 2 "
        "steps" in lines[1]
    )
    assert lines[3].startswith("selftest: passed, 3 checks in ")
    assert "error" not in result.stderr


@pytest.mark.parametrize(
    "fault,failing",
    [
        ("all_reduce", {"reuters update", "all-reduce"}),
        ("nan", {"reuters loss", "reuters update"}),
    ],
)
def test_a_broken_all_reduce_or_a_nan_loss_fails_with_what_to_try(tmp_path, fault, failing):
    result = selftest(tmp_path, fault)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    failed = {
        " ".join(line.split()[1:3]) if line.split()[1] == "reuters" else line.split()[1]
        for line in lines
        if line.startswith("fail ")
    }
    assert failed == failing, result.stdout
    assert all("; fix: " in line for line in lines if line.startswith("fail "))
    assert lines[-1].startswith(f"selftest: {len(failing)} of 3 checks failed (")
    assert "Traceback" not in result.stderr
