"""benchmarks/harness.py, what the benchmarks share: a command measured as a whole process (its
largest descendant's peak memory, its exit code), and the train stage's command line."""

import subprocess
import sys
from pathlib import Path

from support.processes import subprocess_env
from support.project import ROOT

BENCHMARKS = ROOT / "benchmarks"
GRANDCHILD = "import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', {code!r}]).returncode)"
ALLOCATE = "b = bytearray(300 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); raise SystemExit(3)"


def test_run_measured_counts_the_largest_descendant_and_keeps_the_exit_code():
    # Measured from a small process: Linux counts the caller's own memory at the fork in the
    # child's peak too (exec keeps the old address space's high-water mark), and this test
    # process may hold TensorFlow by now.
    measure = (
        f"import subprocess, sys; sys.path.insert(0, {str(BENCHMARKS)!r}); from harness import run_measured; "
        "m = run_measured([sys.executable, '-c', sys.argv[1]], stdout=subprocess.DEVNULL); "
        "print(m.code, m.seconds, m.cpu_seconds, m.peak_mb)"
    )
    out = subprocess.run(
        [sys.executable, "-c", measure, GRANDCHILD.format(code=ALLOCATE)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    code, seconds, cpu, peak = out.stdout.split()
    assert int(code) == 3 and float(seconds) > 0 and float(cpu) > 0
    assert 300 <= float(peak) < 600  # the grandchild's 300 MiB, not the launcher's ~10
    small = subprocess.run(
        [sys.executable, "-c", measure, "pass"], capture_output=True, text=True, env=subprocess_env(), timeout=120
    ).stdout.split()
    assert int(small[0]) == 0 and float(small[3]) < 100


def test_the_train_stage_writes_everything_in_one_folder(tmp_path):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import harness
    finally:
        sys.path.remove(str(BENCHMARKS))
    argv = harness.train_argv("mnist", Path("prepared"), tmp_path, extra=["--backup-dir", "b"])
    assert argv[:5] == [sys.executable, "-m", "pipeline", "-q", "train"]
    options = dict(zip(argv[6::2], argv[7::2]))
    assert options == {
        "--data": str(Path("prepared").resolve()),
        "--model-dir": str(tmp_path / "model"),
        "--history": str(tmp_path / "history.csv"),
        "--summary": str(tmp_path / "train.json"),
        "--curves": str(tmp_path / "curves.png"),
        "--measurements": str(tmp_path / "measurements.json"),
        "--backup-dir": "b",
    }
