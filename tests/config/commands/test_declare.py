"""pipeline.config.commands.declare on its own: an edit of the params file and dvc.yaml waits
for the lock another `pipeline add` or `remove` holds, and when it waits too long, one error and
nothing written. The commands as a user runs them (a dataset declared in both files from its
kind's template, read from its data, taken out again to the same bytes, every refusal one
`error:` line): tests/commands/test_add_command.py and test_remove_command.py."""

import pytest
from support.project import ROOT

from pipeline import io as pipeline_io
from pipeline.config.commands import declare
from pipeline.errors import PipelineError


def test_an_edit_that_waits_too_long_for_the_lock_is_one_error_and_writes_nothing(tmp_path, monkeypatch):
    names = ("params.yaml", "dvc.yaml")
    for name in names:
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    monkeypatch.setattr(declare, "LOCK_SECONDS", 0.3)
    url = "https://data.example.com/shapes.tar.gz"  # not fetched: the lock is waited for first
    with pipeline_io.locked(tmp_path / ".params.yaml.lock"):  # held here: another command's edit
        with pytest.raises(PipelineError) as info:
            declare.add(tmp_path / "params.yaml", "shapes", "image_folders", url, None, [])
        with pytest.raises(PipelineError, match=r"held by another `pipeline add` or `pipeline remove`"):
            declare.remove(tmp_path / "params.yaml", "mnist")
    assert str(info.value) == (
        f"{tmp_path / '.params.yaml.lock'}: held by another `pipeline add` or `pipeline remove` for 0.3 s; try again "
        "once it has ended"
    )
    assert [(tmp_path / name).read_bytes() for name in names] == [(ROOT / name).read_bytes() for name in names]
