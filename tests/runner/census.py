"""What each test and test module costs: its seconds against tests/durations.json, the Python
processes it starts that import TensorFlow and the trainings it starts (tests/runner/census_hook.py
counts them in every process of the suite's environment).

tests/runner/plugin.py starts the count when a session begins (`start`: a `.pth` line in the
environment's site-packages that runs the hook while PIPELINE_TEST_CENSUS names a folder), reads
it by test when the session ends (`read`, then `by_module`) and prints `report`'s lines last, so
that a module that grew shows at every run; both go into the JUnit XML, and
scripts/test_durations.py keeps the modules' in tests/durations.json with the seconds and
lists the tests' (`--tests`). Not counted: the processes of other environments (the lowest versions' `.venv`, the
containers') and a training killed before `train` was called."""

from __future__ import annotations

import bisect
import collections
import json
import shutil
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

VARIABLE = "PIPELINE_TEST_CENSUS"
HOOK = Path(__file__).with_name("census_hook.py")
PTH = "pipeline-test-census.pth"


@dataclass
class Count:
    tensorflow: int = 0  # processes that imported TensorFlow
    trainings: int = 0
    cpu: float = 0.0  # CPU seconds of those processes and the warm ones that exited (a killed one says nothing)
    warm: int = 0  # processes forked by a server that had imported it (tests/runner/warm_start.py)

    def as_json(self) -> dict:
        return {"tensorflow_processes": self.tensorflow, "warm_processes": self.warm, "trainings": self.trainings}


def pth_line(hook: Path = HOOK, variable: str = VARIABLE, name: str = "census_hook") -> str:
    """The line site.py runs at every start of the environment's Python: the hook (as module
    `name`), while `variable` is set and the hook's file is there (a clone's `.pth` outlives the
    clone). tests/runner/warm_start.py's hook runs through one too."""
    return (
        f"import os; os.environ.get({variable!r}) and os.path.isfile({str(hook)!r}) and "
        f"exec(compile(open({str(hook)!r}).read(), {str(hook)!r}, 'exec'), "
        f"{{'__name__': {name!r}, '__file__': {str(hook)!r}}})\n"
    )


def start(site_packages: Path | None = None) -> Path:
    """The `.pth` line in place, and the folder the processes will write to while VARIABLE names
    it in their environment (tests/runner/plugin.py sets it in the session's, which they inherit)."""
    site_packages = site_packages or Path(sysconfig.get_paths()["purelib"])
    (site_packages / PTH).write_text(pth_line())
    return Path(tempfile.mkdtemp(prefix="pipeline-census-"))


def stop(folder: Path, site_packages: Path | None = None) -> None:
    site_packages = site_packages or Path(sysconfig.get_paths()["purelib"])
    (site_packages / PTH).unlink(missing_ok=True)
    shutil.rmtree(folder, ignore_errors=True)


class Timeline:
    """Which test each xdist worker ran when: from the reports of the tests' phases (their start
    and stop), so that an event is put down to the test its worker was running at that moment,
    whatever the environment of the process that wrote it says."""

    def __init__(self) -> None:
        self.spans: dict[str, list[tuple[float, float, str]]] = collections.defaultdict(list)

    def add(self, worker: str, start: float, stop: float, test: str) -> None:
        bisect.insort(self.spans[worker], (start, stop, test))

    def test_at(self, worker: str, when: float) -> str | None:
        """The test of the last phase that started on `worker` by `when`."""
        spans = self.spans.get(worker) or []
        i = bisect.bisect_right(spans, (when, float("inf"), "")) - 1
        return spans[i][2] if i >= 0 else None


def read(folder: Path, timeline: Timeline | None = None) -> dict[str, Count]:
    """{test (its node ID): Count} from the events the processes wrote."""
    counts: collections.defaultdict[str, Count] = collections.defaultdict(Count)
    tensorflow: set[tuple[str, int]] = set()  # (file, pid): a process that imported it
    exited: set[tuple[str, int]] = set()
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except ValueError:  # a line cut short by a kill
                continue
            found = timeline.test_at(event["worker"], event["time"]) if timeline else None
            count = counts[found or event["test"]]
            if event["event"] == "tensorflow":
                if event.get("warm"):
                    count.warm += 1
                else:
                    count.tensorflow += 1
                tensorflow.add((path.name, event["pid"]))
            elif event["event"] == "train":
                count.trainings += 1
            elif event["event"] == "exit" and (path.name, event["pid"]) in tensorflow - exited:
                count.cpu += event["cpu"]
                exited.add((path.name, event["pid"]))
    return dict(counts)


def by_module(counts: dict[str, Count]) -> dict[str, Count]:
    """The tests' counts summed by module (tests/a/test_x.py::test_y -> tests/a/test_x.py)."""
    modules: collections.defaultdict[str, Count] = collections.defaultdict(Count)
    for test, count in counts.items():
        total = modules[test.split("::")[0]]
        total.tensorflow += count.tensorflow
        total.warm += count.warm
        total.trainings += count.trainings
        total.cpu += count.cpu
    return dict(modules)


def report(seconds: dict[str, float], recorded: dict[str, float], counts: dict[str, Count], rows: int = 8) -> list[str]:
    """The modules whose seconds grew most against `recorded` (tests/durations.json's), each with
    what it started, and the whole session's sums."""
    growth = {m: seconds[m] - recorded.get(m, 0.0) for m in seconds}
    grown = sorted((m for m in seconds if growth[m] >= 0.05), key=lambda m: (-growth[m], m))[:rows]
    lines = [
        "the modules whose time grew most against tests/durations.json:"
        if grown
        else "no module's time grew against tests/durations.json"
    ]
    width = max((len(m) for m in grown), default=0)
    for module in grown:
        before = recorded.get(module)
        ratio = f"{seconds[module] / before:5.2f}x" if before else ("  new" if before is None else "     ")
        count = counts.get(module, Count())
        lines.append(
            f"  {growth[module]:+7.1f} s {ratio}  {module:<{width}}  {seconds[module]:7.1f} s  "
            f"{count.tensorflow:3d} imported TensorFlow  {count.warm:3d} forked warm  {count.trainings:3d} trainings"
        )
    total, before = sum(seconds.values()), sum(recorded.get(m, 0.0) for m in seconds)
    processes, modules = sum(c.tensorflow for c in counts.values()), "modules" if len(seconds) != 1 else "module"
    lines.append(
        f"{len(seconds)} {modules} in all: {total:,.0f} s against {before:,.0f} s; {processes} processes imported "
        f"TensorFlow and {sum(c.warm for c in counts.values())} were forked warm with it imported "
        f"({sum(c.cpu for c in counts.values()):,.0f} CPU s), "
        f"{sum(c.trainings for c in counts.values())} trainings"
    )
    return lines
