"""A study in Optuna's storage: made once with its MLflow run and joined by every other worker,
refused when it searches another space, metric or direction with the storage left as it was
(a journal file's bytes, a database's rows), and a silent worker's trial failed and queued
again, in a journal file, sqlite and a real PostgreSQL."""

import dataclasses
import time
from pathlib import Path

import pytest
from support.models import samples
from support.project import ROOT
from support.servers import empty_database, free_ports
from support.tracking import use_sqlite

from pipeline.config.loading import search_space
from pipeline.config.loading.loader import load_params
from pipeline.errors import ConfigError, TrackingError
from pipeline.tuning import attributes, storage, studies


def params(*overrides):
    return load_params(ROOT / "params.yaml", "reuters", list(overrides))


def test_the_first_worker_makes_the_study_and_its_run_the_next_joins_it(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    uri = use_sqlite(tmp_path, monkeypatch)
    journal = str(tmp_path / "optuna.journal")
    first = studies.open_study(params(), "s1", journal)
    second = studies.open_study(params(), "s1", journal)
    assert (first.created, second.created) == (True, False) and first.run_id == second.run_id
    run = MlflowClient(uri).get_run(first.run_id)
    assert run.info.run_name == "tune-s1" and run.data.tags["optuna.study"] == "s1"
    assert run.data.params["tune.space"] == search_space.as_json(params().tune.space)
    assert run.data.params["tune.sampler"] == "tpe" and run.data.params["tune.storage"] == journal
    assert MlflowClient(uri).get_experiment(run.info.experiment_id).name == "reuters"


def test_a_study_that_searches_another_space_is_refused(tmp_path, monkeypatch):
    use_sqlite(tmp_path, monkeypatch)
    journal = str(tmp_path / "optuna.journal")
    studies.open_study(params(), "s2", journal)
    other = params()
    other = dataclasses.replace(
        other,
        tune=dataclasses.replace(
            other.tune, space=(dataclasses.replace(other.tune.space[0], high=0.05), *other.tune.space[1:])
        ),
    )
    with pytest.raises(ConfigError) as info:
        studies.open_study(other, "s2", journal)
    assert str(info.value).startswith(f"study 's2' in {journal} has another space (")
    assert "name a new study with --study, or put tune.reuters.space back" in str(info.value)
    with pytest.raises(ConfigError) as info:
        studies.open_study(params(), "s3", journal, create=False)
    assert str(info.value) == f"no study 's3' in {journal} (its studies: s2)"


@pytest.mark.parametrize("kind", ["journal", "postgresql"])
def test_a_silent_workers_trial_is_failed_and_queued_again(tmp_path, monkeypatch, request, kind):
    """The heartbeat: a trial whose worker stopped recording it (killed) is failed by the next
    worker that asks for a trial, its MLflow run ends FAILED, and its params are queued again."""
    import optuna
    from mlflow import MlflowClient
    from optuna.storages._heartbeat import BaseHeartbeat  # the interface storage.py implements too
    from optuna.trial import TrialState

    from pipeline.tuning import study_runs

    uri = use_sqlite(tmp_path, monkeypatch)
    url = request.getfixturevalue("postgres") if kind == "postgresql" else str(tmp_path / "optuna.journal")
    p = params("tune.reuters.heartbeat_seconds=1")
    opened = studies.open_study(p, f"silent-{kind}", url)
    assert isinstance(opened.study, optuna.Study)
    trial = opened.study.ask()
    values = search_space.suggest(trial, p.tune.space)
    run = study_runs.TrialRun.open(
        p,
        parent_run_id=opened.run_id,
        study="silent",
        number=trial.number,
        values=values,
        figures={},
        prepared=dataclasses.replace(samples(train=3, val=1), folder=tmp_path),
        worker="elsewhere:1",
    )
    trial.set_user_attr(attributes.RUN_ATTR, run.run_id)
    held = opened.study._storage
    assert isinstance(held, BaseHeartbeat)  # what open_study makes keeps heartbeats
    held.record_heartbeat(trial._trial_id)
    storage.quiet_optuna().storages.fail_stale_trials(opened.study)
    assert opened.study.trials[0].state == TrialState.RUNNING  # within twice the interval: alive
    time.sleep(2.5)
    storage.quiet_optuna().storages.fail_stale_trials(opened.study)
    failed, again = opened.study.trials
    assert failed.state == TrialState.FAIL and again.state == TrialState.WAITING
    assert again.params == trial.params and again.system_attrs["failed_trial"] == 0
    finished = MlflowClient(uri).get_run(run.run_id)
    assert finished.info.status == "FAILED" and finished.data.tags["optuna.state"] == "failed"
    assert studies.counts(opened.study) == {"complete": 0, "pruned": 0, "failed": 1, "running": 0, "waiting": 1}


def test_the_best_trial_as_a_dvc_experiment(tmp_path, monkeypatch):
    import optuna

    use_sqlite(tmp_path, monkeypatch)
    p = params()
    opened = studies.open_study(p, "s4", str(tmp_path / "optuna.journal"))
    assert isinstance(opened.study, optuna.Study)
    assert studies.best(opened.study, p.tune.space) is None
    for value in (0.5, 0.7, 0.6):
        trial = opened.study.ask()
        search_space.suggest(trial, p.tune.space)
        opened.study.tell(trial, value)
    best = studies.best(opened.study, p.tune.space)
    assert best is not None
    assert best["number"] == 1 and best["value"] == 0.7
    line = studies.dvc_line(
        "reuters",
        "s4",
        {"learning_rate": 0.002, "conv_filters": [16, 8]},
        ["train.reuters.epochs=5", "tune.reuters.trials=40"],
    )
    assert line == (
        "dvc exp run evaluate@reuters --name tune-s4-best -S train.reuters.epochs=5 "
        "-S train.reuters.learning_rate=0.002 -S 'train.reuters.conv_filters=[16, 8]'"
    )


def test_two_workers_that_ask_for_the_last_place_at_once(tmp_path, monkeypatch):
    """Both looked at the counts before asking: the trial with the later number is withdrawn,
    and the counts leave it out."""
    import optuna

    use_sqlite(tmp_path, monkeypatch)
    p = params()
    opened = studies.open_study(p, "s5", str(tmp_path / "optuna.journal"))
    assert isinstance(opened.study, optuna.Study)
    first, second = opened.study.ask(), opened.study.ask()
    assert studies.within_budget(opened.study, first, 1) and not studies.within_budget(opened.study, second, 1)
    second.set_user_attr(attributes.WITHDRAWN_ATTR, True)
    opened.study.tell(second, state=storage.quiet_optuna().trial.TrialState.FAIL)
    assert studies.counts(opened.study) == {"complete": 0, "pruned": 0, "failed": 0, "running": 1, "waiting": 0}
    assert studies.within_budget(opened.study, first, 1)


def storage_of(kind: str, tmp_path, request) -> str:
    return {
        "journal": lambda: str(tmp_path / "optuna.journal"),
        "sqlite": lambda: f"sqlite:///{tmp_path / 'optuna.db'}",
        "postgresql": lambda: request.getfixturevalue("postgres"),
    }[kind]()


def optunas_own(url: str, cfg):
    """The storage as a script of the user's would open it: Optuna's, none of the project's."""
    import optuna

    if storage.is_database(url):
        return optuna.storages.RDBStorage(storage.database_url(url))
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(url))


def snapshot(url: str, name: str):
    """What the storage holds of the study `name`: its direction, attributes and trials."""
    import optuna

    found = optuna.load_study(study_name=name, storage=optunas_own(url, None))
    return (
        [d.name for d in found.directions],
        found.user_attrs,
        [(t.number, t.state.name, t.values, t.params) for t in found.trials],
    )


@pytest.mark.parametrize("kind", ["journal", "sqlite", "postgresql"])
def test_a_study_made_outside_the_project_is_joined_only_if_it_is_the_same_search(tmp_path, monkeypatch, request, kind):
    """A study named as the params' that Optuna made directly (a script, an older version, a
    teammate's study of another metric): refused in one line, exit 2, its storage untouched."""
    import optuna

    storage.quiet_optuna()
    use_sqlite(tmp_path, monkeypatch)
    url = storage_of(kind, tmp_path, request)
    name = f"outside-{kind}-{tmp_path.name}"[:60]
    # made to minimize, with a trial: the params' search maximizes val_accuracy
    made = optuna.create_study(study_name=name, storage=optunas_own(url, None), direction="minimize")
    made.add_trial(
        optuna.trial.create_trial(
            params={"x": 0.5}, distributions={"x": optuna.distributions.FloatDistribution(0, 1)}, value=0.0
        )
    )
    before, raw = snapshot(url, name), contents(url)
    with pytest.raises(ConfigError) as info:
        studies.open_study(params(), name, url)
    assert str(info.value) == (
        f"study {name!r} in {storage.shown(url)} has another direction (Optuna's: minimize, "
        "not maximize): name a new study with --study, or put tune.reuters.direction back"
    )
    assert info.value.exit_code == 2 and snapshot(url, name) == before and contents(url) == raw
    # the same direction, but none of what the project records: another search, perhaps
    same = f"{name}-max"
    made = optuna.create_study(study_name=same, storage=optunas_own(url, None), direction="maximize")
    raw = contents(url)
    with pytest.raises(ConfigError) as info:  # empty: its creator may be recording it; not for long
        studies.open_study(params(), same, url, wait_seconds=1)
    assert contents(url) == raw
    assert str(info.value) == (
        f"study {same!r} in {storage.shown(url)} records no dataset, space, metric, direction: "
        "it was not made by `pipeline tune`, so it may be another search: name a new study "
        "with --study"
    )
    made.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=0.9))
    before, raw = snapshot(url, same), contents(url)
    t0 = time.monotonic()
    with pytest.raises(ConfigError):  # with a trial: at once
        studies.open_study(params(), same, url)
    assert time.monotonic() - t0 < 30 and snapshot(url, same) == before and contents(url) == raw


def test_a_study_copied_under_another_name_is_another_study(tmp_path, monkeypatch):
    import optuna

    use_sqlite(tmp_path, monkeypatch)
    journal = str(tmp_path / "optuna.journal")
    studies.open_study(params(), "original", journal)
    optuna.copy_study(
        from_study_name="original",
        from_storage=optunas_own(journal, None),
        to_storage=optunas_own(journal, None),
        to_study_name="copy",
    )
    raw = contents(journal)
    with pytest.raises(ConfigError) as info:
        studies.open_study(params(), "copy", journal)
    assert str(info.value).startswith(f"study 'copy' in {journal} has another study (original, not copy): ")
    assert contents(journal) == raw


def contents(url: str):
    """Everything the storage holds, as it is stored: a journal file's bytes, a database's rows
    table by table; None when there is no such file."""
    import sqlalchemy

    if not storage.is_database(url):
        path = Path(url.removeprefix("file://"))
        return path.read_bytes() if path.exists() else None
    database = sqlalchemy.engine.make_url(url).database
    if url.startswith("sqlite") and not Path(database or "").exists():
        return None
    engine = sqlalchemy.create_engine(storage.database_url(url))
    try:
        with engine.connect() as connection:
            tables = sorted(sqlalchemy.inspect(connection).get_table_names())
            return {t: sorted(map(repr, connection.execute(sqlalchemy.text(f'SELECT * FROM "{t}"')))) for t in tables}
    finally:
        engine.dispose()


def other_space(p):
    first = dataclasses.replace(p.tune.space[0], high=0.05)
    return dataclasses.replace(p, tune=dataclasses.replace(p.tune, space=(first, *p.tune.space[1:])))


@pytest.mark.parametrize("kind", ["journal", "sqlite", "postgresql"])
def test_a_refused_worker_leaves_the_storage_as_it_was(tmp_path, monkeypatch, request, kind):
    """A study `pipeline tune` made to maximize val_accuracy over its space: a worker whose params
    minimize it, or another metric in the other direction, or the same metric over another space,
    is refused before it writes anything: the journal's bytes, the database's rows and the
    MLflow store are the same after each refusal."""
    use_sqlite(tmp_path, monkeypatch)
    url = storage_of(kind, tmp_path, request)
    name = f"refused-{kind}-{tmp_path.name}"[:60]
    studies.open_study(params(), name, url)
    where = f"study {name!r} in {storage.shown(url)} has another"
    refusals = [
        (params("tune.reuters.direction=minimize"), f"{where} direction (Optuna's: maximize, not minimize)"),
        (
            params("tune.reuters.metric=val_loss", "tune.reuters.direction=minimize"),
            f"{where} direction (Optuna's: maximize, not minimize)",
        ),
        (params("tune.reuters.metric=val_loss"), f"{where} metric (val_accuracy, not val_loss)"),
        (other_space(params()), f"{where} space ("),
    ]
    before, tracked = contents(url), (tmp_path / "mlflow.db").read_bytes()
    for p, message in refusals:
        for create in (True, False):  # a worker, and --best
            with pytest.raises(ConfigError) as info:
                studies.open_study(p, name, url, create=create)
            assert str(info.value).startswith(message) and info.value.exit_code == 2
            assert contents(url) == before, (p.tune, create)
    assert (tmp_path / "mlflow.db").read_bytes() == tracked


@pytest.mark.parametrize("kind", ["journal", "sqlite", "postgresql"])
def test_a_worker_that_joins_the_same_search_writes_nothing(tmp_path, monkeypatch, request, kind):
    """Every worker after the first (the processes of --workers N, other hosts, Slurm tasks)
    reads the study and checks it: the storage is the same after it joins."""
    use_sqlite(tmp_path, monkeypatch)
    url = storage_of(kind, tmp_path, request)
    name = f"joined-{kind}-{tmp_path.name}"[:60]
    first = studies.open_study(params(), name, url)
    before = contents(url)
    for create in (True, False):
        joined = studies.open_study(params(), name, url, create=create)
        assert (joined.created, joined.run_id) == (False, first.run_id)
    assert contents(url) == before


def test_a_worker_that_loses_the_race_to_create_checks_the_study_it_lost_to(tmp_path, monkeypatch):
    """Two workers that both found no study both ask Optuna to create it; the one refused reads
    and checks the study the other made, as any joining worker does. In a journal file Optuna has
    then appended the refused creation, one line it skips on reading: the only write before the
    check, and nothing of the study changes."""
    import json

    use_sqlite(tmp_path, monkeypatch)
    journal = tmp_path / "optuna.journal"
    studies.open_study(params(), "raced", str(journal))
    before, held = journal.read_bytes(), snapshot(str(journal), "raced")
    monkeypatch.setattr(studies, "holds_studies", lambda url: False)  # as it was a moment before
    with pytest.raises(ConfigError) as info:
        studies.open_study(params("tune.reuters.direction=minimize"), "raced", str(journal))
    assert str(info.value).startswith(f"study 'raced' in {journal} has another direction (Optuna's: maximize, ")
    after = journal.read_bytes()
    assert after.startswith(before) and snapshot(str(journal), "raced") == held
    (line,) = after[len(before) :].splitlines()
    assert json.loads(line)["op_code"] == 0 and json.loads(line)["study_name"] == "raced"  # CREATE_STUDY


@pytest.mark.parametrize("kind", ["journal", "sqlite", "postgresql"])
def test_the_best_of_a_study_that_does_not_exist_makes_no_storage(tmp_path, monkeypatch, request, kind):
    """`pipeline tune --best` reads: a study that is not there is refused without making the
    journal file, the sqlite file or Optuna's tables in an empty database; in a storage that
    holds other studies, without a byte written."""
    use_sqlite(tmp_path, monkeypatch)
    if kind == "postgresql":
        url = empty_database(request.getfixturevalue("postgres"), f"empty_{tmp_path.name}".lower()[:60])
    else:
        url = storage_of(kind, tmp_path, request)
    empty = contents(url)
    assert empty in (None, {})
    with pytest.raises(ConfigError) as info:
        studies.open_study(params(), "missing", url, create=False)
    assert str(info.value) == f"no study 'missing' in {storage.shown(url)} (its studies: none)"
    assert contents(url) == empty
    studies.open_study(params(), "present", url)
    before = contents(url)
    with pytest.raises(ConfigError) as info:
        studies.open_study(params(), "missing", url, create=False)
    assert str(info.value) == f"no study 'missing' in {storage.shown(url)} (its studies: present)"
    assert contents(url) == before


def test_no_study_is_made_when_the_tracking_store_cannot_take_its_run(tmp_path, monkeypatch):
    """The study's run is made right after the study: a tracking store that does not answer is
    found before the study is made, so no study is left without its run."""
    use_sqlite(tmp_path, monkeypatch)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_ports(1)[0]}")
    journal = str(tmp_path / "optuna.journal")
    with pytest.raises(TrackingError):
        studies.open_study(params(), "unrun", journal)
    assert contents(journal) in (None, b"")
