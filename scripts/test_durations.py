"""tests/durations.json from a run's JUnit XML: each test module's seconds (setup included), the
order in which tests/conftest.py hands the modules out to xdist's workers, longest first; and
how long the container images took to build in the background (`images_seconds`, the property
tests/conftest.py adds to the XML; the file's own when the run built none).

    .venv/bin/pytest --junitxml=/tmp/junit.xml && .venv/bin/python scripts/test_durations.py /tmp/junit.xml

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
    args = parser.parse_args(argv)
    seconds = module_seconds(args.junit)
    if not seconds:
        print(f"error: {args.junit}: no test case of a module of tests/", file=sys.stderr)
        return 1
    images = images_seconds(args.junit)
    if images is None:
        images = json.loads(DURATIONS.read_text())["images_seconds"]
    DURATIONS.write_text(json.dumps({"images_seconds": images, "modules": seconds}, indent=1) + "\n")
    return 0


def images_seconds(junit: Path) -> float | None:
    """The images' build time the run recorded, if it built them."""
    for prop in ET.parse(junit).iter("property"):
        if prop.get("name") == "images_seconds":
            return float(prop.get("value") or 0)
    return None


if __name__ == "__main__":
    sys.exit(main())
