"""The custom loop against one device and against Keras fit; deterministic reruns.

Each case trains in its own process. Tolerances (float32 on a CPU, measured in the runs):
weights after one SGD step with 1 and 2 replicas agree to 1e-6 absolute (the step itself is
~1e-3); fit and the custom loop give the same per-epoch losses to 1e-5 relative; two
deterministic runs are identical.
"""

import json
import subprocess
import sys

import numpy as np
import pytest
from support.processes import subprocess_env
from support.project import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.distributed]

WORKER = ROOT / "tests" / "workers" / "train_case.py"


def case(*args):
    result = subprocess.run(
        [sys.executable, str(WORKER), *map(str, args)],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]


def test_one_step_changes_the_weights_alike_on_one_and_two_replicas(tmp_path):
    case("one_step", 1, tmp_path / "one.npz")
    case("one_step", 2, tmp_path / "two.npz")
    one, two = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    weights = [k for k in one.files if k.startswith("arr_")]
    assert len(weights) == 7  # embedding, 2 x conv (kernel, bias), dense (kernel, bias)
    rng = np.random.RandomState(0)  # the initial weights train_case.py sets
    initial = [rng.normal(0, 0.1, one[f"arr_{i}"].shape).astype(np.float32) for i in range(7)]
    assert all(np.abs(one[f"arr_{i}"] - initial[i]).max() > 1e-4 for i in range(7))  # the step moved each
    diff = max(float(np.abs(one[k] - two[k]).max()) for k in weights)
    print(f"max |w1 - w2| after one step: {diff:.3g}")
    assert diff < 1e-6
    assert abs(float(one["loss"]) - float(two["loss"])) < 1e-6


def test_fit_and_custom_loop_give_the_same_loss_curve(tmp_path):
    case("curve", "fit", 1, "true", tmp_path / "fit.json")
    case("curve", "custom", 1, "true", tmp_path / "custom.json")
    fit = json.loads((tmp_path / "fit.json").read_text())["history"]
    custom = json.loads((tmp_path / "custom.json").read_text())["history"]
    assert len(fit) == len(custom) == 3
    worst = max(abs(b[k] - a[k]) / abs(a[k]) for a, b in zip(fit, custom) for k in ("loss", "val_loss"))
    print(f"fit vs custom: largest relative loss difference {worst:.3g}")
    for a, b in zip(fit, custom):
        for key in ("loss", "val_loss", "accuracy", "val_accuracy"):
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-6), (key, fit, custom)
    assert fit[-1]["loss"] < fit[0]["loss"]


@pytest.mark.cold_start  # each process with a hash seed of its own, as a user's
@pytest.mark.parametrize("loop", ["custom", "fit"])
def test_deterministic_runs_are_identical(tmp_path, loop):
    case("curve", loop, 2, "true", tmp_path / "a.json")
    case("curve", loop, 2, "true", tmp_path / "b.json")
    assert json.loads((tmp_path / "a.json").read_text()) == json.loads((tmp_path / "b.json").read_text())


@pytest.mark.parametrize(
    "loop,replicas,extra,optimizer",
    [
        ("custom", 2, {"precision": "mixed_float16"}, "LossScaleOptimizer"),
        ("fit", 2, {"precision": "mixed_bfloat16"}, "Nadam"),
        ("fit", 1, {"steps_per_execution": 3}, "Nadam"),  # > 1 replica: keras#19246, a config error
        # XLA cannot span logical CPU devices (a config error, tested in test_distribute)
        ("fit", 1, {"jit_compile": True}, "Nadam"),
        ("custom", 1, {"jit_compile": True}, "Nadam"),
    ],
)
def test_precision_and_compilation_options_train(tmp_path, loop, replicas, extra, optimizer):
    case("curve", loop, replicas, "false", tmp_path / "out.json", json.dumps(extra))
    out = json.loads((tmp_path / "out.json").read_text())
    losses = [row["loss"] for row in out["history"]]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert out["logits_dtype"] == "float32"  # the output layer stays float32
    assert out["optimizer"] == optimizer  # mixed_float16 scales the loss
    expected = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}.get(extra.get("precision"), "float32")
    assert out["compute_dtype"] == expected
