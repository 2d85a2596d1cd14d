"""pipeline.runtime.usage: the peak memory a stage reports, the malloc arena cap, measured child runs."""

import subprocess
import sys

from helpers import run_python, subprocess_env

from pipeline.runtime import usage

GRANDCHILD = "import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', {code!r}]).returncode)"
ALLOCATE = "b = bytearray(300 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); raise SystemExit(3)"


def test_run_measured_counts_the_largest_descendant_and_keeps_the_exit_code():
    # Measured from a small process: Linux counts the caller's own memory at the fork in the
    # child's peak too (exec keeps the old address space's high-water mark), and this test
    # process may hold TensorFlow by now.
    measure = (
        "import subprocess, sys; from pipeline.runtime.usage import run_measured; "
        "print(*run_measured([sys.executable, '-c', sys.argv[1]], stdout=subprocess.DEVNULL))"
    )
    out = subprocess.run(
        [sys.executable, "-c", measure, GRANDCHILD.format(code=ALLOCATE)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    code, seconds, peak = out.stdout.split()
    assert int(code) == 3 and float(seconds) > 0
    assert 300 <= float(peak) < 600  # the grandchild's 300 MiB, not the launcher's ~10
    small = subprocess.run(
        [sys.executable, "-c", measure, "pass"], capture_output=True, text=True, env=subprocess_env(), timeout=120
    ).stdout.split()
    assert int(small[0]) == 0 and float(small[2]) < 100


def test_peak_rss_is_this_processs_in_mib():
    before = usage.peak_rss_mb()
    block = bytearray(200 * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])
    assert usage.peak_rss_mb() >= before + 150 or usage.peak_rss_mb() >= 200


def test_the_arena_cap_is_set_on_glibc_and_the_environment_wins():
    probe = "from pipeline.runtime import usage; print(usage.limit_malloc_arenas())"
    env = subprocess_env()
    env.pop("MALLOC_ARENA_MAX", None)
    assert run_python(probe, env=env).stdout.strip() == "True"
    assert run_python(probe, env=subprocess_env(MALLOC_ARENA_MAX="4")).stdout.strip() == "False"
