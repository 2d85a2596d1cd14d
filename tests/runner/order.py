"""The order the test modules are handed out to xdist's workers in: longest first, by their seconds
in a whole run (tests/durations.json), the container tests' modules as soon as the images they
wait for are likely made."""

from __future__ import annotations

import json

from support.project import ROOT

# pytest -n 3 --dist loadscope --no-loadscope-reorder (pyproject.toml):
# A module runs on one worker, so that its module fixtures are made once. Two trainings at once
# on 2 cores each run at about half speed: what a worker more gains is the time the others wait
# (servers, Slurm, Docker builds); with warm starts (runner/warm_start.py) the cores are not busy
# all the time on two workers, and a third made the run shorter (docs/testing.md). Modules are handed out
# longest first, by their seconds in a whole run (tests/durations.json, written from a run's
# JUnit XML by scripts/test_durations.py), so that the last ones handed out are short and the
# workers finish together; a module the file does not name (seconds, as a rule) comes after,
# in path order. A module of container tests waits for the images the session builds in the
# background: it is handed out once the modules before it add up to the images' build time (the
# same file's `images_seconds`, per worker), so that no worker sits waiting for them.
DURATIONS = json.loads((ROOT / "tests" / "durations.json").read_text())


def module_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


def module_order(seconds: dict[str, float], waiting: set[str], images_seconds: float, workers: int = 2) -> list[str]:
    """The modules longest first, each of `waiting` as soon as those before it cover the images'
    build (their seconds over the number of workers)."""
    ranked = sorted(seconds, key=lambda m: (-seconds[m], m))
    order: list[str] = []
    pending: list[str] = []
    elapsed = 0.0
    for module in ranked:
        if elapsed >= images_seconds:
            order += pending
            pending = []
        if module in waiting and elapsed < images_seconds:
            pending.append(module)
            continue
        order.append(module)
        elapsed += seconds[module] / workers
    return order + pending
