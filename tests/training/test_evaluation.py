import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pipeline.training import evaluation


def test_metrics_from_logits_match_definitions():
    logits = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.0, 5.0], [0.5, 2.0, 1.0]])
    y = np.array([0, 2, 2, 0])
    m = evaluation.metrics_from_logits(logits, y, top_k=2)
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert m["test_loss"] == pytest.approx(-np.log(probs[np.arange(4), y]).mean())
    assert m["test_accuracy"] == 0.5
    # sample 1: label 2 is second best -> in top 2; sample 3: label 0 is third -> not.
    assert m["test_top2_accuracy"] == 0.75
    assert m["test_samples"] == 4
    assert "test_top2_accuracy" not in evaluation.metrics_from_logits(logits, y)


def test_confusion_and_per_class_report():
    y_true = np.array([0, 0, 1, 1, 1, 2])
    y_pred = np.array([0, 1, 1, 1, 0, 1])
    matrix = evaluation.confusion_matrix(y_true, y_pred, 4)
    assert matrix.tolist() == [[1, 1, 0, 0], [1, 2, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]]
    report = evaluation.per_class_report(matrix, ["cat", "dog", "owl", "yak"])
    assert report[1] == {"class": "dog", "precision": 0.5, "recall": pytest.approx(2 / 3), "support": 3, "predicted": 4}
    assert report[2]["precision"] == 0.0 and report[2]["recall"] == 0.0
    macro = evaluation.macro_averages(report)
    # class 3 has no test samples and is left out of the averages
    assert macro["test_macro_recall"] == pytest.approx((0.5 + 2 / 3 + 0) / 3)


def test_the_reports_name_each_class_as_the_data_does(tmp_path):
    y_true, y_pred = np.array([0, 1, 2, 2]), np.array([0, 2, 2, 1])
    matrix = evaluation.confusion_matrix(y_true, y_pred, 3)
    names = ["earn", "acq", "crude, oil"]  # a name the CSV must quote
    prepared: Any = SimpleNamespace(class_names=names)
    report = evaluation.per_class_report(matrix, names)
    ev = evaluation.Evaluation({"test_accuracy": 0.5}, report, matrix, prepared, y_true, y_pred, "d")
    files = {
        k: tmp_path / f
        for k, f in (("metrics", "m.json"), ("per_class", "p.csv"), ("confusion", "c.csv"), ("confusion_png", "c.png"))
    }
    evaluation.write_outputs(ev, **files, title="t")
    assert files["confusion"].read_text().splitlines() == [
        "actual,predicted",
        "earn,earn",
        'acq,"crude, oil"',
        '"crude, oil","crude, oil"',
        '"crude, oil",acq',
    ]
    assert [row.split(",")[0] for row in files["per_class"].read_text().splitlines()] == [
        "class",
        "earn",
        "acq",
        '"crude',
    ]


def opens_of(paths, run) -> dict:
    """How many times each of `paths` is opened while `run()` runs, as the kernel counts them
    (inotify: an open, then its close, so that no two events in a row are the same and merged)."""
    import ctypes
    import os
    import struct

    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    in_open, in_close = 0x20, 0x10 | 0x08  # IN_OPEN; IN_CLOSE_NOWRITE | IN_CLOSE_WRITE
    watches = {libc.inotify_add_watch(fd, str(p).encode(), in_open | in_close): p for p in paths}
    try:
        run()
        events = b""
        while True:
            try:
                events += os.read(fd, 1 << 16)
            except BlockingIOError:
                break
    finally:
        os.close(fd)
    counts = dict.fromkeys(paths, 0)
    at = 0
    while at < len(events):
        wd, mask, _cookie, size = struct.unpack_from("iIII", events, at)
        at += 16 + size
        if mask & in_open:
            counts[watches[wd]] += 1
    return counts


@pytest.mark.slow
@pytest.mark.e2e
def test_evaluate_reads_each_test_shard_once(trained_project, tmp_path):
    """Its shards' sha256, its digest, its labels and the predictions from one read of each
    test shard of MNIST (the trained project's model, and a copy of its prepared data: the
    kernel counts every process's opens, and other tests copy the trained project meanwhile)."""
    import shutil

    from support.processes import subprocess_env
    from support.project import ROOT

    from pipeline.data import prepared

    project = trained_project.path
    data = shutil.copytree(project / "data" / "prepared" / "mnist", tmp_path / "mnist")
    shards = prepared.read(data).shard_paths("test")
    code = (
        "from pathlib import Path; from pipeline.config.loading.loader import load_params; "
        "from pipeline.training import evaluation; from pipeline.data import prepared; "
        f"ev = evaluation.evaluate(Path({str(project / 'models' / 'mnist')!r}), prepared.read({str(data)!r}), "
        f"load_params(Path({str(project / 'params.yaml')!r}), 'mnist').evaluate); print(ev.test_data)"
    )
    done = {}

    def run():
        done["result"] = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=subprocess_env(), capture_output=True, text=True
        )

    counts = opens_of(shards, run)
    assert done["result"].returncode == 0, done["result"].stderr[-3000:]
    assert done["result"].stdout.strip() == prepared.read(data).digest("test")[0]
    assert list(counts.values()) == [1] * len(shards), counts
