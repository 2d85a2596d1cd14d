"""pipeline/tools/bench.py's parts as benchmarks/step_breakdown.py takes them (the full batches,
the model's FLOPs, the machine's peak), on small prepared data. `pipeline bench` itself (warm-up
and timed steps, the figures, the MLflow run, scaling over replicas, its options):
tests/commands/test_bench_command.py."""

import sys

import pytest
from support.datasets import prepared_reuters
from support.processes import sh, subprocess_env
from support.project import ROOT

pytestmark = pytest.mark.slow


def test_the_step_breakdown_times_each_part_of_a_step(tmp_path):
    """benchmarks/step_breakdown.py on the model `pipeline bench` measures, of the same data: a row
    per part, the forward pass's arithmetic a third of a training step's."""
    prepared = prepared_reuters(tmp_path, n=400, preprocess__reuters__max_len=80)
    result = sh(
        sys.executable,
        ROOT / "benchmarks" / "step_breakdown.py",
        "reuters",
        "--data",
        prepared / "prepared",
        "--steps",
        6,
        "--spe",
        2,
        "-S",
        "train.reuters.batch_size_per_replica=32",
        cwd=prepared,
        env=subprocess_env(),
    )
    headline, header, *rows, peak, first = result.stdout.splitlines()
    assert "; 2.5 MFLOP per training sample;" in headline
    mflop = 2544234 / 1e6  # test_bench_command.py's count (test_measures_and_logs_a_benchmark_run)
    names = [row[:32].strip() for row in rows]
    assert names == [
        "input pipeline alone",
        "forward",
        "forward + backward",
        "whole step (update, metrics)",
        "fit, steps_per_execution 1",
        "fit, steps_per_execution 2",
    ]
    figures = {name: [float(v.replace(",", "")) for v in row[32:].split()] for name, row in zip(names, rows)}
    for values in figures.values():
        # samples/s from the unrounded time: ms/step is printed to 0.01
        assert (
            values[0] > 0 and 32_000 / (values[0] + 0.005) - 1 <= values[1] <= 32_000 / max(values[0] - 0.005, 1e-6) + 1
        )
    samples, gflops = figures["forward"][1:3]
    assert gflops == pytest.approx(samples * mflop / 3 / 1000, rel=0.01, abs=0.06)
    samples, gflops = figures["whole step (update, metrics)"][1:3]
    assert gflops == pytest.approx(samples * mflop / 1000, rel=0.01, abs=0.06)
    assert peak.startswith("peak: ")
    label, seconds = first.split(": ", 1)
    assert label == "first call (trace, graph optimization, one run), s", first
    parts = dict(part.rsplit(" ", 1) for part in seconds.split(", "))
    assert list(parts) == ["forward", "forward + backward", "whole step"], first
    assert all(float(value) > 0 for value in parts.values()), first


def test_the_test_accuracy_by_epoch_is_a_row_per_epoch_and_the_second_halfs_figures(tmp_path):
    """benchmarks/test_by_epoch.py: a row per epoch, each test accuracy a count of the test
    samples; the last line's figures are the last row's and the second half's (its CSV the same rows)."""
    prepared = prepared_reuters(tmp_path, n=240, preprocess__reuters__max_len=40)
    result = sh(
        sys.executable,
        ROOT / "benchmarks" / "test_by_epoch.py",
        "reuters",
        "--data",
        prepared / "prepared",
        "--csv",
        tmp_path / "by_epoch.csv",
        "-S",
        "train.reuters.epochs=3",
        "-S",
        "train.reuters.batch_size_per_replica=32",
        cwd=prepared,
        env=subprocess_env(),
    )
    *rows, last = result.stdout.splitlines()
    figures = [dict(zip(row.split()[::2], row.split()[1::2])) for row in rows]
    assert [f["epoch"] for f in figures] == ["1", "2", "3"]
    tests = [float(f["test_accuracy"]) for f in figures]
    test_samples = 48  # a fifth of 240, Reuters' test split
    assert all(abs(t * test_samples - round(t * test_samples)) < 0.01 for t in tests), tests
    late = tests[1:]  # epochs 2-3
    assert last == (
        f"reuters: test accuracy {tests[-1]:.4f} at the last epoch (3); epochs 2-3: mean {sum(late) / 2:.4f}, "
        f"lowest {min(late):.4f}, highest {max(late):.4f}"
    )
    written = (tmp_path / "by_epoch.csv").read_text().splitlines()
    assert written[0] == "epoch,accuracy,val_accuracy,test_accuracy" and len(written) == 4
    assert [round(float(line.split(",")[3]), 4) for line in written[1:]] == tests
