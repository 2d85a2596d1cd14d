"""Several hosts: whether this process is one worker of a cluster (TF_CONFIG, or a Slurm job
step), that cluster checked before TensorFlow's import, TensorFlow's Slurm resolver set up for
CPU nodes too, a worker's place in it (the chief, its task name), and a peer lost or never
reached, said in one line."""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import re
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from pipeline import log
from pipeline.errors import ClusterError, ConfigError


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


# ----------------------------------------------------------------------------- a lost peer

# TensorFlow's errors of a collective operation whose peer went away (killed, its node lost,
# its network cut), by class name, and what each says when its message tells no more: the
# surviving workers' failure is the run's, not a bug
PEER_ERRORS = {
    "UnavailableError": "unavailable",
    "AbortedError": "aborted",
    "CancelledError": "cancelled",
    "DeadlineExceededError": "no answer in time",
}
# what TensorFlow's and gRPC's message says happened, in the words of the line
_REASONS = (
    ("connection refused", "connection refused"),
    ("socket closed", "socket closed"),
    ("connection reset", "connection reset"),
    ("is down", "it stopped answering the health check"),
    ("deadline exceeded", "no answer in time"),
)


def peers(strategy) -> dict[str, str]:
    """The other workers of this process's cluster: {task name: host:port}; {} on one host."""
    resolver, spec = cluster_of(strategy)
    return _others(resolver, spec)


def _others(resolver, spec: dict) -> dict[str, str]:
    found = {}
    for job, tasks in spec.items():
        items = tasks.items() if isinstance(tasks, dict) else enumerate(tasks)
        for index, address in items:
            if resolver is None or (job, int(index)) != (resolver.task_type, int(resolver.task_id)):
                found[f"{job}-{index}"] = address
    return found


def unreachable(addresses: dict[str, str], timeout: float = 1.0) -> dict[str, str]:
    """Those of `addresses` ({name: host:port}) that refuse or ignore a TCP connection now
    (all asked at once: a firewall that drops packets costs `timeout`, not one per worker)."""

    def answers(address: str) -> bool:
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
        except (OSError, ValueError):
            return False
        return True

    if not addresses:
        return {}
    with ThreadPoolExecutor(max_workers=min(32, len(addresses))) as pool:
        found = dict(zip(addresses, pool.map(answers, addresses.values())))
    return {name: address for name, address in addresses.items() if not found[name]}


def lost_peer(message: str, others: dict[str, str]) -> dict[str, str]:
    """The peer(s) a collective's error `message` names ({name: address}): by task
    (`/job:worker/replica:0/task:1`, the remote target gRPC names) or by address
    (`ipv4:10.0.0.2:8888`); failing both, those that do not answer a connection now."""
    named = {}
    for job, index in re.findall(r"/job:(\w+)/replica:\d+/task:(\d+)", message):
        name = f"{job}-{index}"
        if name in others:
            named[name] = others[name]
    if not named:
        addresses = set(re.findall(r"ipv[46]:\[?([\w.:]+?)\]?:(\d+)\b", message))
        named = {n: a for n, a in others.items() if tuple(a.rsplit(":", 1)) in addresses}
    return named or unreachable(others)


def reason_in(message: str, default: str) -> str:
    lowered = message.lower()
    return next((said for found, said in _REASONS if found in lowered), default)


def named(workers: dict[str, str]) -> str:
    return ", ".join(f"{name} ({address})" for name, address in workers.items())


@contextlib.contextmanager
def peers_watched(strategy, resume: str) -> Iterator[None]:
    """Training across workers: a collective that fails because a peer went away becomes one
    ClusterError line naming the peer (task and address), why, and `resume` (what resumes the
    run); anything else passes through. On one host, nothing is caught."""
    others = peers(strategy)
    try:
        yield
    except Exception as exc:
        if not others or type(exc).__name__ not in PEER_ERRORS:
            raise
        message = str(exc)
        lost = lost_peer(message, others)
        who = named(lost) if lost else f"a peer among {named(others)}"
        raise ClusterError(
            f"lost {who} mid-training: {reason_in(message, PEER_ERRORS[type(exc).__name__])}; {resume}"
        ) from None


# after the watch's line, the grace before the process ends itself (faulthandler)
WAIT_GRACE_SECONDS = 5


@contextlib.contextmanager
def bounded_start(resolver, seconds: int, where: str) -> Iterator[None]:
    """Around the strategy's construction, which blocks inside TensorFlow, the GIL held, until
    every worker has registered (an hour at most): no thread of this process runs meanwhile.
    So a small process watches instead (`watch`): when the construction still blocks after
    `seconds`, it prints one ClusterError line naming the workers that do not answer a
    connection, and faulthandler's C thread ends this process with exit code 1 a few seconds
    later. Nothing else has started yet: no run, no output to leave."""

    others = _others(resolver, resolver.cluster_spec().as_dict())
    watcher = subprocess.Popen(
        [sys.executable, "-m", "pipeline.training.cluster", str(seconds), where, json.dumps(others)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=sys.stderr,  # Python's stderr: fd 2 may be the pipe of `log.filter_native_stderr`, whose thread waits
    )
    with open(os.devnull, "w") as quiet:
        faulthandler.dump_traceback_later(seconds + WAIT_GRACE_SECONDS, exit=True, file=quiet)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
            watcher.communicate()  # its stdin closed: the watch's end


def watch(seconds: float, where: str, others: dict[str, str], stdin=None) -> int:
    """The watching process of `bounded_start`: 0 when its parent closes stdin within `seconds`
    (the strategy is built, or the parent is gone), else the error line and 1."""

    stdin = sys.stdin if stdin is None else stdin
    ready, _, _ = select.select([stdin], [], [], seconds)
    if ready:
        return 0
    down = unreachable(others)
    error = ClusterError(
        f"{where}: waited {seconds:g} s (cluster_wait_seconds) for {named(down or others)} to answer; check "
        f"that every worker is started, on the address and port its cluster gives it, and that the port is "
        f"open between them"
    )
    return log.fail(str(error), error.exit_code)


if __name__ == "__main__":
    sys.exit(watch(float(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])))
