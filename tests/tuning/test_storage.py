"""Where a study lives: the default journal beside mlflow.db, a URL's scheme checked before a
driver is asked, a journal in a folder that is not there, whether a storage is there to read
found without making it (a journal file, a sqlite file, Optuna's tables in a real PostgreSQL),
and a database that cannot be reached, in one line. A URL's scheme refused by `pipeline tune`:
tests/commands/test_tune_command.py."""

import pytest
from support.project import ROOT
from support.servers import empty_database, free_ports
from support.tracking import use_sqlite

from pipeline.config.loading.loader import load_params
from pipeline.errors import ConfigError, StudyError
from pipeline.tuning import storage


def params(*overrides):
    return load_params(ROOT / "params.yaml", "reuters", list(overrides))


def test_the_default_storage_is_a_journal_beside_mlflow_db(tmp_path, monkeypatch):
    use_sqlite(tmp_path, monkeypatch)
    assert storage.default_storage() == str(tmp_path / "optuna.journal")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert storage.default_storage() == str(tmp_path / "optuna.journal")  # the repository root
    assert not storage.is_database(storage.default_storage())
    assert storage.is_database("postgresql://u:p@db/optuna") and not storage.is_database("file:///srv/s.journal")
    assert storage.shown("postgresql://u:secret@db:5432/optuna") == "postgresql://u:***@db:5432/optuna"


def test_a_journal_in_a_folder_that_does_not_exist(tmp_path):
    with pytest.raises(StudyError) as info:
        storage.open_storage(str(tmp_path / "nowhere" / "optuna.journal"), params().tune)
    assert (
        str(info.value) == f"{tmp_path / 'nowhere' / 'optuna.journal'}: no folder {tmp_path / 'nowhere'} "
        "for the study's journal file"
    )


def test_a_url_of_a_scheme_no_study_can_live_in_is_refused_before_any_driver():
    for url in ("optuna.journal", "file:///srv/optuna.journal", "sqlite:///optuna.db", "postgresql://u@db/optuna"):
        storage.check_storage_url(url)
    with pytest.raises(ConfigError) as info:
        storage.check_storage_url("MySQL://u:secret@db/optuna")  # the scheme read case-blind, the password masked
    assert info.value.exit_code == 2
    assert str(info.value) == (
        "MySQL://u:***@db/optuna: a study cannot live in a mysql:// storage: expected a journal file (a path, or "
        "file://PATH), sqlite:///PATH or postgresql://USER@HOST/DATABASE"
    )


def tables(url: str) -> list[str]:
    import sqlalchemy

    engine = sqlalchemy.create_engine(storage.database_url(url))
    try:
        with engine.connect() as connection:
            return sorted(sqlalchemy.inspect(connection).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", ["journal", "sqlite", "postgresql"])
def test_whether_a_storage_is_there_is_read_without_making_it(tmp_path, request, kind):
    """Optuna makes a journal file, a sqlite file or its tables when it opens a storage that is
    not there; holds_studies answers first and makes none of them."""
    from optuna.study import StudyDirection

    if kind == "postgresql":
        url = empty_database(request.getfixturevalue("postgres"), f"holds_{tmp_path.name}".lower()[:60])
    else:
        url = {"journal": str(tmp_path / "optuna.journal"), "sqlite": f"sqlite:///{tmp_path / 'optuna.db'}"}[kind]
    assert not storage.holds_studies(url)
    assert list(tmp_path.iterdir()) == [] and (kind != "postgresql" or tables(url) == [])
    held = storage.open_storage(url, params().tune)  # Optuna's: the file, or its tables, made
    assert storage.holds_studies(url) and storage.study_names(held) == "none"
    held.create_new_study([StudyDirection.MAXIMIZE], "a")
    held.create_new_study([StudyDirection.MINIMIZE], "b")
    assert storage.study_names(held) == "a, b" and storage.study_names(None) == "none"


def test_workers_that_open_a_fresh_database_at_the_same_moment_all_get_it(request):
    """Array tasks start together: each opens the study's database, and Optuna makes its tables
    in the first that finds none. Those that raced it (a table or type made in between:
    "already exists") open it again, rather than end with that error."""
    import threading

    url = empty_database(request.getfixturevalue("postgres"), "at_once")
    workers = 6
    barrier, opened, failed = threading.Barrier(workers), [], []

    def worker():
        barrier.wait()
        try:
            opened.append(storage.open_storage(url, params().tune))
        except StudyError as exc:
            failed.append(str(exc))

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failed == [] and len(opened) == workers
    assert "alembic_version" in tables(url) and storage.study_names(opened[0]) == "none"


def test_a_database_that_cannot_be_reached_is_one_line_with_its_password_masked():
    port = free_ports(1)[0]
    with pytest.raises(StudyError) as info:
        storage.holds_studies(f"postgresql://u:secret@127.0.0.1:{port}/optuna")
    message = str(info.value)
    assert message.startswith(f"postgresql://u:***@127.0.0.1:{port}/optuna: cannot open the study's storage: ")
    assert "secret" not in message and "\n" not in message
