"""tests/durations.json from a run's JUnit XML: each test module's seconds (setup included), the
order in which tests/runner/order.py hands the modules out to xdist's workers, longest first; and
how long the container images took to build in the background (`images_seconds`, the property
tests/runner/plugin.py adds to the XML; the file's own when the run built none); and what each
module started (`census`: the processes that imported TensorFlow and the trainings,
tests/runner/census.py, which the end of a run compares with these seconds).

    .venv/bin/pytest --junitxml=/tmp/junit.xml && .venv/bin/python scripts/test_durations.py /tmp/junit.xml

With --table it writes nothing and prints the run's modules as docs/testing.md shows them: each
module's seconds beside the TensorFlow processes and the trainings it started, most seconds first.
With --tests it writes nothing and prints the tests that started the most TensorFlow processes,
each with its seconds: where a cut would count.

A module the file does not name runs after those it names; a module it names that no longer
exists fails tests/repository/test_durations.py, so that a rename updates the file."""

from __future__ import annotations

import argparse
import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DURATIONS = ROOT / "tests" / "durations.json"


def module_seconds(junit: Path) -> dict[str, float]:
    """{tests/<...>/test_x.py: seconds} of every test case in `junit`."""
    seconds: collections.defaultdict[str, float] = collections.defaultdict(float)
    for case in ET.parse(junit).iter("testcase"):
        path = case.get("classname", "").replace(".", "/") + ".py"
        while path.count("/") > 1 and not (ROOT / path).is_file():  # a class inside the module
            path = path.rsplit("/", 1)[0] + ".py"
        if (ROOT / path).is_file():
            seconds[path] += float(case.get("time") or 0)
    return {path: round(s, 1) for path, s in sorted(seconds.items(), key=lambda item: (-item[1], item[0]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", type=Path, help="the JUnit XML of a whole run (pytest --junitxml)")
    parser.add_argument("--table", action="store_true", help="print the modules' table; write nothing")
    parser.add_argument("--tests", type=int, metavar="N", help="print the N tests that started most; write nothing")
    args = parser.parse_args(argv)
    seconds = module_seconds(args.junit)
    if not seconds:
        print(f"error: {args.junit}: no test case of a module of tests/", file=sys.stderr)
        return 1
    if args.table:
        print("\n".join(table(seconds, census(args.junit))))
        return 0
    if args.tests:
        print("\n".join(busiest(test_seconds(args.junit), census(args.junit, "census_tests"), args.tests)))
        return 0
    images = images_seconds(args.junit)
    if images is None:
        images = json.loads(DURATIONS.read_text())["images_seconds"]
    counts = census(args.junit)
    DURATIONS.write_text(json.dumps({"images_seconds": images, "modules": seconds, "census": counts}, indent=1) + "\n")
    return 0


def table(seconds: dict[str, float], counts: dict[str, dict[str, int]], least: float = 10.0) -> list[str]:
    """A Markdown table of the modules of `least` seconds or more, or that started TensorFlow,
    then one row for the rest; the totals last. "forked warm": the processes a warm-start
    server forked with TensorFlow imported (tests/runner/warm_start.py), instead of importing it."""
    rows = ["| module | seconds | imported TensorFlow | forked warm | trainings |", "|---|---:|---:|---:|---:|"]
    keys = ("tensorflow_processes", "warm_processes", "trainings")

    def row(name: str, s: str, count: list[int], bold: bool = False) -> str:
        return f"| {name} |{f' {s}' if s else ''} | " + " | ".join(f"**{n}**" if bold else str(n) for n in count) + " |"

    rest, others = [0, 0, 0], (0.0, 0)  # the rest's counts; its seconds and modules
    for module, s in seconds.items():
        count = [counts.get(module, {}).get(key, 0) for key in keys]
        if s >= least or count[0] or count[1]:
            rows.append(row(f"`{module.removeprefix('tests/')}`", f"{s:,.0f}", count))
        else:
            rest, others = [a + b for a, b in zip(rest, count)], (others[0] + s, others[1] + 1)
    rows.append(row(f"the other modules ({others[1]})", f"{others[0]:,.0f}", rest))
    for module, count_of in sorted((m, c) for m, c in counts.items() if m not in seconds):  # the pytest processes'
        rows.append(row(module, "", [count_of.get(key, 0) for key in keys]))
    totals = [sum(c.get(key, 0) for c in counts.values()) for key in keys]
    rows.append(row(f"**all {len(seconds)} modules**", f"**{sum(seconds.values()):,.0f}**", totals, bold=True))
    return rows


def test_seconds(junit: Path) -> dict[str, float]:
    """{JUnit classname::name: seconds} of every test case in `junit` (setup included)."""
    return {
        f"{c.get('classname')}::{c.get('name')}": float(c.get("time") or 0) for c in ET.parse(junit).iter("testcase")
    }


def busiest(seconds: dict[str, float], counts: dict[str, dict[str, int]], rows: int) -> list[str]:
    """The `rows` tests that started the most TensorFlow processes (then trainings), each with
    its seconds (its JUnit name: the node ID's path with dots, no `.py`)."""

    def junit_name(test: str) -> str:  # tests/a.py::Class::test_b -> tests.a.Class::test_b
        if "::" not in test:  # (the pytest processes)
            return test
        path, *scopes, name = test.split("::")
        return f"{'.'.join([path.removesuffix('.py').replace('/', '.'), *scopes])}::{name}"

    ranked = sorted(
        counts.items(),
        key=lambda item: (-item[1].get("tensorflow_processes", 0), -item[1].get("trainings", 0), item[0]),
    )
    lines = [f"{'processes':>9} {'trainings':>9} {'seconds':>8}  test"]
    for test, count in ranked[:rows]:
        s = seconds.get(junit_name(test))
        lines.append(
            f"{count.get('tensorflow_processes', 0):9d} {count.get('trainings', 0):9d} "
            f"{'' if s is None else f'{s:8.1f}':>8}  {test}"
        )
    return lines


def images_seconds(junit: Path) -> float | None:
    """The images' build time the run recorded, if it built them."""
    value = _property(junit, "images_seconds")
    return None if value is None else float(value or 0)


def census(junit: Path, name: str = "census") -> dict[str, dict[str, int]]:
    """{module: {tensorflow_processes, trainings}} the run counted (`census_tests`: by test),
    those that started none left out."""
    value = _property(junit, name)
    counts = json.loads(value) if value else {}
    return {m: c for m, c in sorted(counts.items()) if any(c.values())}


def _property(junit: Path, name: str) -> str | None:
    for prop in ET.parse(junit).iter("property"):
        if prop.get("name") == name:
            return prop.get("value")
    return None


if __name__ == "__main__":
    sys.exit(main())
