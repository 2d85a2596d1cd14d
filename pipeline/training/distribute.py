"""Devices and strategies: visible GPUs, memory growth and limits, logical splits, the strategy.

Device settings must be applied before TensorFlow initialises its devices, so
`configure_devices` is called once per process, before any tensor is made.
"""

from __future__ import annotations

import glob
import os
import socket
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Optional

from pipeline.errors import ConfigError
from pipeline.training.cluster import (
    bounded_start,
    check_cluster,
    cluster_of,
    is_chief,
    slurm_resolver,
    task_name,
)

if TYPE_CHECKING:
    from pipeline.config.keys.training import TrainConfig


@dataclass(frozen=True)
class DeviceInfo:
    physical_gpus: int  # GPUs the host has
    visible_gpus: int  # GPUs this process uses
    logical_gpus: int
    logical_cpus: int

    @property
    def logical_devices(self) -> int:
        """The devices a strategy can place replicas on: logical GPUs, or else logical CPUs."""
        return self.logical_gpus or self.logical_cpus

    def as_dict(self) -> dict:
        return {**asdict(self), "logical_devices": self.logical_devices}


def check_devices(devices, gpus: int, where: str = "devices") -> None:
    """What a DeviceConfig asks of a host with `gpus` GPUs, checked before TensorFlow is touched."""
    if devices.visible_gpus is not None:
        absent = [i for i in devices.visible_gpus if i >= gpus]
        if absent:
            raise ConfigError(
                f"{where}.visible_gpus: asked for GPU {', '.join(map(str, absent))}, "
                f"but this host has {gpus} GPU{'s' if gpus != 1 else ''}"
                f"{' (indices 0-' + str(gpus - 1) + ')' if gpus else ''}"
            )
    visible = len(devices.visible_gpus) if devices.visible_gpus is not None else gpus
    split = devices.logical_devices or 1
    if devices.memory_limit_mb is not None and not visible:
        raise ConfigError(
            f"{where}.memory_limit_mb: set to {devices.memory_limit_mb}, but there is no visible GPU to limit"
        )
    if visible and split > 1 and devices.memory_limit_mb is None:
        raise ConfigError(
            f"{where}.logical_devices: splitting a GPU into {split} devices needs "
            f"{where}.memory_limit_mb (the memory of each logical device)"
        )


def configure_devices(devices, where: str = "devices") -> DeviceInfo:
    """Apply a DeviceConfig (threads, visible GPUs, growth, limit, logical split); report what exists.

    `where` is the params key of the config, used in error messages.
    """
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    cpus = tf.config.list_physical_devices("CPU")
    check_devices(devices, len(gpus), where)
    visible = [gpus[i] for i in devices.visible_gpus] if devices.visible_gpus is not None else gpus
    split = devices.logical_devices or 1
    try:
        if devices.intra_op_threads:
            tf.config.threading.set_intra_op_parallelism_threads(devices.intra_op_threads)
        if devices.inter_op_threads:
            tf.config.threading.set_inter_op_parallelism_threads(devices.inter_op_threads)
        if devices.visible_gpus is not None:
            tf.config.set_visible_devices(visible, "GPU")
        for index, gpu in enumerate(visible):
            configs = None
            if devices.memory_limit_mb is not None:
                count = split if index == 0 else 1
                configs = [tf.config.LogicalDeviceConfiguration(memory_limit=devices.memory_limit_mb)] * count
            if configs:
                # Memory growth and a fixed logical configuration exclude each other.
                tf.config.set_logical_device_configuration(gpu, configs)
            elif devices.memory_growth:
                tf.config.experimental.set_memory_growth(gpu, True)
        if not visible and split > 1:
            tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * split)
    except RuntimeError as exc:
        raise ConfigError(f"{where}: cannot apply device settings after TensorFlow has started: {exc}") from None
    except (ValueError, tf.errors.OpError) as exc:
        raise ConfigError(f"{where}: this host cannot provide the devices asked for: {exc}") from None
    # Counted, not listed: listing logical devices starts TensorFlow's runtime, after which a
    # MultiWorkerMirroredStrategy can no longer configure its collective ops.
    logical_gpus = len(visible) + (split - 1 if visible else 0)
    return DeviceInfo(len(gpus), len(visible), logical_gpus, 1 if visible else split)


# Device nodes through which TensorFlow reaches a GPU: NVIDIA's (Linux), WSL's, Jetson's, AMD's.
GPU_DEVICE_NODES = ("/dev/nvidia[0-9]*", "/dev/dxg", "/dev/nvhost-*", "/dev/kfd")


def no_gpu_without_tensorflow(env=None) -> bool:
    """True when this process cannot see a GPU, whatever TensorFlow would find: CUDA_VISIBLE_DEVICES
    hides them all (empty, or a first entry such as -1), or the host has no GPU device node."""
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and (not visible.strip() or visible.split(",")[0].strip().startswith("-")):
        return True
    return not any(glob.glob(pattern) for pattern in GPU_DEVICE_NODES)


def check_before_tensorflow(cfg: TrainConfig, where: str) -> None:
    """What of a TrainConfig's strategy and devices can be checked before TensorFlow's import (a
    moment, against about ten seconds): the cluster against the strategy and the loop, and, in
    a process that can see no GPU, what the device settings ask of GPUs. The same checks run
    again with what TensorFlow finds (configure_devices, strategy_for)."""
    cluster = check_cluster(cfg.strategy, cfg.loop, where)
    if not no_gpu_without_tensorflow():
        return
    check_devices(cfg.devices, 0, where=f"{where}.devices")
    if cluster is None and cfg.strategy != "multi_worker" and not cfg.devices.device_list:
        # no GPU and no device list: the logical devices are the CPU's split, as TensorFlow names them
        cpus = [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(cfg.devices.logical_devices or 1)]
        check_replicas(cfg, *plan_replicas(cfg.strategy, [], cpus, None), where=where)


def plan_replicas(name: str, gpus: list[str], cpus: list[str], picked: Optional[list[str]]) -> tuple[str, list[str]]:
    """(kind, devices) of the single-host strategy `name` over these logical devices (`picked`:
    those of the params' device list, if any): kind `mirrored`, `one_device` or `default`
    (TensorFlow's default strategy), and the devices its replicas run on.

    `auto` is MirroredStrategy over the GPUs, or over the CPU's logical devices when there is
    none, and no distribution at all when there is one device: a one-replica MirroredStrategy
    (or OneDeviceStrategy) wraps every step in a distributed call, and Reuters trains about
    2.5x and MNIST about 1.9x slower under it on a 2-core CPU (docs/benchmarks.md).
    """
    first = (gpus or cpus)[0]
    devices = picked or gpus or cpus
    if name == "auto" and len(devices) == 1:
        return ("default" if devices[0] == first else "one_device"), devices
    if name in ("auto", "mirrored"):
        return "mirrored", devices
    if name == "one_device":
        return "one_device", devices[:1]
    return "default", [first]


def check_replicas(cfg: TrainConfig, kind: str, devices: list[str], where: str) -> None:
    """What a TrainConfig asks of the replicas that plan_replicas puts on `devices`."""
    if kind == "mirrored" and cfg.cross_device_ops == "nccl" and not all("GPU" in d.upper() for d in devices):
        raise ConfigError(f"{where}.cross_device_ops: nccl needs GPUs, but the replicas are on CPUs")
    if cfg.jit_compile and len(devices) > 1 and all("CPU" in d.upper() for d in devices):
        # XLA compiles a replica's step for one device, and the mirrored variables on the other
        # logical CPU devices are out of its reach ("Trying to access resource ... located in
        # device CPU:1 from device CPU:0").
        raise ConfigError(
            f"{where}.jit_compile: XLA cannot compile a step across {len(devices)} "
            f"logical CPU devices; use one replica, or GPUs"
        )
    if cfg.loop == "fit" and cfg.steps_per_execution > 1 and len(devices) > 1:
        raise ConfigError(
            f"{where}.steps_per_execution: Keras 3 fit fails with steps_per_execution > 1 "
            f"on more than one replica (keras-team/keras#19246); use 1, or loop: custom"
        )


def strategy_for(cfg: TrainConfig, info: DeviceInfo, where: str):
    """The tf.distribute strategy of a TrainConfig over the devices configure_devices left
    visible: MultiWorkerMirroredStrategy when the process is a worker of a cluster (TF_CONFIG,
    Slurm) or the params ask for it, else plan_replicas' pick, checked by check_replicas."""
    import tensorflow as tf

    cluster = check_cluster(cfg.strategy, cfg.loop, where)
    if cfg.strategy == "multi_worker" or (cfg.strategy == "auto" and cluster):
        return _multi_worker(cfg, info, cluster, where)
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    picked = None
    if cfg.devices.device_list:
        picked = _pick_devices(cfg.devices.device_list, gpus + cpus, f"{where}.devices.device_list")
    kind, devices = plan_replicas(cfg.strategy, gpus, cpus, picked)
    check_replicas(cfg, kind, devices, where)
    if kind == "mirrored":
        on_gpus = all("GPU" in d.upper() for d in devices)
        ops = _cross_device_ops(
            cfg.cross_device_ops,
            cfg.num_packs,
            on_gpus,
            len(devices),
            virtual=info.logical_gpus > info.visible_gpus,
            where=where,
        )
        return tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=ops)
    if kind == "one_device":
        return tf.distribute.OneDeviceStrategy(devices[0])
    return tf.distribute.get_strategy()


def _multi_worker(cfg: TrainConfig, info: DeviceInfo, cluster: Optional[str], where: str):
    """MultiWorkerMirroredStrategy over the cluster of TF_CONFIG or Slurm. TensorFlow waits
    without end for every worker to register; `cluster.bounded_start` ends the process with one
    line naming the workers that do not answer after `cfg.cluster_wait_seconds`."""
    import tensorflow as tf

    if cluster == "slurm":
        resolver = slurm_resolver(info, where, cfg.slurm_port_base)
    else:
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.AUTO
    )
    with bounded_start(resolver, cfg.cluster_wait_seconds, where):
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver, communication_options=options)


def _pick_devices(wanted, available: list[str], where: str) -> list[str]:
    import tensorflow as tf

    def key(name):
        spec = tf.DeviceSpec.from_string(name)
        return (spec.device_type or "").upper(), spec.device_index

    by_key = {key(d): d for d in available}
    chosen = []
    for name in wanted:
        try:
            found = by_key.get(key(name))
        except ValueError:
            found = None
        if found is None:
            raise ConfigError(f"{where}: no device {name!r} on this host; it has {', '.join(available)}")
        chosen.append(found)
    return chosen


def _cross_device_ops(choice: str, num_packs: int, on_gpus: bool, count: int, *, virtual: bool, where: str):
    """The all-reduce for MirroredStrategy; None lets TensorFlow pick its default."""
    import tensorflow as tf

    if choice == "auto":
        # NCCL on two or more real GPUs; it cannot work on virtual GPUs or on CPUs.
        if on_gpus and count > 1 and not virtual:
            return tf.distribute.NcclAllReduce(num_packs=num_packs)
        return None
    if choice == "nccl":  # on GPUs: check_replicas refused it on CPUs
        if virtual:
            raise ConfigError(f"{where}.cross_device_ops: nccl does not work on virtual (split) GPUs")
        return tf.distribute.NcclAllReduce(num_packs=num_packs)
    if choice == "hierarchical_copy":
        return tf.distribute.HierarchicalCopyAllReduce(num_packs=num_packs)
    return tf.distribute.ReductionToOneDevice()


# The names users know: MultiWorkerMirroredStrategy's class is CollectiveAllReduceStrategy, and
# TensorFlow's default strategy (no distribution) is what tf.distribute.get_strategy() returns.
STRATEGY_NAMES = {
    "CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",
    "_DefaultDistributionStrategy": "DefaultStrategy",
}


def replica_devices(strategy) -> list[str]:
    """The devices the replicas run on. The default strategy has no list of its own (it raises
    RuntimeError): it runs on TensorFlow's default device, the first GPU or else the CPU."""
    try:
        return list(strategy.extended.worker_devices)
    except RuntimeError:
        import tensorflow as tf

        default = (tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU"))[0]
        return [default.name]


def describe(strategy, info: DeviceInfo) -> dict:
    """Device counts and strategy facts, as logged to MLflow and printed by `pipeline devices`."""
    extended = strategy.extended
    _, spec = cluster_of(strategy)
    workers = len(spec.get("worker", [])) + len(spec.get("chief", [])) or 1
    # The all-reduce actually in use (TensorFlow's own pick when the param said auto).
    ops = getattr(extended, "_cross_device_ops", None)
    ops_name = type(ops).__name__ if ops is not None else "none"
    communication = getattr(extended, "_communication_options", None)
    if type(strategy).__name__ == "CollectiveAllReduceStrategy" and communication is not None:
        ops_name += f" ({communication.implementation.name})"
    return {
        **info.as_dict(),
        "replicas": int(strategy.num_replicas_in_sync),
        "workers": workers,
        "strategy": STRATEGY_NAMES.get(type(strategy).__name__, type(strategy).__name__),
        "cross_device_ops": ops_name,
        "devices": replica_devices(strategy),
    }


# What a run records of where it ran: in MLflow's params and the train stage's summary.
FIGURES = ("physical_gpus", "logical_devices", "replicas", "workers", "strategy", "cross_device_ops")


@dataclass(frozen=True)
class Setup:
    """The devices and strategy of one training process."""

    strategy: Any
    facts: dict  # describe()

    @property
    def chief(self) -> bool:
        return is_chief(self.strategy)

    @property
    def task(self) -> str:
        return task_name(self.strategy)

    def figures(self) -> dict:
        return {**{key: self.facts[key] for key in FIGURES}, **placement(self.strategy)}


def placement(strategy) -> dict:
    """The machines a run's workers are on: how many, and their names (the cluster's hosts, or
    this one's), so that a run on several nodes says where it ran."""
    _, spec = cluster_of(strategy)
    addresses = [a for tasks in spec.values() for a in (tasks.values() if isinstance(tasks, dict) else tasks)]
    hosts = sorted({address.rsplit(":", 1)[0] for address in addresses}) or [socket.gethostname()]
    return {"nodes": len(hosts), "hosts": ",".join(hosts)}


def setup(cfg: TrainConfig, where: str) -> Setup:
    """Apply a TrainConfig's device settings and make its strategy: first thing in a process,
    before any tensor. `where` is the config's params key, for error messages."""
    check_before_tensorflow(cfg, where)
    info = configure_devices(cfg.devices, where=f"{where}.devices")
    strategy = strategy_for(cfg, info, where=where)
    return Setup(strategy, describe(strategy, info))
