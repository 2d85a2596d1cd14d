"""What this process has used so far: its peak memory, the figure every stage reports."""

from __future__ import annotations

import ctypes
import os
import resource
import sys


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
