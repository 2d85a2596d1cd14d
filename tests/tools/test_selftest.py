"""pipeline/tools/selftest.py's judgement, on weights and losses as its two processes leave them:
replicas that agree with one device within the tolerance of the largest update pass, and more
than that, or a loss that is not finite, fails with what to try; an all-reduce that sums wrong
fails, naming the one that sums right when a fallback does; the verdict counts failures and
warnings. Its processes on this host, and faults put into them: tests/commands/test_selftest_command.py."""

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.tools import selftest
from pipeline.tools.doctor import Check

BEFORE = [np.zeros((2, 3), np.float32), np.zeros(3, np.float32)]
ONE_DEVICE = [np.full((2, 3), 0.5, np.float32), np.full(3, -0.25, np.float32)]  # the largest update: 0.5


def processes(folder: Path, replicas_off_by: float, losses=(2.5, 2.25)) -> tuple[dict, dict]:
    """What the one-device process and the replicas' leave in `folder` for `_compare`: the weights
    before and after each step (the replicas' off the one device's by `replicas_off_by`)."""
    one = {"stem": str(folder / "one"), "losses": list(losses)}
    many = {
        "stem": str(folder / "many"),
        "losses": list(losses),
        "precision": "float32",
        "strategy": "MirroredStrategy",
        "loop": "fit",
    }
    for k in range(len(losses)):
        selftest._save(f"{many['stem']}-before-{k}.npz", BEFORE)
        selftest._save(f"{one['stem']}-after-{k}.npz", ONE_DEVICE)
        selftest._save(f"{many['stem']}-after-{k}.npz", [w + replicas_off_by for w in ONE_DEVICE])
    return one, many


@pytest.mark.parametrize("off_by, agree", [(0.0, True), (4e-5, True), (6e-5, False), (1e-3, False)])
def test_replicas_agree_within_the_tolerance_of_the_largest_update(tmp_path, off_by, agree):
    loss, update = selftest._compare("reuters", *processes(tmp_path, off_by), 2, "2 logical CPU devices")
    assert (loss.name, loss.status) == ("reuters loss", "pass")
    assert loss.detail == "2 replicas, float32: step losses 2.5 2.25"
    assert (update.name, update.status) == ("reuters update", "pass" if agree else "fail")
    assert update.detail.startswith(
        "2 replicas (2 logical CPU devices, MirroredStrategy, loop fit) and one device agree at each of 2 steps: "
        f"weights differ by {off_by:.2g} at most, the largest update is 0.5 (tolerance 0.0001 of it)"
    )
    assert update.fix.endswith("and loop: custom")  # the other loop to try


def test_a_loss_that_is_not_finite_fails_both_checks(tmp_path):
    loss, update = selftest._compare("mnist", *processes(tmp_path, 0.0, losses=(2.5, float("nan"))), 2, "2 GPUs")
    assert (loss.status, update.status) == ("fail", "fail")
    assert loss.fix.startswith("train with precision float32 and a lower learning rate")


def test_the_all_reduce_in_force_must_sum_right_and_a_fallback_that_does_is_named():
    right = selftest._all_reduce_check({"tried": [["CollectiveAllReduce", "right"]], "works": "CollectiveAllReduce"}, 2)
    assert (right.status, right.detail) == (
        "pass",
        "CollectiveAllReduce sums a value from each of 2 replicas right (3), small and 1M-element tensors",
    )
    tried = [["NcclAllReduce", "wrong sum"], ["HierarchicalCopyAllReduce", "right"]]
    fallback = selftest._all_reduce_check({"tried": tried, "works": "HierarchicalCopyAllReduce"}, 4)
    assert fallback == Check(
        "all-reduce",
        "fail",
        "the one in force does not sum right (NcclAllReduce: wrong sum, HierarchicalCopyAllReduce: right); "
        "HierarchicalCopyAllReduce does",
        "set cross_device_ops: HierarchicalCopyAllReduce",
    )
    none = selftest._all_reduce_check({"tried": [["NcclAllReduce", "failed: no NCCL"]], "works": None}, 4)
    assert (none.status, none.detail) == (
        "fail",
        "no all-reduce sums 4 replicas' values right (NcclAllReduce: failed: no NCCL)",
    )


def test_the_report_is_a_line_per_check_and_the_verdict_or_json():
    checks = [Check("replicas", "warn", "one GPU", "run it elsewhere"), Check("all-reduce", "pass", "sums right", "-")]
    assert selftest.report(checks, as_json=False, seconds=61.4).splitlines() == [
        "warn  replicas   one GPU; fix: run it elsewhere",
        "pass  all-reduce sums right",
        "selftest: passed, 2 checks in 61 s (1 with a warning)",
    ]
    assert selftest.verdict(checks[1:], 3) == "selftest: passed, 1 check in 3 s"
    failed = [Check("reuters update", "fail", "differ", "fix it"), *checks]
    assert selftest.verdict(failed, 90) == ("selftest: 1 of 3 checks failed (90 s): do not start a long run here yet")
    assert [c["status"] for c in json.loads(selftest.report(failed, as_json=True, seconds=90))] == [
        "fail",
        "warn",
        "pass",
    ]


@pytest.mark.slow
def test_the_synthetic_texts_come_with_words_a_model_can_cut_into_ngrams(tmp_path):
    """A text model that reads the words themselves (mlp.char_ngrams) builds on selftest's data."""
    import dataclasses

    from support.project import ROOT

    from pipeline.config.loading.loader import load_params
    from pipeline.training import models

    params = load_params(ROOT / "params.yaml", "reuters")
    data = selftest._synthetic(params, 64, tmp_path / "data")
    assert data.facts.word_index is not None and (data.folder / data.facts.word_index).is_file()
    settings = dataclasses.replace(vars(params.train)["mlp"], char_ngrams=(2, 3), units=(4,))
    model = models.mlp(settings, data)
    assert model.get_layer("char_ngrams_idf").output.shape[-1] > 1
