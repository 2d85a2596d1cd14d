"""What this process has used so far: its peak memory, the figure every stage reports."""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time


def _mib(maxrss: int) -> float:
    """ru_maxrss in MiB: Linux counts it in KiB, macOS in bytes."""
    return maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)


def peak_rss_mb() -> float:
    """The process's peak resident set size in MiB."""
    return _mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap glibc's malloc arenas (M_ARENA_MAX), before TensorFlow starts its threads.

    glibc gives each thread that allocates at once an arena of its own, up to 8 per core, and
    memory freed in one arena is not reused by another: TensorFlow's thread pools fragment the
    heap that way (MNIST's training: ~100 MB more peak memory with the default, and no faster).
    Does nothing where malloc is not glibc's; MALLOC_ARENA_MAX in the environment wins.
    Returns whether the cap was set."""
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # musl, or no C library to ask
        return False
    return mallopt(-8, arenas) == 1  # -8: M_ARENA_MAX in malloc.h


def run_measured(args: list[str], **popen_kwargs) -> tuple[int, float, float]:
    """Run a command to its end: (exit code, wall seconds, peak RSS in MiB of the largest
    process among it and the descendants it waited for), the operating system's own count
    (wait4). Pass stdout/stderr as files or DEVNULL: nothing is read from pipes here.

    Call it from a small process: Linux counts the caller's own resident memory at the fork
    in the child's peak too (exec keeps the old address space's high-water mark)."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, **popen_kwargs)
    _, status, rusage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.perf_counter() - start, _mib(rusage.ru_maxrss)
