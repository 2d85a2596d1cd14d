"""The keys of params.yaml: one frozen dataclass per stage and kind of dataset
(pipeline/config/datasets.py says which dataset takes which, by its preprocess section's kind
and reader), each field with what it
means, what a value must be and its check, and no default (defaults live in params.yaml only).
pipeline/config/loader.py reads a file into these; pipeline/config/params_doc.py documents them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

STAGES = ("download", "preprocess", "train", "evaluate")


def _spec(expect: Optional[str] = None, check=None, *, help: str):
    """Field metadata: what the key means (`help`, shown by `pipeline params` and in docs/params.md's
    table), what a value must be (for messages) and an optional range check. A Literal field
    needs no `expect`: its message lists the type's own values. Every field has a help text:
    params.yaml carries no comments (DVC's `-S` rewrite would drop most of them), so this is
    where each key is documented."""
    return field(metadata={"expect": expect, "check": check, "help": help})


def _positive_int(help: str):
    return _spec("a positive integer", lambda v: v > 0, help=help)


def _non_negative_int(help: str):
    return _spec("a non-negative integer", lambda v: v >= 0, help=help)


def _fraction(help: str, low_open: bool = False):
    if low_open:
        return _spec("a number in (0, 1)", lambda v: 0.0 < v < 1.0, help=help)
    return _spec("a number in [0, 1)", lambda v: 0.0 <= v < 1.0, help=help)


def is_sha256(v: str) -> bool:
    return len(v) == 64 and all(c in "0123456789abcdef" for c in v.lower())


def is_url(v: str) -> bool:
    return v.split("://", 1)[0] in ("http", "https", "file") and "://" in v


# --------------------------------------------------------------------------- download


@dataclass(frozen=True)
class RemoteFile:
    url: str = _spec(
        "an http://, https:// or file:// URL",
        is_url,
        help="Where the file is published; its base name names the downloaded file.",
    )
    sha256: Optional[str] = _spec(
        "a 64-digit hex sha256 or null",
        is_sha256,
        help="The file's expected sha256, checked after the download (of a folder: the sha256 of its files' "
        "paths and sha256s, sorted); null: not checked (the sha256 observed is recorded in the manifest).",
    )


@dataclass(frozen=True)
class DownloadConfig:
    files: tuple[RemoteFile, ...] = _spec(
        "a non-empty list of files",
        lambda v: len(v) > 0,
        help="The files to fetch, each a url and a sha256: for image folders an archive (zip or tar) or a "
        "local folder (a file:// URL), with train|training and test|testing folders of a folder per class; "
        "for labelled texts a CSV or JSON Lines file (docs/own-data.md). Reuters: Keras' published files "
        "(reuters.npz: the sha256 Keras checks; reuters_word_index.json, for which Keras publishes an md5: the "
        "sha256 of the file that matches it). MNIST: mnist_png.tar.gz, folders of the digits' PNG images.",
    )
    mirror: str = _spec(
        "a URL or an empty string",
        lambda v: v == "" or is_url(v),
        help="A download mirror, for offline or firewalled hosts: a base URL (http, https or file) "
        "under which each file is looked up by its URL's base name, e.g. -S "
        "download.reuters.mirror=file:///srv/datasets. The environment variable "
        "PIPELINE_DATA_MIRROR overrides it. Empty: fetch from the files' own URLs.",
    )
    retries: int = _non_negative_int(
        help="Further attempts after a failed download (a dropped connection resumes where it stopped)."
    )
    backoff_seconds: float = _spec(
        "a non-negative number", lambda v: v >= 0, help="Wait before the first retry; doubled before each next one."
    )
    timeout_seconds: float = _spec(
        "a positive number", lambda v: v > 0, help="Network timeout of one connection or read."
    )


# --------------------------------------------------------------------------- preprocess


def _validation_split():
    """The field both datasets' preprocess sections share."""
    return _fraction(
        help="The share of the training part held out for validation; 0: none (then early "
        "stopping cannot monitor a val_* metric)."
    )


def _kind():
    return _spec(
        "'image_folders' or 'labelled_texts'",
        help="What the dataset's samples are: image_folders (pictures in a folder per class) or labelled_texts "
        "(texts and their labels); with the reader, which keys its preprocess and train sections hold "
        "(docs/own-data.md).",
    )


def _reader(help: str):
    return _spec(help="How the download folder is read: " + help)


@dataclass(frozen=True)
class ReutersPreprocessConfig:
    kind: Literal["labelled_texts"] = _kind()
    reader: Literal["keras"] = _reader(
        "keras: Keras' Reuters arrays (reuters.npz) and word index, split as Keras' load_data splits them."
    )
    num_words: Optional[int] = _spec(
        "a positive integer or null",
        lambda v: v > 0,
        help="Vocabulary cap: rarer words become the out-of-vocabulary mark; null keeps every word.",
    )
    skip_top: int = _non_negative_int(help="The most frequent words to mark out-of-vocabulary.")
    max_len: int = _positive_int(
        help="Sequence length: shorter texts are padded, longer ones truncated (never dropped)."
    )
    padding: Literal["pre", "post"] = _spec(help="The side padding is added on.")
    truncating: Literal["pre", "post"] = _spec(help="The side long texts are cut on.")
    index_from: int = _spec(
        "an integer >= 3 (0 pad, 1 start, 2 out-of-vocabulary)",
        lambda v: v >= 3,
        help="Keras' shift of the word indices: 0 is padding, 1 the start mark, 2 out-of-vocabulary.",
    )
    test_split: float = _fraction(
        help="The share held out for testing; Keras' 0.2 gives 8,982 train and 2,246 test texts.", low_open=True
    )
    split_seed: int = _non_negative_int(
        help="Shuffle seed of the train/test split; Keras' 113 makes the figures comparable with published ones."
    )
    validation_split: float = _validation_split()
    validation_seed: int = _non_negative_int(help="Seed of the validation hold-out.")


@dataclass(frozen=True)
class TextTablePreprocessConfig:
    kind: Literal["labelled_texts"] = _kind()
    reader: Literal["table"] = _reader(
        "table: one CSV (with a header line) or JSON Lines file of a text column and a label column."
    )
    text_column: str = _spec("a column name", lambda v: bool(v), help="The column holding each sample's text.")
    label_column: str = _spec(
        "a column name",
        lambda v: bool(v),
        help="The column holding each sample's label (text or integer); the classes are its values, sorted.",
    )
    num_words: Optional[int] = _spec(
        "a positive integer or null",
        lambda v: v > 0,
        help="Vocabulary cap: rarer words become the out-of-vocabulary mark; null keeps every word.",
    )
    max_len: int = _positive_int(
        help="Sequence length: shorter texts are padded, longer ones truncated (never dropped)."
    )
    padding: Literal["pre", "post"] = _spec(help="The side padding is added on.")
    truncating: Literal["pre", "post"] = _spec(help="The side long texts are cut on.")
    test_split: float = _fraction(help="The share of the texts held out for testing.", low_open=True)
    split_seed: int = _non_negative_int(help="Shuffle seed of the train/test split.")
    validation_split: float = _validation_split()
    validation_seed: int = _non_negative_int(help="Seed of the validation hold-out.")


@dataclass(frozen=True)
class ImageFoldersPreprocessConfig:
    kind: Literal["image_folders"] = _kind()
    reader: Literal["folders", "digits"] = _reader(
        "folders: train|training and test|testing folders of a folder per class named by its label; "
        "digits: the same, whose classes are the digits 0-9 (MNIST), and a served picture is read as "
        "MNIST's digits are drawn (a light digit on a dark ground)."
    )
    image_size: int = _positive_int(
        help="The side every picture is resized to in pixels (square; bilinear) when it is not that size already."
    )
    color: Literal["grey", "rgb"] = _spec(help="Pictures are kept grey (one channel) or in colour (RGB).")
    validation_split: float = _validation_split()
    validation_seed: int = _non_negative_int(
        help="Seed of the validation hold-out, and of the order the training split is written in."
    )
    images_sha256: Optional[str] = _spec(
        "a 64-digit hex sha256 or null",
        is_sha256,
        help="What the archive holds, not how it is packed: the sha256 of every decoded image and its "
        "label, per split (any faithful re-packing of the same images shares it; docs/stages.md). "
        "Checked before anything is written; null: not checked (a warning, and the digest is printed).",
    )


# --------------------------------------------------------------------------- train


@dataclass(frozen=True)
class DeviceConfig:
    visible_gpus: Optional[tuple[int, ...]] = _spec(
        "null or a list of GPU indices",
        lambda v: all(i >= 0 for i in v) and len(set(v)) == len(v),
        help="The GPUs training may use, by index, e.g. [0, 1]; null: every GPU the host has.",
    )
    memory_growth: bool = _spec("true or false", help="Allocate GPU memory as needed rather than all at once.")
    memory_limit_mb: Optional[int] = _spec(
        "a positive integer or null",
        lambda v: v > 0,
        help="Memory limit per GPU (per logical device when the GPU is split); null: no limit.",
    )
    logical_devices: Optional[int] = _spec(
        "a positive integer or null",
        lambda v: v > 0,
        help="Split the first GPU (needs memory_limit_mb) or, with no GPU, the CPU into this many logical "
        "devices, so N-replica training runs on one card or in CI; null: no split.",
    )
    device_list: Optional[tuple[str, ...]] = _spec(
        "null or a list of device names such as /gpu:0",
        lambda v: len(v) > 0 and len(set(v)) == len(v),
        help='Replicas on exactly these logical devices, e.g. ["/gpu:0", "/gpu:1"] (the reference '
        "settings' MirroredStrategy(devices=[...])); null: all of them.",
    )
    intra_op_threads: int = _spec(
        "a non-negative integer (0: TensorFlow's choice)",
        lambda v: v >= 0,
        help="TensorFlow's threads within one op; 0: TensorFlow's choice (the number of cores). "
        "Several trainings sharing a host divide its cores with this and inter_op_threads.",
    )
    inter_op_threads: int = _spec(
        "a non-negative integer (0: TensorFlow's choice)",
        lambda v: v >= 0,
        help="TensorFlow's threads across independent ops; 0: TensorFlow's choice.",
    )


@dataclass(frozen=True)
class EarlyStoppingConfig:
    monitor: Literal["val_accuracy", "val_loss", "accuracy", "loss"] = _spec(
        help="The column of the per-epoch history watched; val_* needs a validation split."
    )
    mode: Literal["max", "min"] = _spec(help="Whether the monitored value improves upwards (max) or downwards (min).")
    patience: Optional[int] = _spec(
        "a positive integer or null",
        lambda v: v > 0,
        help="Epochs without an improvement of more than min_delta before training stops; null: never stop early.",
    )
    min_delta: float = _spec(
        "a non-negative number",
        lambda v: v >= 0,
        help="The smallest change of the monitored value that counts as an improvement.",
    )
    restore_best_weights: bool = _spec(
        "true or false", help="true: the model saved and evaluated is the best epoch's, not the last one's."
    )


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = _positive_int(help="Passes over the training set.")
    batch_size_per_replica: int = _positive_int(
        help="Batch size per replica; the global batch is this times the replicas in sync."
    )
    optimizer: Literal["adam", "nadam", "sgd", "rmsprop"] = _spec(
        help="The optimizer, by Keras' own name (keras.optimizers.get)."
    )
    learning_rate: float = _spec("a positive number", lambda v: v > 0, help="The initial learning rate.")
    lr_decay_epochs: tuple[int, ...] = _spec(
        "a list of positive epoch numbers",
        lambda v: all(e > 0 for e in v),
        help="Step decay: after each of these many epochs the learning rate is multiplied by "
        "lr_decay_factor ([30] with 40 epochs: 30 at the initial rate, 10 at rate x factor); "
        "[]: a constant rate.",
    )
    lr_decay_factor: float = _spec(
        "a number in (0, 1]", lambda v: 0 < v <= 1, help="The factor of each step of lr_decay_epochs."
    )
    shuffle_buffer: int = _spec(
        "a positive integer",
        lambda v: v >= 1,
        help="Samples held by the shuffle buffer of the input pipeline (a new order every epoch, drawn from "
        "the shards read in a new order): its memory is this many samples, whatever the size of the training "
        "split; at least the split's size shuffles it whole.",
    )
    seed: int = _non_negative_int(help="Seed of weight initialisation and shuffling.")
    strategy: Literal["auto", "mirrored", "multi_worker", "one_device", "default"] = _spec(
        help="The tf.distribute strategy. auto: MultiWorkerMirroredStrategy in a cluster, "
        "MirroredStrategy over several devices, no distribution on one device (a one-replica "
        "MirroredStrategy trains 1.7-2.5x slower here); see docs/devices.md."
    )
    loop: Literal["fit", "custom"] = _spec(
        help="fit: Keras model.fit under strategy.scope(); custom: a strategy.run training loop "
        "(needed for multi-worker training)."
    )
    cross_device_ops: Literal["auto", "nccl", "hierarchical_copy", "reduction_to_one_device"] = _spec(
        help="The all-reduce of MirroredStrategy; auto: NCCL on two or more real GPUs, TensorFlow's choice elsewhere."
    )
    num_packs: int = _positive_int(help="Gradient packs of the nccl and hierarchical_copy all-reduce.")
    precision: Literal["float32", "mixed_float16", "mixed_bfloat16"] = _spec(
        help="Keras' dtype policy; the logits stay float32. Mixed precision pays on GPUs with tensor "
        "cores and CPUs with AMX, not on other CPUs."
    )
    jit_compile: bool = _spec(
        "true or false", help="Compile the step with XLA; slower than plain TensorFlow on these models on a CPU."
    )
    steps_per_execution: int = _positive_int(help="Steps run per call into TensorFlow (fit loop only).")
    early_stopping: EarlyStoppingConfig = _spec(
        "a mapping", help="Stop training when the monitored metric stops improving."
    )
    deterministic: bool = _spec(
        "true or false",
        help="true: seeds for Python, NumPy and TensorFlow and op determinism, for identical reruns (slower).",
    )
    slurm_port_base: int = _spec(
        "a port number 1024-65535",
        lambda v: 1024 <= v <= 65535,
        help="Under Slurm, worker i of a node listens on this port + i (the "
        "environment variable PIPELINE_SLURM_PORT_BASE overrides it).",
    )
    devices: DeviceConfig = _spec("a mapping", help="Which devices training uses, and how.")

    def disagreement(self) -> Optional[str]:
        """What the keys of this section say against each other (`<key>: <problem>`), which no
        key's own check sees; None when they agree."""
        return None


@dataclass(frozen=True)
class TextsTrainConfig(TrainConfig):
    model: Literal["conv1d"] = _spec(
        help="The network: an Embedding, a Conv1D+MaxPool block per conv_filters and a Dense of the dataset's classes."
    )
    embedding_dim: int = _positive_int(help="Width of the word embedding.")
    conv_filters: tuple[int, ...] = _spec(
        "a non-empty list of positive integers",
        lambda v: len(v) > 0 and all(n > 0 for n in v),
        help="Filters of each Conv1D block, in order (ReLU, then MaxPooling1D); the reference settings: [64, 32].",
    )
    conv_kernel_sizes: tuple[int, ...] = _spec(
        "a list of positive integers, one per conv_filters",
        lambda v: all(n > 0 for n in v),
        help="Kernel size of each Conv1D block, one per conv_filters; the reference settings: [5, 3].",
    )
    pool_size: int = _positive_int(help="Window and stride of the MaxPooling1D after each Conv1D.")

    def disagreement(self) -> Optional[str]:
        if len(self.conv_kernel_sizes) != len(self.conv_filters):
            return (
                f"conv_kernel_sizes: expected one kernel size per conv_filters ({len(self.conv_filters)}), "
                f"got {len(self.conv_kernel_sizes)}"
            )
        return None


@dataclass(frozen=True)
class ImagesTrainConfig(TrainConfig):
    model: Literal["mobilenet_v2"] = _spec(
        help="The network: MobileNetV2 without top or pretrained weights, global average pooling, "
        "Dense dense_units and a Dense of the dataset's classes."
    )
    img_size: int = _spec(
        "an integer >= 32",
        lambda v: v >= 32,
        help="Side the images are resized to in the input pipeline (MobileNetV2 needs "
        "at least 32); the reference settings train at 112.",
    )
    alpha: float = _spec(
        "a positive number",
        lambda v: v > 0,
        help="MobileNetV2's width multiplier (Keras' alpha): each layer's filters times "
        "alpha, rounded to a multiple of 8; 1.0 is the published network, whose "
        "pointwise layers cost about alpha squared.",
    )
    dense_units: int = _positive_int(help="Units of the Dense layer on the pooled features.")
    batchnorm_momentum: float = _fraction(
        help="Moving-average momentum of the backbone's BatchNormalization layers (Keras' 0.999 "
        "leaves inference at chance after a few epochs).",
        low_open=True,
    )


# --------------------------------------------------------------------------- tune (not a stage)


# a preprocess or train section of any dataset
PreprocessConfig = Union[ReutersPreprocessConfig, TextTablePreprocessConfig, ImageFoldersPreprocessConfig]
AnyTrainConfig = Union[TextsTrainConfig, ImagesTrainConfig]


@dataclass(frozen=True)
class SearchDimension:
    key: str = _spec(
        "a param of the dataset's train section, dotted below it (e.g. learning_rate, early_stopping.patience)",
        lambda v: bool(v.strip()),
        help="The param of the dataset's train section that this dimension sets in each trial, "
        "as `-S train.DATASET.KEY` would.",
    )
    kind: Literal["uniform", "log_uniform", "int", "choice"] = _spec(
        help="How values are drawn: uniform or log_uniform between low and high (Optuna's suggest_float), "
        "int between low and high inclusive (suggest_int), choice among values (suggest_categorical)."
    )
    low: Optional[float] = _spec(
        "a number or null", help="The smallest value (uniform, log_uniform, int); null for a choice."
    )
    high: Optional[float] = _spec(
        "a number or null", help="The largest value (uniform, log_uniform, int); null for a choice."
    )
    values: Optional[tuple[Any, ...]] = _spec(
        "null or a non-empty list of values",
        lambda v: len(v) > 0,
        help="The values of a choice (numbers, strings, true/false, or lists such as [64, 32]); null otherwise.",
    )


@dataclass(frozen=True)
class TuneConfig:
    study: str = _spec(
        "a study name of letters, digits, '-', '_' or '.'",
        lambda v: bool(v) and all(c.isalnum() or c in "-_." for c in v),
        help="The Optuna study's name (`pipeline tune --study` overrides it); its best "
        "trial becomes the DVC experiment tune-STUDY-best.",
    )
    trials: int = _positive_int(
        help="Trials of the whole study, all workers together (pruned ones count, "
        "failed ones do not); a rerun continues up to this number."
    )
    sampler: Literal["tpe", "random"] = _spec(
        help="Optuna's sampler: tpe learns from the finished trials (after startup_trials random ones); "
        "random draws each trial independently."
    )
    seed: int = _non_negative_int(
        help="The sampler's seed (with one worker, the same trials in the same order on every run)."
    )
    startup_trials: int = _non_negative_int(
        help="Trials drawn at random before TPE models the results, and completed trials needed before the "
        "pruner stops any."
    )
    pruner: Literal["median", "hyperband", "none"] = _spec(
        help="Stops a trial whose epochs go worse than the others': median (Optuna's MedianPruner, from "
        "the second epoch), "
        "hyperband (HyperbandPruner from 1 epoch to the train section's epochs), none (no pruning)."
    )
    metric: Literal["val_accuracy", "val_loss", "accuracy", "loss"] = _spec(
        help="The per-epoch figure each trial reports to the pruner; the trial's value is this figure at "
        "the epoch the train stage keeps (its best epoch, by the train section's early_stopping)."
    )
    direction: Literal["maximize", "minimize"] = _spec(help="Whether a higher metric is better (maximize).")
    heartbeat_seconds: int = _positive_int(
        help="A running trial records a heartbeat this often; one silent for twice as long (its worker was "
        "killed) is marked failed and retried."
    )
    retries: int = _non_negative_int(help="How often a trial whose worker died is retried with the same params.")
    space: tuple[SearchDimension, ...] = _spec(
        "a non-empty list of dimensions",
        lambda v: len(v) > 0,
        help="The search space: the params of the dataset's train section that each trial draws, each "
        "with its kind and range. "
        "Device, strategy and cluster settings are per worker, not per trial.",
    )


# --------------------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateConfig:
    batch_size: int = _positive_int(help="Batch size of the evaluation.")
    top_k: Optional[int] = _spec(
        "an integer >= 2 or null", lambda v: v >= 2, help="Also report top-k accuracy for this k; null: accuracy only."
    )


# --------------------------------------------------------------------------- serve, promote


@dataclass(frozen=True)
class ServeConfig:
    top_k: int = _positive_int(
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
    metric: Literal["test_accuracy", "test_loss", "test_macro_precision", "test_macro_recall"] = _spec(
        help="The test metric `pipeline promote` compares (lower is better for test_loss, higher for the "
        "others); without a VERSION it promotes the registered version best by it."
    )
    margin: float = _spec(
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
        cfg = self.preprocess
        images = isinstance(cfg, ImageFoldersPreprocessConfig)
        if isinstance(cfg, ImageFoldersPreprocessConfig) and cfg.images_sha256:
            return []
        return [
            f"download.{self.dataset}.files[{i}] ({f.url}): no sha256 configured, so other bytes "
            "could be downloaded and trained on without a word; pin it"
            + (f" or preprocess.{self.dataset}.images_sha256" if images else "")
            for i, f in enumerate(self.download.files)
            if not f.sha256
        ]

    def flat(self) -> dict[str, Any]:
        """Every param of this dataset's stages as flat dotted keys (for MLflow): not `tune`,
        which is no stage's."""
        out: dict[str, Any] = {}
        for stage in STAGES:
            flatten(self.raw[stage][self.dataset], f"{stage}.{self.dataset}", out)
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
