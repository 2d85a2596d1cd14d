"""The train section: the keys every dataset's takes (epochs, optimizer, devices, ...), then
`model`, which names one of its kind's models (pipeline/config/keys/model_table.py), beside the settings of
each model the section may switch to."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Optional

from pipeline.config.keys.model_table import MODELS
from pipeline.fields import non_negative_int, positive_int, spec
from pipeline.kinds.known import KINDS

if TYPE_CHECKING:
    from pipeline.kinds.kind import Kind


@dataclass(frozen=True)
class DeviceConfig:
    visible_gpus: Optional[tuple[int, ...]] = spec(
        "null or a list of GPU indices",
        lambda v: all(i >= 0 for i in v) and len(set(v)) == len(v),
        help="The GPUs training may use, by index, e.g. [0, 1]; null: every GPU the host has.",
    )
    memory_growth: bool = spec("true or false", help="Allocate GPU memory as needed rather than all at once.")
    memory_limit_mb: Optional[int] = spec(
        "a positive integer or null",
        lambda v: v > 0,
        help="Memory limit per GPU (per logical device when the GPU is split); null: no limit.",
    )
    logical_devices: Optional[int] = spec(
        "a positive integer or null",
        lambda v: v > 0,
        help="Split the first GPU (needs memory_limit_mb) or, with no GPU, the CPU into this many logical "
        "devices, so N-replica training runs on one card or in CI; null: no split.",
    )
    device_list: Optional[tuple[str, ...]] = spec(
        "null or a list of device names such as /gpu:0",
        lambda v: len(v) > 0 and len(set(v)) == len(v),
        help='Replicas on exactly these logical devices, e.g. ["/gpu:0", "/gpu:1"] (the reference '
        "settings' MirroredStrategy(devices=[...])); null: all of them.",
    )
    intra_op_threads: int = spec(
        "a non-negative integer (0: TensorFlow's choice)",
        lambda v: v >= 0,
        help="TensorFlow's threads within one op; 0: TensorFlow's choice (the number of cores). "
        "Several trainings sharing a host divide its cores with this and inter_op_threads.",
    )
    inter_op_threads: int = spec(
        "a non-negative integer (0: TensorFlow's choice)",
        lambda v: v >= 0,
        help="TensorFlow's threads across independent ops; 0: TensorFlow's choice.",
    )


@dataclass(frozen=True)
class EarlyStoppingConfig:
    monitor: Literal["val_accuracy", "val_loss", "accuracy", "loss"] = spec(
        help="The column of the per-epoch history watched; val_* needs a validation split."
    )
    mode: Literal["max", "min"] = spec(help="Whether the monitored value improves upwards (max) or downwards (min).")
    patience: Optional[int] = spec(
        "a positive integer or null",
        lambda v: v > 0,
        help="Epochs without an improvement of more than min_delta before training stops; null: never stop early.",
    )
    min_delta: float = spec(
        "a non-negative number",
        lambda v: v >= 0,
        help="The smallest change of the monitored value that counts as an improvement.",
    )
    restore_best_weights: bool = spec(
        "true or false", help="true: the model saved and evaluated is the best epoch's, not the last one's."
    )


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = positive_int(help="Passes over the training set.")
    batch_size_per_replica: int = positive_int(
        help="Batch size per replica; the global batch is this times the replicas in sync."
    )
    optimizer: Literal["adam", "nadam", "sgd", "rmsprop"] = spec(
        help="The optimizer, by Keras' own name (keras.optimizers.get)."
    )
    learning_rate: float = spec("a positive number", lambda v: v > 0, help="The initial learning rate.")
    weight_decay: float = spec(
        "a non-negative number",
        lambda v: v >= 0,
        help="Decoupled weight decay, as AdamW's (the weight_decay of Keras' optimizers): each step also "
        "shrinks every weight matrix (the kernels of convolutions and Dense layers, embeddings) by "
        "learning rate x weight_decay of itself; biases and batch normalisation's scale and offset are left "
        "alone. 0: none.",
    )
    loss: Literal["cross_entropy", "squared_hinge"] = spec(
        help="What training minimises, on the model's logits. cross_entropy: the softmax cross-entropy (Keras' "
        "SparseCategoricalCrossentropy). squared_hinge: each class against the rest, as a linear SVM (scikit-learn's "
        "LinearSVC, liblinear's default): for each class, the square of how far the logit falls short of +1 (the "
        "sample's class) or of -1 (the others), summed over the classes; the logits are then margins, and the "
        "served scores (their softmax) rank the classes but are not probabilities. evaluate's test_loss is the "
        "cross-entropy of the logits, whichever loss trained them."
    )
    lr_schedule: Literal["step", "cosine"] = spec(
        help="How the learning rate changes from epoch to epoch. step: learning_rate, times lr_decay_factor "
        "after each of lr_decay_epochs. cosine: from learning_rate at the first epoch down a half cosine to "
        "learning_rate x lr_decay_factor at the last (of epochs), so that training settles without a "
        "hand-chosen decay epoch (lr_decay_epochs then []); early stopping may end it before."
    )
    lr_decay_epochs: tuple[int, ...] = spec(
        "a list of positive epoch numbers",
        lambda v: all(e > 0 for e in v),
        help="Step decay: after each of these many epochs the learning rate is multiplied by "
        "lr_decay_factor ([30] with 40 epochs: 30 at the initial rate, 10 at rate x factor); "
        "[]: a constant rate.",
    )
    lr_decay_factor: float = spec(
        "a number in (0, 1]",
        lambda v: 0 < v <= 1,
        help="The factor of each step of lr_decay_epochs (step), or of the last epoch's rate (cosine).",
    )
    shuffle_buffer: int = spec(
        "a positive integer",
        lambda v: v >= 1,
        help="Samples held by the shuffle buffer of the input pipeline (a new order every epoch, drawn from "
        "the shards read in a new order): its memory is this many samples, whatever the size of the training "
        "split; at least the split's size shuffles it whole.",
    )
    seed: int = non_negative_int(help="Seed of weight initialisation and shuffling.")
    strategy: Literal["auto", "mirrored", "multi_worker", "one_device", "default"] = spec(
        help="The tf.distribute strategy. auto: MultiWorkerMirroredStrategy in a cluster, "
        "MirroredStrategy over several devices, no distribution on one device (a one-replica "
        "MirroredStrategy trains 1.7-2.5x slower here); see docs/devices.md."
    )
    loop: Literal["fit", "custom"] = spec(
        help="fit: Keras model.fit under strategy.scope(); custom: a strategy.run training loop "
        "(needed for multi-worker training)."
    )
    cross_device_ops: Literal["auto", "nccl", "hierarchical_copy", "reduction_to_one_device"] = spec(
        help="The all-reduce of MirroredStrategy; auto: NCCL on two or more real GPUs, TensorFlow's choice elsewhere."
    )
    num_packs: int = positive_int(help="Gradient packs of the nccl and hierarchical_copy all-reduce.")
    precision: Literal["float32", "mixed_float16", "mixed_bfloat16"] = spec(
        help="Keras' dtype policy; the logits stay float32. Mixed precision pays on GPUs with tensor "
        "cores and CPUs with AMX, not on other CPUs."
    )
    jit_compile: bool = spec(
        "true or false", help="Compile the step with XLA; slower than plain TensorFlow on these models on a CPU."
    )
    steps_per_execution: int = positive_int(help="Steps run per call into TensorFlow (fit loop only).")
    early_stopping: EarlyStoppingConfig = spec(
        "a mapping", help="Stop training when the monitored metric stops improving."
    )
    deterministic: bool = spec(
        "true or false",
        help="true: seeds for Python, NumPy and TensorFlow and op determinism, for identical reruns (slower).",
    )
    slurm_port_base: int = spec(
        "a port number 1024-65535",
        lambda v: 1024 <= v <= 65535,
        help="Under Slurm, worker i of a node listens on this port + i (the "
        "environment variable PIPELINE_SLURM_PORT_BASE overrides it).",
    )
    cluster_wait_seconds: int = spec(
        "a positive number of seconds",
        lambda v: v > 0,
        help="With several workers, how long each waits at start for all the others to answer; past it, "
        "one error line names the workers it could not reach (a wrong port, a firewall, a worker not started).",
    )
    devices: DeviceConfig = spec("a mapping", help="Which devices training uses, and how.")
    class_weight: Literal["balanced", "none"] = spec(
        help="balanced: each class's samples weigh n / (classes x the class's count in the training split) in "
        "the training loss, so that a rare class counts as much as a common one (the epochs' training loss is "
        "that weighted one; accuracy and validation are not weighted); the weights are logged to MLflow "
        "(class_weights.json). "
        "A class with no training sample is an error (the preprocess section's stratify: true keeps one of each). "
        "none: every sample weighs 1."
    )

    # a name of the kind's table of models: its subclass (`train_config`) says which
    model: str = spec(help="The network, by name.")

    @property
    def settings(self) -> Any:
        """The settings of the model this section trains (its section `train.<ds>.<model>`)."""
        return getattr(self, self.model)

    def disagreement(self) -> Optional[str]:
        """What the keys of this section say against each other (`<key>: <problem>`), which no
        key's own check sees; None when they agree. The settings of every model the section
        holds are checked, not only the trained one's: a switch must not meet a latent error."""
        if self.settings is None:
            return f"{self.model}: missing key (model is {self.model}: its settings)"
        if self.lr_schedule == "cosine" and self.lr_decay_epochs:
            return (
                f"lr_decay_epochs: expected [] with lr_schedule: cosine (its rate falls every epoch), got "
                f"{list(self.lr_decay_epochs)}"
            )
        for f in dataclasses.fields(self):
            settings: Any = getattr(self, f.name) if f.metadata.get("optional_key") else None
            problem = settings.disagreement() if hasattr(settings, "disagreement") else None
            if problem:
                return f"{f.name}.{problem}"
        return None


_SECTION = "the section of its name, beside it (a model's settings are needed only where it is chosen)"


def train_config(kind: Kind) -> type:
    """The train section's class of datasets of `kind`: TrainConfig's keys, `model` (a name of
    the kind's table of models) and, for each model of the table, its settings as an optional key."""
    table = MODELS[kind.models]
    names = ", ".join(f"{name}: {model.help}" for name, model in table.items())
    fields: list[Any] = [
        ("model", Literal[tuple(table)], spec(help=f"The network, by name ({names}); its settings: {_SECTION}.")),
        *(
            (
                name,
                Optional[model.settings],
                spec(
                    "a mapping",
                    help=f"Settings of model {name}: left out (or null) where no model {name} is trained.",
                    optional_key=True,
                ),
            )
            for name, model in table.items()
        ),
    ]
    name = f"{kind.name.title().replace('_', '')}TrainConfig"
    cls = dataclasses.make_dataclass(name, fields, bases=(TrainConfig,), frozen=True)
    cls.__module__ = __name__
    return cls


# the train section's class of each kind, by the kind's name
TRAIN_CONFIGS: dict[str, type] = {name: train_config(kind) for name, kind in KINDS.items()}
# a train section of any dataset
AnyTrainConfig = TrainConfig
