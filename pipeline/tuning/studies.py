"""A study of `pipeline tune`: its sampler and pruner, its creation by the first worker and its
checks for every other (every check before anything is written to it), its MLflow run, its
counts and its best trial as the `dvc exp run` line that reproduces it. Where it lives and how
its storage is opened: `storage`; what it records about itself: `attributes`. No TensorFlow here."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import optuna

    from pipeline.config.keys.schema import DatasetParams, TuneConfig

from pipeline.config.loading import search_space
from pipeline.errors import ConfigError
from pipeline.tracking import probe, store
from pipeline.tuning import attributes, study_runs

# quiet_optuna is named here too: tests/scenarios/test_tune.py imports it from this module
from pipeline.tuning.storage import holds_studies, open_storage, quiet_optuna, shown, study_names


def sampler(cfg: TuneConfig):
    """TPE (or random) whose randomness is the study's seed plus the trial's number: the same
    trials on every run of one worker, and no two workers drawing the same start-up trials."""
    import optuna

    def make(seed):
        if cfg.sampler == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=cfg.startup_trials, constant_liar=True)

    class SeededPerTrial(optuna.samplers.BaseSampler):
        def __init__(self):
            self._current = make(cfg.seed)

        def before_trial(self, study, trial):
            self._current = make(cfg.seed + trial.number)
            self._current.before_trial(study, trial)

        def infer_relative_search_space(self, study, trial):
            return self._current.infer_relative_search_space(study, trial)

        def sample_relative(self, study, trial, space):
            return self._current.sample_relative(study, trial, space)

        def sample_independent(self, study, trial, name, distribution):
            return self._current.sample_independent(study, trial, name, distribution)

        def after_trial(self, study, trial, state, values):
            self._current.after_trial(study, trial, state, values)

    return SeededPerTrial()


def pruner(cfg: TuneConfig, epochs: int):
    import optuna

    if cfg.pruner == "median":  # from the second epoch (steps are 1-based epochs), after startup_trials
        return optuna.pruners.MedianPruner(n_startup_trials=cfg.startup_trials, n_warmup_steps=2)
    if cfg.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max(epochs, 2))
    return optuna.pruners.NopPruner()


@dataclass
class Opened:
    study: optuna.Study
    run_id: str  # its MLflow run
    storage: str  # where it lives, as shown
    created: bool


def open_study(
    params: DatasetParams, name: str, url: str, *, create: bool = True, wait_seconds: float = 60.0
) -> Opened:
    """The study `name` in the storage at `url`: created with its MLflow run by the first worker
    (Optuna's storage decides which one, atomically), read, checked and loaded by every other.
    A study of that name with another dataset, space, metric or direction is a ConfigError; so
    is a study that does not exist when `create` is false. Every check comes before anything is
    written: a refused worker leaves the storage as it was."""
    where = shown(url)  # the URL with its password masked, for every message and record
    storage = open_storage(url, params.tune, finish_lost_trial) if holds_studies(url) else None
    found = attributes.read(storage, name) if storage is not None else None
    if found is None and not create:
        raise ConfigError(f"no study {name!r} in {where} (its studies: {study_names(storage)})")
    if found is None:
        probe.check_tracking()  # the study's run is made right after it: a store that cannot take it, first
        storage = storage or open_storage(url, params.tune, finish_lost_trial)
        study = _create(params, name, storage)
        if study is not None:
            return Opened(study, _make_run(study, params, name, where), where, created=True)
        found = attributes.read(storage, name)  # another worker made it first
        assert found is not None  # Optuna refused to make it because it is there
    attributes.check_same_search(found, params, name, where, settled=False)
    return _join(params, name, where, storage, found, wait_seconds)


def finish_lost_trial(trial) -> None:
    """A trial whose worker went silent (the storage's heartbeat says so): its MLflow run ends
    FAILED, saying why, before Optuna queues its params again."""
    if trial.user_attrs.get(attributes.RUN_ATTR):
        study_runs.TrialRun(trial.user_attrs[attributes.RUN_ATTR]).finish(
            "failed",
            epochs=len(trial.intermediate_values),
            value=None,
            metric="",
            reason="its worker stopped sending heartbeats (killed, or its host went down)",
        )


def _chosen(params: DatasetParams, name: str, storage) -> dict:
    cfg = params.tune
    return dict(sampler=sampler(cfg), pruner=pruner(cfg, params.train.epochs), storage=storage, study_name=name)


def _create(params: DatasetParams, name: str, storage):
    """The study made, with what it searches recorded in it; None when another worker made it
    first (for a journal, Optuna has then appended its refused creation: a line it skips)."""
    optuna = quiet_optuna()
    try:
        study = optuna.create_study(direction=params.tune.direction, **_chosen(params, name, storage))
    except optuna.exceptions.DuplicatedStudyError:
        return None
    attributes.record(study, params, name)
    return study


def _join(
    params: DatasetParams, name: str, where: str, storage, found: attributes.Recorded, wait_seconds: float
) -> Opened:
    """A study another worker made, checked again as its creator records it: its MLflow run,
    once recorded (a moment), or made here when it is not within `wait_seconds` (its creator
    died setting it up, or it was made elsewhere)."""
    deadline = time.monotonic() + wait_seconds
    while attributes.RUN_ATTR not in found.user_attrs and time.monotonic() <= deadline:
        time.sleep(0.5)
        found = attributes.read(storage, name) or found
        attributes.check_same_search(found, params, name, where, settled=False)
    attributes.check_same_search(found, params, name, where, settled=True)
    study = quiet_optuna().load_study(**_chosen(params, name, storage))
    if attributes.RUN_ATTR not in found.user_attrs:
        return Opened(study, _make_run(study, params, name, where), where, created=False)
    run_id = found.user_attrs[attributes.RUN_ATTR]
    if store.find_run(run_id) is None:
        raise ConfigError(
            f"study {name!r}'s MLflow run {run_id} is not in the tracking store in force "
            f"({store.tracking_uri()}): set MLFLOW_TRACKING_URI to the store the study logs to"
        )
    return Opened(study, run_id, where, created=False)


def _make_run(study, params: DatasetParams, name: str, where: str) -> str:
    """The study's MLflow run, made and recorded in the study (`where`: its storage's URL as
    `shown`); its id."""
    run_id = study_runs.create_study_run(params.dataset, name, settings(params, name, where), where)
    study.set_user_attr(attributes.RUN_ATTR, run_id)
    return run_id


def settings(params: DatasetParams, name: str, where: str) -> dict:
    """The study's settings as its MLflow run's `tune.*` params (`where`: its storage's URL as
    `shown`)."""
    cfg = params.tune
    return {
        "study": name,
        "storage": where,
        "trials": cfg.trials,
        "sampler": cfg.sampler,
        "seed": cfg.seed,
        "startup_trials": cfg.startup_trials,
        "pruner": cfg.pruner,
        "metric": cfg.metric,
        "direction": cfg.direction,
        "epochs": params.train.epochs,
        "space": search_space.as_json(cfg.space),
    }


def counts(study) -> dict[str, int]:
    """The study's trials by state: complete, pruned, failed, running, waiting (a retry); not
    the ones withdrawn (see within_budget)."""
    found = {"complete": 0, "pruned": 0, "failed": 0, "running": 0, "waiting": 0}
    names = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed", "RUNNING": "running", "WAITING": "waiting"}
    for trial in study.get_trials(deepcopy=False):
        if not trial.user_attrs.get(attributes.WITHDRAWN_ATTR):
            found[names[trial.state.name]] += 1
    return found


def within_budget(study, trial, trials: int) -> bool:
    """Whether a trial just asked for is one of the study's `trials`: fewer than that many trials
    before it (by number, which the storage hands out one by one) are finished, running or
    waiting to run. Workers look at the counts before they ask, but two can look at once and
    both ask for the last place: the later number is then withdrawn (told failed, marked so,
    and left out of the counts)."""
    ahead = sum(
        1
        for t in study.get_trials(deepcopy=False)
        if t.number < trial.number
        and t.state.name in ("COMPLETE", "PRUNED", "RUNNING", "WAITING")
        and not t.user_attrs.get(attributes.WITHDRAWN_ATTR)
    )
    return ahead < trials


def best(study, space) -> Optional[dict]:
    """The best complete trial: its number, value, params (as train.<ds> takes them) and run."""
    try:
        trial = study.best_trial
    except ValueError:  # no complete trial yet
        return None
    return {
        "number": trial.number,
        "value": trial.value,
        "params": search_space.decode(space, trial.params),
        "run_id": trial.user_attrs.get(attributes.RUN_ATTR),
    }


def experiment_name(study_name: str) -> str:
    return f"tune-{study_name}-best"


def dvc_command(dataset: str, study_name: str, values: dict, overrides=()) -> list[str]:
    """The `dvc exp run` that trains and evaluates a trial's values as a named DVC experiment,
    with the study's own `-S` overrides of train.<ds> (its epochs, say) before them."""
    own = [item for item in overrides if item.startswith(f"train.{dataset}.")]
    sets = [arg for item in [*own, *search_space.overrides(dataset, values)] for arg in ("-S", item)]
    return ["dvc", "exp", "run", f"evaluate@{dataset}", "--name", experiment_name(study_name), *sets]


def dvc_line(dataset: str, study_name: str, values: dict, overrides=()) -> str:
    return shlex.join(dvc_command(dataset, study_name, values, overrides))
