"""benchmarks/loops.py with one epoch: the throughput table, steady state n/a, and the
kill-and-resume part skipped in one line (a kill after the first of one epoch is no kill)."""

import re
import subprocess
import sys

import pytest
from support.datasets import make_reuters_raw
from support.processes import run_pipeline, subprocess_env
from support.project import ROOT, write_params


def run_script(*args, cwd=ROOT, timeout=900):
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "loops.py"), *map(str, args)],
        cwd=cwd,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("epochs", ["0", "-1", "two"])
def test_epochs_below_one_is_a_usage_error(epochs):
    result = run_script("--data", "nowhere", "--epochs", epochs)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        f"loops.py: error: argument --epochs: expected a positive integer, got "
        f"{epochs if epochs != 'two' else repr(epochs)}"
    )


@pytest.mark.slow
def test_one_epoch_prints_the_table_and_skips_kill_and_resume(tmp_path):
    make_reuters_raw(tmp_path / "raw", n=120)
    write_params(tmp_path, {"preprocess.reuters.max_len": 30})
    prepared = run_pipeline("preprocess", "reuters", "--raw", "raw", "--out", "prepared", cwd=tmp_path)
    assert prepared.returncode == 0, prepared.stderr
    result = run_script("--data", tmp_path / "prepared", "--epochs", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    header, *rows, skipped = result.stdout.splitlines()
    assert header.split() == ["loop", "replicas", "samples/s", "(all)", "samples/s", "(steady)", "val", "acc"]
    assert [row.split()[:2] for row in rows] == [["fit", "1"], ["fit", "2"], ["custom", "1"], ["custom", "2"]]
    for row in rows:
        assert re.fullmatch(r"\S+\s+\d\s+\d+\s+n/a\s+\d\.\d{4}", row.strip()), row
    assert skipped == "kill-and-resume: skipped: it kills a run in its second epoch, and --epochs 1 has none"
