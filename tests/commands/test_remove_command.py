"""`pipeline remove` (pipeline/commands/remove.py) on a copy of the repository's params.yaml and
dvc.yaml: a shipped dataset taken out of both (its sections, its name in dvc.yaml's foreach
lists, metrics and plots) with what was left alone said; the file's last dataset and one it does
not declare refused in one `error:` line, both files untouched; --params names the pair of files
it edits; no TensorFlow or MLflow. A dataset added and removed again to the same bytes:
test_add_command.py."""

from pathlib import Path

import pytest
from support.processes import run_command
from support.project import ROOT

from pipeline.config.loading import loader

FILES = ("params.yaml", "dvc.yaml")


@pytest.fixture
def project(tmp_path) -> Path:
    for name in FILES:
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    return tmp_path


def remove(folder: Path, *args: str) -> tuple[int, str, list[str]]:
    """`pipeline remove ARGS` in `folder`: (exit code, stdout, stderr lines), without TensorFlow or MLflow."""
    result, code, imported = run_command(["remove", *args], cwd=folder)
    assert imported == set(), imported
    return code, result.stdout, result.stderr.splitlines()


def test_remove_takes_out_a_shipped_dataset_and_its_reports(project):
    code, out, err = remove(project, "reuters")
    assert (code, err) == (0, [])
    assert out.splitlines() == [
        "removed reuters from params.yaml and dvc.yaml",
        "left alone: data/raw/reuters, data/prepared/reuters, models/reuters, reports/reuters, dvc.lock's entries "
        "for its stages, and its MLflow experiment and registered model reuters",
    ]
    assert loader.names(project / "params.yaml") == ["mnist"]
    text = (project / "dvc.yaml").read_text()
    assert "reuters" not in text.split("metrics:")[1] and text.count("foreach: [mnist]") == 4
    assert "\n\n# Plot definitions" in text  # the comment after the last metric stays before the plots
    code, _, err = remove(project, "mnist")
    assert (code, err) == (2, ["error: params.yaml: mnist is its only dataset: a params file declares one at least"])


def test_a_dataset_the_file_does_not_declare_is_one_line_and_changes_neither_file(project):
    code, out, err = remove(project, "shapes")
    assert (code, out) == (2, "")
    assert err == ["error: params.yaml: no dataset 'shapes' to remove: it declares reuters, mnist"]
    assert [(project / name).read_bytes() for name in FILES] == [(ROOT / name).read_bytes() for name in FILES]


def test_params_names_the_files_it_edits_and_the_help_imports_no_tensorflow(project):
    other = project / "other"
    other.mkdir()
    for name in FILES:
        (other / name).write_bytes((ROOT / name).read_bytes())
    code, out, err = remove(project, "mnist", "--params", "other/params.yaml")
    assert (code, err) == (0, [])
    assert out.splitlines()[0] == "removed mnist from other/params.yaml and other/dvc.yaml"
    assert loader.names(other / "params.yaml") == ["reuters"]
    assert (other / "dvc.yaml").read_text().count("foreach: [reuters]\n") == 4
    assert loader.names(project / "params.yaml") == ["reuters", "mnist"]  # the files here: untouched
    result, code, imported = run_command(["remove", "--help"])
    assert (code, imported) == (0, set()) and "--params" in result.stdout
