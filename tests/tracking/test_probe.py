"""pipeline/tracking/probe.py: a store that cannot take a run is one line naming it, before any work."""

import pytest
from support.processes import run_pipeline


@pytest.mark.parametrize(
    "uri,message",
    [
        (
            "file:///{tmp}/mlruns",
            "file:///{tmp}/mlruns: cannot be opened as an MLflow tracking store (The filesystem "
            "tracking backend (e.g., './mlruns') is in maintenance mode and will not receive "
            "further updates)",
        ),
        (
            "sqlite:///{tmp}/notes.db",
            "sqlite:///{tmp}/notes.db: {tmp}/notes.db is not an MLflow store (file is not a "
            "database); set MLFLOW_TRACKING_URI to the store that holds the runs, or move the "
            "file away",
        ),
    ],
)
def test_a_store_that_cannot_be_opened_is_a_tracking_error_naming_it(tmp_path, monkeypatch, uri, message):
    """What MLflow raises on opening the store in force is the user's to fix, not a bug of the
    project: check_tracking (which every command calls before it logs or reads) says which
    store, in one line; nothing is made where it pointed."""
    from pipeline.errors import TrackingError
    from pipeline.tracking.probe import check_tracking

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    (tmp_path / "notes.db").write_text("notes, not a database\n")
    with pytest.raises(TrackingError) as caught:
        check_tracking(uri.format(tmp=tmp_path))
    assert str(caught.value).startswith(message.format(tmp=tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_a_store_that_cannot_be_opened_stops_a_command_in_one_line(tmp_path):
    from support.processes import subprocess_env

    (tmp_path / "notes.db").write_text("notes, not a database\n")
    result = run_pipeline(
        "compare", "a", "b", cwd=tmp_path, env=subprocess_env(MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'notes.db'}")
    )
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"error: sqlite:///{tmp_path / 'notes.db'}: {tmp_path / 'notes.db'} is not an MLflow store"
    )
    assert len(result.stderr.splitlines()) == 1 and "this is a bug" not in result.stderr


def test_a_uri_of_no_store_mlflow_has_is_a_usage_error_before_mlflow_is_asked(tmp_path):
    """MLflow's own words for it ("Model registry functionality is unavailable; got unsupported
    URI") come only after it tried: the project names the stores that work first."""
    from pipeline.errors import ConfigError
    from pipeline.tracking.probe import check_tracking

    with pytest.raises(ConfigError) as caught:
        check_tracking("foo://bar")
    assert str(caught.value).startswith(
        "MLFLOW_TRACKING_URI: foo:// is no MLflow tracking store: expected sqlite:///PATH"
    )
    assert caught.value.exit_code == 2 and list(tmp_path.iterdir()) == []
