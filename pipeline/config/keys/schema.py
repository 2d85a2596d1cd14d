"""The keys of params.yaml that are alike for every dataset (download, tune, evaluate, serve,
promote), and a dataset's sections bundled (`DatasetParams`). The preprocess and train sections
differ by kind: pipeline/config/preprocessing.py and training.py (with models.py, the models'
settings); pipeline/config/loading/datasets.py says which dataset takes which. Each field says what it
means, what a value must be and its check, and has no default (defaults live in params.yaml
only). pipeline/config/loading/build.py reads a file into these; params_doc.py documents them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Optional

from pipeline.fields import is_sha256, is_url, non_negative_int, positive_int, spec

if TYPE_CHECKING:
    from pipeline.config.keys.training import AnyTrainConfig
    from pipeline.kinds.known import PreprocessConfig

STAGES = ("download", "preprocess", "train", "evaluate")


# --------------------------------------------------------------------------- download


@dataclass(frozen=True)
class RemoteFile:
    url: str = spec(
        "an http://, https:// or file:// URL",
        is_url,
        help="Where the file is published; its base name names the downloaded file.",
    )
    sha256: Optional[str] = spec(
        "a 64-digit hex sha256 or null",
        is_sha256,
        help="The file's expected sha256, checked after the download (of a folder: the sha256 of its files' "
        "paths and sha256s, sorted); null: not checked (the sha256 observed is recorded in the manifest).",
    )


@dataclass(frozen=True)
class DownloadConfig:
    files: tuple[RemoteFile, ...] = spec(
        "a non-empty list of files",
        lambda v: len(v) > 0,
        help="The files to fetch, each a url and a sha256: for image folders an archive (zip or tar) or a "
        "local folder (a file:// URL), with train|training and test|testing folders of a folder per class; "
        "for labelled texts a CSV or JSON Lines file (docs/own-data.md). Reuters: Keras' published files "
        "(reuters.npz: the sha256 Keras checks; reuters_word_index.json, for which Keras publishes an md5: the "
        "sha256 of the file that matches it). MNIST: mnist_png.tar.gz, folders of the digits' PNG images.",
    )
    pretrained: tuple[RemoteFile, ...] = spec(
        "a list of files",
        help="Pretrained weights the train section's model starts from (e.g. Keras' MobileNetV2 ImageNet weights "
        "with mobilenet_v2's weights: imagenet), fetched like the files (mirror, sha256, retries) into "
        "data/pretrained/ (a folder per dataset), never by the train stage; []: none.",
    )
    mirror: str = spec(
        "a URL or an empty string",
        lambda v: v == "" or is_url(v),
        help="A download mirror, for offline or firewalled hosts: a base URL (http, https or file) "
        "under which each file is looked up first, by its URL's base name, e.g. -S "
        "download.reuters.mirror=file:///srv/datasets; a file it does not hold is fetched from its own URL, "
        "and a file:// URL is always read from its path. The environment variable "
        "PIPELINE_DATA_MIRROR overrides it. Empty: fetch from the files' own URLs.",
    )
    retries: int = non_negative_int(
        help="Further attempts after a failed download (a dropped connection resumes where it stopped)."
    )
    backoff_seconds: float = spec(
        "a non-negative number", lambda v: v >= 0, help="Wait before the first retry; doubled before each next one."
    )
    timeout_seconds: float = spec(
        "a positive number", lambda v: v > 0, help="Network timeout of one connection or read."
    )


@dataclass(frozen=True)
class SearchDimension:
    key: str = spec(
        "a param of the dataset's train section, dotted below it (e.g. learning_rate, early_stopping.patience)",
        lambda v: bool(v.strip()),
        help="The param of the dataset's train section that this dimension sets in each trial, "
        "as `-S train.DATASET.KEY` would.",
    )
    kind: Literal["uniform", "log_uniform", "int", "choice"] = spec(
        help="How values are drawn: uniform or log_uniform between low and high (Optuna's suggest_float), "
        "int between low and high inclusive (suggest_int), choice among values (suggest_categorical)."
    )
    low: Optional[float] = spec(
        "a number or null", help="The smallest value (uniform, log_uniform, int); null for a choice."
    )
    high: Optional[float] = spec(
        "a number or null", help="The largest value (uniform, log_uniform, int); null for a choice."
    )
    values: Optional[tuple[Any, ...]] = spec(
        "null or a non-empty list of values",
        lambda v: len(v) > 0,
        help="The values of a choice (numbers, strings, true/false, or lists such as [64, 32]); null otherwise.",
    )


@dataclass(frozen=True)
class TuneConfig:
    study: str = spec(
        "a study name of letters, digits, '-', '_' or '.'",
        lambda v: bool(v) and all(c.isalnum() or c in "-_." for c in v),
        help="The Optuna study's name (`pipeline tune --study` overrides it); its best "
        "trial becomes the DVC experiment tune-STUDY-best.",
    )
    trials: int = positive_int(
        help="Trials of the whole study, all workers together (pruned ones count, "
        "failed ones do not); a rerun continues up to this number."
    )
    sampler: Literal["tpe", "random"] = spec(
        help="Optuna's sampler: tpe learns from the finished trials (after startup_trials random ones); "
        "random draws each trial independently."
    )
    seed: int = non_negative_int(
        help="The sampler's seed (with one worker, the same trials in the same order on every run)."
    )
    startup_trials: int = non_negative_int(
        help="Trials drawn at random before TPE models the results, and completed trials needed before the "
        "pruner stops any."
    )
    pruner: Literal["median", "hyperband", "none"] = spec(
        help="Stops a trial whose epochs go worse than the others': median (Optuna's MedianPruner, from "
        "the second epoch), "
        "hyperband (HyperbandPruner from 1 epoch to the train section's epochs), none (no pruning)."
    )
    metric: Literal["val_accuracy", "val_loss", "accuracy", "loss"] = spec(
        help="The per-epoch figure each trial reports to the pruner; the trial's value is this figure at "
        "the epoch the train stage keeps (its best epoch, by the train section's early_stopping)."
    )
    direction: Literal["maximize", "minimize"] = spec(help="Whether a higher metric is better (maximize).")
    heartbeat_seconds: int = positive_int(
        help="A running trial records a heartbeat this often; one silent for twice as long (its worker was "
        "killed) is marked failed and retried."
    )
    retries: int = non_negative_int(help="How often a trial whose worker died is retried with the same params.")
    space: tuple[SearchDimension, ...] = spec(
        "a non-empty list of dimensions",
        lambda v: len(v) > 0,
        help="The search space: the params of the dataset's train section that each trial draws, each "
        "with its kind and range. "
        "Device, strategy and cluster settings are per worker, not per trial.",
    )


# --------------------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateConfig:
    batch_size: int = positive_int(help="Batch size of the evaluation.")
    top_k: Optional[int] = spec(
        "an integer >= 2 or null", lambda v: v >= 2, help="Also report top-k accuracy for this k; null: accuracy only."
    )


# --------------------------------------------------------------------------- serve, promote


@dataclass(frozen=True)
class ServeConfig:
    top_k: int = positive_int(
        help="How many most likely labels the logged model answers with their probabilities (a request's "
        "params.top_k asks for another number); read by evaluate, which logs the model."
    )


# Whether a higher value is better, for each test metric a promotion can compare (the metric
# key's choices, one for one).
PROMOTE_METRICS = {
    "test_accuracy": "maximize",
    "test_loss": "minimize",
    "test_macro_precision": "maximize",
    "test_macro_recall": "maximize",
}


@dataclass(frozen=True)
class PromoteConfig:
    metric: Literal["test_accuracy", "test_loss", "test_macro_precision", "test_macro_recall"] = spec(
        help="The test metric `pipeline promote` compares (lower is better for test_loss, higher for the "
        "others); without a VERSION it promotes the registered version best by it."
    )
    margin: float = spec(
        "a number >= 0",
        lambda v: v >= 0,
        help="How much a version must beat the champion by on the same test split "
        "before `pipeline promote` moves the champion alias to it (--force: always).",
    )

    @property
    def maximize(self) -> bool:
        """Whether a higher `metric` is better."""
        return PROMOTE_METRICS[self.metric] == "maximize"


@dataclass(frozen=True)
class DatasetParams:
    """Every section of one dataset, validated, plus the raw values for logging."""

    dataset: str
    download: DownloadConfig
    preprocess: PreprocessConfig
    train: AnyTrainConfig
    evaluate: EvaluateConfig
    tune: TuneConfig
    serve: ServeConfig
    promote: PromoteConfig
    raw: dict = field(repr=False, compare=False)

    def unpinned(self) -> list[str]:
        """One line per download that nothing pins (its file's sha256, or the preprocess
        stage's digest of what the files hold): the same params could fetch other bytes."""
        # a section that pins what the files hold, whatever bytes carry it
        by_content = hasattr(self.preprocess, "images_sha256")
        if getattr(self.preprocess, "images_sha256", None):
            return self.unpinned_weights()
        lines = [
            f"download.{self.dataset}.files[{i}] ({f.url}): no sha256 configured, so other bytes "
            "could be downloaded and trained on without a word; pin it"
            + (f" or preprocess.{self.dataset}.images_sha256" if by_content else "")
            for i, f in enumerate(self.download.files)
            if not f.sha256
        ]
        return lines + self.unpinned_weights()

    def unpinned_weights(self) -> list[str]:
        """One line per pretrained weights file that no sha256 pins (nothing else checks it)."""
        return [
            f"download.{self.dataset}.pretrained[{i}] ({f.url}): no sha256 configured, so other weights could "
            f"be trained from without a word; pin it (-S download.{self.dataset}.pretrained.{i}.sha256=...)"
            for i, f in enumerate(self.download.pretrained)
            if not f.sha256
        ]

    def flat(self) -> dict[str, Any]:
        """Every param of this dataset's stages as flat dotted keys (for MLflow): not `tune`,
        which is no stage's, nor the settings of the models the train section does not train."""
        out: dict[str, Any] = {}
        idle = {f.name for f in dataclasses.fields(self.train) if f.metadata.get("optional_key")} - {self.train.model}
        for stage in STAGES:
            section = self.raw[stage][self.dataset]
            if stage == "train":
                section = {key: value for key, value in section.items() if key not in idle}
            flatten(section, f"{stage}.{self.dataset}", out)
        return out


def flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, sub in value.items():
            flatten(sub, f"{prefix}.{key}", out)
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for i, sub in enumerate(value):
            flatten(sub, f"{prefix}.{i}", out)
    else:
        out[prefix] = value
