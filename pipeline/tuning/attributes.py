"""What a study of `pipeline tune` records about itself in Optuna's storage, so that every worker
that joins it can check it trains the same search: its dataset, space, metric and direction and
the name it was created under; read from the storage without loading or creating the study, and
checked before anything is written to it. Also the attributes of its trials: the MLflow run of
each, and the ones withdrawn."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from pipeline.config.keys.schema import DatasetParams

from pipeline.config.loading import search_space
from pipeline.errors import ConfigError

ATTRS = ("dataset", "space", "metric", "direction")
# The MLflow run's id, in the study (the study's run) and in each trial (the trial's).
RUN_ATTR = "mlflow_run_id"
# A trial that asked for a place the study no longer had (see studies.within_budget).
WITHDRAWN_ATTR = "withdrawn"


def identity(params: DatasetParams, name: str) -> dict:
    """What a study must agree on with every worker that joins it: the search (dataset, space,
    metric, direction) and the name it was created under (a study copied or renamed in its
    storage is another one)."""
    cfg = params.tune
    return {
        "dataset": params.dataset,
        "space": search_space.as_json(cfg.space),
        "metric": cfg.metric,
        "direction": cfg.direction,
        "study": name,
    }


@dataclass(frozen=True)
class Recorded:
    """What a storage holds of a study, read without loading or creating it."""

    directions: tuple[str, ...]  # Optuna's: maximize, minimize
    user_attrs: dict
    trials: int


def read(storage, name: str) -> Optional[Recorded]:
    """The study `name` as the opened storage holds it, or None when it holds no such study."""
    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        return None
    return Recorded(
        tuple(d.name.lower() for d in storage.get_study_directions(study_id)),
        dict(storage.get_study_user_attrs(study_id)),
        storage.get_n_trials(study_id),
    )


def check_same_search(found: Recorded, params: DatasetParams, name: str, where: str, *, settled: bool) -> None:
    """A ConfigError (exit 2) unless the study `name` as read from `where` is the search the
    params in force ask for, whoever made it: Optuna's own direction first (a study made by a
    script or a teammate's minimizes what this one maximizes: its worst trial would be reported
    as the best), then what the project records in a study it creates. `settled`: its creator
    has had time to record that; a study that still records none of it was not made by
    `pipeline tune`. Called before anything is written to the study."""
    mine = identity(params, name)
    fix = f"name a new study with --study, or put tune.{params.dataset}.{{key}} back"
    (direction,) = found.directions if len(found.directions) == 1 else ("several",)
    if direction != mine["direction"]:
        raise ConfigError(
            f"study {name!r} in {where} has another direction (Optuna's: {direction}, not "
            f"{mine['direction']}): " + fix.format(key="direction")
        )
    theirs = found.user_attrs
    missing = [key for key in ATTRS if key not in theirs]
    if missing and (settled or found.trials):
        raise ConfigError(
            f"study {name!r} in {where} records no {', '.join(missing)}: it was not made by "
            f"`pipeline tune`, so it may be another search: name a new study with --study"
        )
    for key, value in mine.items():
        if key in theirs and theirs[key] != value:
            raise ConfigError(
                f"study {name!r} in {where} has another {key} ({_brief(theirs[key])}, not "
                f"{_brief(value)}): " + fix.format(key=key)
            )


def record(study, params: DatasetParams, name: str) -> None:
    """What a study made by `pipeline tune` records, as its creator records it."""
    for key, value in identity(params, name).items():
        study.set_user_attr(key, value)


def _brief(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."
