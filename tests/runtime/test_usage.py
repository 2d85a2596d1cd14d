"""pipeline.runtime.usage: the peak memory a stage reports, the malloc arena cap."""

from support.processes import run_python, subprocess_env

from pipeline.runtime import usage


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
