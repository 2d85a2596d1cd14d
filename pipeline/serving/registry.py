"""The MLflow model registry: each dataset is a registered model (`reuters`, `mnist`) in the
tracking store in force; evaluate registers every evaluated model as a new version, tagged with
its run, test metrics, test data and DVC experiment; the `champion` alias (MLflow's aliases, not
the deprecated stages) moves only through `promote`'s gate."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from pipeline.errors import ConfigError, DataError
from pipeline.tracking import store
from pipeline.tracking.store import tracked

if TYPE_CHECKING:
    from pipeline.config.keys.schema import PromoteConfig

CHAMPION = "champion"
# a version's tags: the test split's digest (evaluation.test_digest: its samples and labels),
# to compare like with like
TEST_DATA_TAG, RUN_TAG, EXPERIMENT_TAG = "test_data", "run_id", "dvc.experiment"
# a gain counts when it is more than the margin by more than float noise: 10 more right answers
# of 10,000 is a gain of 0.001, not 0.0010000000000000009
TOLERANCE = 1e-9
_AGAIN = "run the command again once the tracking store answers"


@tracked("the model's registration", registry=True)
def register(
    dataset: str,
    model_uri: str,
    run_id: str,
    metrics: dict,
    test_data: str,
    experiment: str,
    model_id: Optional[str] = None,
) -> int:
    """A new version of the registered model `dataset` from `model_uri` (a logged model's
    `models:/<model_id>`, or a run's artifacts), tagged; its number."""
    from mlflow.exceptions import MlflowException

    client = store.client()
    try:
        client.create_registered_model(
            dataset,
            description=f"The {dataset} classifier: raw inputs in, labels "
            f"and probabilities out (`pipeline serve {dataset}`).",
        )
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    tags = {
        RUN_TAG: run_id,
        TEST_DATA_TAG: test_data,
        EXPERIMENT_TAG: experiment,
        **{k: str(v) for k, v in metrics.items()},
    }
    # MLflow prints "Created version N" lines on INFO: the evaluate stage says it in its own line
    logging.getLogger("mlflow.tracking._model_registry.client").setLevel(logging.WARNING)
    version = client.create_model_version(dataset, model_uri, run_id=run_id, tags=tags, model_id=model_id)
    return int(version.version)


@dataclass(frozen=True)
class Version:
    number: int
    value: Optional[float]
    test_data: str
    run_id: str

    def describe(self, metric: str) -> str:
        shown = f"{self.value:.4f}" if self.value is not None else "none"
        return f"version {self.number} ({metric} {shown})"


def _version(found, metric: str) -> Version:
    """A registered version and its figure (None when the tag is missing, or not a finite
    number: a diverged model's NaN loss must not pass a gate)."""
    try:
        value = float(found.tags[metric])
    except (KeyError, ValueError):
        value = None
    return Version(
        int(found.version),
        value if value is not None and math.isfinite(value) else None,
        found.tags.get(TEST_DATA_TAG, ""),
        found.tags.get(RUN_TAG, found.run_id or ""),
    )


@tracked("the registered versions", "reading", _AGAIN, registry=True)
def versions(dataset: str, metric: str) -> list[Version]:
    found = store.client().search_model_versions(f"name = '{dataset}'")
    if not found:
        raise DataError(
            f"{store.registry_uri()}: no registered model {dataset!r}: run `dvc repro` (the evaluate "
            f"stage registers each model it evaluates)"
        )
    return sorted((_version(v, metric) for v in found), key=lambda v: v.number)


def version(dataset: str, number: int, metric: str) -> Version:
    """Version `number` of `dataset`, or a ConfigError listing those there are."""
    known = versions(dataset, metric)
    found = next((v for v in known if v.number == number), None)
    if found is None:
        raise ConfigError(f"{dataset}: no version {number} (versions {', '.join(str(v.number) for v in known)})")
    return found


def champion(dataset: str, metric: str) -> Optional[Version]:
    return by_alias(dataset, CHAMPION, metric)


@tracked("the registered model's alias", "reading", _AGAIN, registry=True)
def by_alias(dataset: str, alias: str, metric: str) -> Optional[Version]:
    """The version `alias` points at, or None."""
    from mlflow.exceptions import MlflowException

    try:
        return _version(store.client().get_model_version_by_alias(dataset, alias), metric)
    except MlflowException as exc:
        if exc.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            return None
        raise


@dataclass(frozen=True)
class Decision:
    promoted: bool
    message: str
    refused: bool = False  # the gate said no (not: the version is the champion already)


@tracked("the champion alias", "moving", _AGAIN, registry=True)
def promote(dataset: str, cfg: PromoteConfig, number: Optional[int] = None, force: bool = False) -> Decision:
    """Move `champion` to version `number` (by default the best by cfg.metric on the champion's
    test data, or on any when there is no champion) if it beats the champion by cfg.margin on
    the same test data; with `force`, whatever it scores (a rollback)."""
    maximize = cfg.maximize
    current = champion(dataset, cfg.metric)
    if number is not None:
        candidate = version(dataset, number, cfg.metric)
    else:
        scored = [v for v in versions(dataset, cfg.metric) if v.value is not None]
        comparable = [v for v in scored if current is None or v.test_data == current.test_data]
        if not scored:
            raise DataError(f"{dataset}: no version has {cfg.metric}; name one: pipeline promote {dataset} VERSION")
        # the best (the latest among equals), among those the gate can compare when it can
        candidate = max(comparable or scored, key=lambda v: ((v.value if maximize else -v.value), v.number))
    if current is not None and current.number == candidate.number:
        return Decision(False, f"{dataset}: {candidate.describe(cfg.metric)} is the champion already")
    if current is not None and not force:
        refusal = _refusal(dataset, candidate, current, cfg, maximize)
        if refusal:
            return Decision(
                False,
                f"{dataset}: {candidate.describe(cfg.metric)} not promoted: {refusal}; --force moves the alias anyway",
                refused=True,
            )
    store.client().set_registered_model_alias(dataset, CHAMPION, str(candidate.number))
    before = f"was {current.describe(cfg.metric)}" if current else "there was none"
    return Decision(
        True,
        f"{dataset}: {candidate.describe(cfg.metric)} is the champion ({before}"
        f"{', forced' if force and current else ''})",
    )


def _refusal(dataset: str, candidate: Version, current: Version, cfg: PromoteConfig, maximize: bool) -> str:
    """Why `candidate` does not replace `current`, or '' when it does."""
    if candidate.value is None or current.value is None:
        return f"{cfg.metric} is missing on version {(candidate if candidate.value is None else current).number}"
    if candidate.test_data != current.test_data:
        return (
            f"it was tested on other test data than the champion, {current.describe(cfg.metric)} "
            f"(test split {candidate.test_data or 'unknown'} vs {current.test_data or 'unknown'})"
        )
    gain = candidate.value - current.value if maximize else current.value - candidate.value
    if not gain > cfg.margin + TOLERANCE:
        return (
            f"it does not beat the champion, {current.describe(cfg.metric)}, by more than the margin "
            f"{cfg.margin:g} (promote.{dataset}.margin)"
        )
    return ""
