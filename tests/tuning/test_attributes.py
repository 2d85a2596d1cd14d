"""What a study records about itself, read from its storage without loading or creating it (a
journal file's bytes the same after), and the check of it against the params in force: Optuna's
direction first, then the project's records, a study that records none of them refused once its
creator has had time to record them or once it has trials."""

import pytest
from support.project import ROOT

from pipeline.config.loading.loader import load_params
from pipeline.errors import ConfigError
from pipeline.tuning import attributes, storage


def params(*overrides):
    return load_params(ROOT / "params.yaml", "reuters", list(overrides))


def test_a_study_is_read_without_a_byte_written(tmp_path):
    optuna = storage.quiet_optuna()
    path = tmp_path / "optuna.journal"
    held = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
    assert attributes.read(held, "s") is None and path.read_bytes() == b""
    study = optuna.create_study(study_name="s", storage=held, direction="maximize")
    attributes.record(study, params(), "s")
    study.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=0.5))
    before = path.read_bytes()
    found = attributes.read(held, "s")
    assert found == attributes.Recorded(("maximize",), attributes.identity(params(), "s"), 1)
    assert path.read_bytes() == before


def test_the_direction_is_checked_first_then_what_the_project_records():
    mine = attributes.identity(params(), "s")
    attributes.check_same_search(attributes.Recorded(("maximize",), mine, 3), params(), "s", "here", settled=True)
    fix = "name a new study with --study, or put tune.reuters.{} back"
    cases = [
        (("minimize",), {**mine, "direction": "minimize"}, "direction (Optuna's: minimize, not maximize)", "direction"),
        (("maximize", "minimize"), mine, "direction (Optuna's: several, not maximize)", "direction"),
        (("maximize",), {**mine, "metric": "val_loss"}, "metric (val_loss, not val_accuracy)", "metric"),
        (("maximize",), {**mine, "space": "x" * 100}, f"space ({'x' * 77}..., not ", "space"),
        (("maximize",), {**mine, "study": "original"}, "study (original, not s)", "study"),
    ]
    for directions, recorded, differs, key in cases:
        with pytest.raises(ConfigError) as info:
            attributes.check_same_search(
                attributes.Recorded(directions, recorded, 0), params(), "s", "here", settled=False
            )
        assert str(info.value).startswith(f"study 's' in here has another {differs}") and info.value.exit_code == 2
        assert str(info.value).endswith(fix.format(key))


def test_a_study_that_records_nothing_is_refused_once_settled_or_with_trials():
    check = attributes.check_same_search
    check(attributes.Recorded(("maximize",), {}, 0), params(), "s", "here", settled=False)  # being recorded
    check(attributes.Recorded(("maximize",), {"dataset": "reuters"}, 0), params(), "s", "here", settled=False)
    for found, settled in (
        (attributes.Recorded(("maximize",), {}, 0), True),
        (attributes.Recorded(("maximize",), {}, 1), False),
    ):
        with pytest.raises(ConfigError) as info:
            check(found, params(), "s", "here", settled=settled)
        assert str(info.value) == (
            "study 's' in here records no dataset, space, metric, direction: it was not made by "
            "`pipeline tune`, so it may be another search: name a new study with --study"
        )
