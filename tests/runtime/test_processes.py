"""pipeline/runtime/processes.py: work in a process of its own gets its arguments and gives back its
result as JSON; a failure there is its one `error:` line and its exit code in the parent."""

import pytest
from support.project import ROOT

from pipeline.runtime import processes

CHILD = """
from pipeline.runtime import processes
from pipeline.errors import ConfigError


def work(spec):
    if spec["n"] < 0:
        raise ConfigError(f"n: expected a non-negative number, got {spec['n']}")
    return {"twice": 2 * spec["n"], "verbosity": spec["verbosity"]}


if __name__ == "__main__":
    processes.serve(work)
"""


@pytest.fixture
def child(tmp_path, monkeypatch):
    (tmp_path / "child_work.py").write_text(CHILD)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{ROOT}")
    return tmp_path


def test_the_result_comes_back_and_a_failure_is_its_exit_code_and_one_line(child, capfd):
    from pipeline import log

    # the parent's verbosity goes with the arguments
    assert processes.run("child_work", {"n": 21}, child / "out.json") == {"twice": 42, "verbosity": log.verbosity()}
    with pytest.raises(SystemExit) as caught:
        processes.run("child_work", {"n": -1}, child / "bad.json")
    assert caught.value.code == 2
    assert capfd.readouterr().err.splitlines() == ["error: n: expected a non-negative number, got -1"]
    assert not (child / "bad.json").exists()
