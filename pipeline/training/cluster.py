"""Several hosts: whether this process is one worker of a cluster (TF_CONFIG, or a Slurm job
step), that cluster checked before TensorFlow's import, TensorFlow's Slurm resolver set up for
CPU nodes too, and a worker's place in it (the chief, its task name)."""

from __future__ import annotations

import json
import os
from typing import Optional

from pipeline.errors import ConfigError


def detect_cluster(env=None) -> Optional[str]:
    """'tf_config' or 'slurm' when this process is one of several workers, else None."""
    env = os.environ if env is None else env
    raw = env.get("TF_CONFIG")
    if raw and raw.strip():
        cluster = check_tf_config(raw)
        if sum(len(cluster.get(kind, [])) for kind in ("chief", "worker")) > 1:
            return "tf_config"
    # A job step started by srun: SLURM_STEP_NUM_TASKS. The batch script itself also has
    # SLURM_PROCID and SLURM_NTASKS, but it is one process, not a worker of a cluster.
    if env.get("SLURM_PROCID") is not None and int(env.get("SLURM_STEP_NUM_TASKS", "1") or 1) > 1:
        return "slurm"
    return None


def check_tf_config(raw: str) -> dict:
    """The cluster of a TF_CONFIG, checked the way TensorFlow will read it: a JSON object with
    a `cluster` of job names -> lists of "host:port", and this process's `task` (a type that
    is one of the jobs, an index within it). Anything else would be read as "no cluster" or
    crash inside TensorFlow."""
    expected = 'expected {"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": 0}}'
    try:
        spec = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"TF_CONFIG: not valid JSON: {exc}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("cluster"), dict) or not spec["cluster"]:
        raise ConfigError(f"TF_CONFIG: no cluster: {expected}")
    cluster = spec["cluster"]
    for job, hosts in cluster.items():
        if not (isinstance(hosts, list) and hosts and all(isinstance(h, str) and ":" in h for h in hosts)):
            raise ConfigError(f'TF_CONFIG: cluster.{job}: expected a list of "host:port", got {json.dumps(hosts)}')
    task = spec.get("task")
    if not isinstance(task, dict) or task.get("type") not in cluster:
        raise ConfigError(
            f"TF_CONFIG: task: expected a type among {', '.join(cluster)} and an index, got {json.dumps(task)}"
        )
    index = task.get("index", 0)
    size = len(cluster[task["type"]])
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < size:
        raise ConfigError(
            f"TF_CONFIG: task.index: expected 0 to {size - 1} (the {task['type']} job has "
            f"{size} host{'s' if size != 1 else ''}), got {json.dumps(index)}"
        )
    return cluster


def check_cluster(name: str, loop: str, where: str) -> Optional[str]:
    """The cluster this process is a worker of (detect_cluster), checked against the strategy
    `name` and the loop: what of the strategy needs no TensorFlow, so that a stage can check it
    before TensorFlow's import (a moment, against about ten seconds)."""
    cluster = detect_cluster()
    if name == "multi_worker" or (name == "auto" and cluster):
        if name == "multi_worker" and cluster is None:
            raise ConfigError(
                f"{where}.strategy: multi_worker needs a cluster: set TF_CONFIG with "
                f"two or more workers, or run under Slurm with two or more tasks"
            )
        if loop == "fit":
            raise ConfigError(
                f"{where}.loop: Keras 3 fit does not run under MultiWorkerMirroredStrategy "
                f"(keras-team/keras#20585); set {where}.loop to custom"
            )
    return cluster


def _tasks_per_node(env) -> int:
    """The most tasks on one node, from Slurm's compressed form such as '2(x3),1'."""
    text = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or "1"
    return max(int(part.split("(")[0]) for part in text.split(",") if part)


def slurm_resolver(info, where: str, port_base: int, env=None):
    """TensorFlow's SlurmClusterResolver, told the GPU layout (`info`: distribute.DeviceInfo) so
    that it works on CPU nodes.

    Without a GPU count it runs nvidia-smi, it refuses 0 GPUs, and it divides the node's GPUs
    among its tasks (zero each when there are more tasks than GPUs). On CPU nodes it is told
    one stand-in GPU per task and not to set CUDA_VISIBLE_DEVICES. The first port is
    `port_base` (the param train.<dataset>.slurm_port_base; PIPELINE_SLURM_PORT_BASE overrides
    it), one more per task on a node.
    """
    import tensorflow as tf

    env = os.environ if env is None else env
    tasks = _tasks_per_node(env)
    port_base = int(env.get("PIPELINE_SLURM_PORT_BASE") or port_base)
    Resolver = tf.distribute.cluster_resolver.SlurmClusterResolver
    try:
        if info.physical_gpus:
            return Resolver(gpus_per_node=info.physical_gpus, port_base=port_base)
        return Resolver(gpus_per_node=tasks, gpus_per_task=1, auto_set_gpu=False, port_base=port_base)
    except (ValueError, RuntimeError, KeyError) as exc:
        raise ConfigError(
            f"{where}.strategy: cannot build the cluster from Slurm's variables "
            f"({tasks} task(s) per node, {info.physical_gpus} GPU(s)): {exc}"
        ) from None


def cluster_of(strategy):
    """(resolver, cluster spec) of a multi-worker strategy; (None, {}) on a single host."""
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    return (resolver, spec) if spec else (None, {})


def is_chief(strategy) -> bool:
    """True on the one worker that logs and writes outputs (and on any single-host run)."""
    resolver, spec = cluster_of(strategy)
    if resolver is None or resolver.task_type == "chief":
        return True
    return "chief" not in spec and resolver.task_type == "worker" and resolver.task_id == 0


def task_name(strategy) -> str:
    resolver, _ = cluster_of(strategy)
    return "local" if resolver is None else f"{resolver.task_type}-{resolver.task_id}"


def input_worker(strategy) -> tuple[int, int]:
    """(this worker's place, the number of workers) among the workers that read input: the
    chief first when the cluster has one, then the workers by index; (0, 1) on one host."""
    resolver, spec = cluster_of(strategy)
    if resolver is None:
        return 0, 1
    chiefs = len(spec.get("chief", []))
    workers = chiefs + len(spec.get("worker", []))
    if resolver.task_type == "chief":
        return 0, max(workers, 1)
    return chiefs + int(resolver.task_id), max(workers, 1)
