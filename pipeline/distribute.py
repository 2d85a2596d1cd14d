"""Devices and strategies: visible GPUs, memory growth and limits, logical splits, the strategy.

Device settings must be applied before TensorFlow initialises its devices, so
`configure_devices` is called once per process, before any tensor is made.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pipeline.errors import ConfigError

STRATEGIES = ("auto", "mirrored", "one_device", "default")


@dataclass(frozen=True)
class DeviceInfo:
    physical_gpus: int      # GPUs the host has
    visible_gpus: int       # GPUs this process uses
    logical_gpus: int
    logical_cpus: int

    @property
    def logical_devices(self) -> int:
        """The devices a strategy can place replicas on: logical GPUs, or else logical CPUs."""
        return self.logical_gpus or self.logical_cpus

    def as_dict(self) -> dict:
        return {**asdict(self), "logical_devices": self.logical_devices}


def configure_devices(devices, where: str = "devices") -> DeviceInfo:
    """Apply a DeviceConfig (visible GPUs, growth, limit, logical split); report what exists.

    `where` is the params key of the config, used in error messages.
    """
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    cpus = tf.config.list_physical_devices("CPU")
    if devices.visible_gpus is not None:
        absent = [i for i in devices.visible_gpus if i >= len(gpus)]
        if absent:
            raise ConfigError(
                f"{where}.visible_gpus: asked for GPU {', '.join(map(str, absent))}, "
                f"but this host has {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
                f"{' (indices 0-' + str(len(gpus) - 1) + ')' if gpus else ''}"
            )
        visible = [gpus[i] for i in devices.visible_gpus]
    else:
        visible = gpus
    split = devices.logical_devices or 1
    if devices.memory_limit_mb is not None and not visible:
        raise ConfigError(f"{where}.memory_limit_mb: set to {devices.memory_limit_mb}, but there is no visible GPU to limit")
    if visible and split > 1 and devices.memory_limit_mb is None:
        raise ConfigError(
            f"{where}.logical_devices: splitting a GPU into {split} devices needs "
            f"{where}.memory_limit_mb (the memory of each logical device)"
        )
    try:
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
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration()] * split
            )
        logical_gpus = tf.config.list_logical_devices("GPU")
        logical_cpus = tf.config.list_logical_devices("CPU")
    except RuntimeError as exc:
        raise ConfigError(f"{where}: cannot apply device settings after TensorFlow has started: {exc}") from None
    except (ValueError, tf.errors.OpError) as exc:
        raise ConfigError(f"{where}: this host cannot provide the devices asked for: {exc}") from None
    return DeviceInfo(len(gpus), len(visible), len(logical_gpus), len(logical_cpus))


def current_devices() -> DeviceInfo:
    """The devices as TensorFlow sees them, with no settings applied."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return DeviceInfo(len(gpus), len(gpus), len(tf.config.list_logical_devices("GPU")),
                      len(tf.config.list_logical_devices("CPU")))


def make_strategy(name: str, info: DeviceInfo, where: str = "strategy"):
    """The tf.distribute strategy `name` over the devices configure_devices left visible."""
    import tensorflow as tf

    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    if name in ("auto", "mirrored"):
        # With no GPU, mirror over the CPU's logical devices (one replica per device).
        return tf.distribute.MirroredStrategy(devices=gpus or cpus)
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0] if gpus else cpus[0])
    if name == "default":
        return tf.distribute.get_strategy()
    raise ConfigError(f"{where}: expected one of {', '.join(STRATEGIES)}, got {name!r}")


def describe(strategy, info: DeviceInfo) -> dict:
    """Device counts and strategy facts, as logged to MLflow and printed by `pipeline devices`."""
    extended = strategy.extended
    workers = 1
    resolver = getattr(extended, "_cluster_resolver", None)
    if resolver is not None and resolver.cluster_spec().as_dict():
        workers = len(resolver.cluster_spec().as_dict().get("worker", [])) or 1
    return {
        **info.as_dict(),
        "replicas": int(strategy.num_replicas_in_sync),
        "workers": workers,
        "strategy": type(strategy).__name__,
        "devices": list(getattr(extended, "worker_devices", ()) or ()),
    }
