"""pipeline/training/cluster.py: which cluster a process is a worker of, TF_CONFIG checked as TensorFlow
will read it, and Slurm's variables."""

import json

import pytest
from support.processes import run_python
from support.servers import free_ports


def test_cluster_detection():
    from pipeline.training.cluster import detect_cluster

    two = json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}})
    one = json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}})
    assert detect_cluster({"TF_CONFIG": two}) == "tf_config"
    assert detect_cluster({"TF_CONFIG": one}) is None
    assert detect_cluster({"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_STEP_NUM_TASKS": "4"}) == "slurm"
    # a batch script outside srun (seen under Slurm 22.05): one process, not a cluster
    assert detect_cluster({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}) is None
    assert detect_cluster({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1"}) is None
    assert detect_cluster({}) is None
    with pytest.raises(Exception, match="TF_CONFIG: not valid JSON"):
        detect_cluster({"TF_CONFIG": "{worker"})


def test_slurm_tasks_per_node_forms():
    from pipeline.training.cluster import _tasks_per_node

    assert _tasks_per_node({"SLURM_STEP_TASKS_PER_NODE": "2(x3),1"}) == 2
    assert _tasks_per_node({"SLURM_TASKS_PER_NODE": "4"}) == 4
    assert _tasks_per_node({}) == 1


def test_slurm_variables_that_make_no_cluster():
    # SlurmClusterResolver reads the task's rank from the environment; outside a job step it has none.
    result = run_python(
        "from pipeline.training.cluster import slurm_resolver\n"
        "from pipeline.training.distribute import DeviceInfo\n"
        "from pipeline.errors import ConfigError\n"
        "try:\n"
        "    slurm_resolver(DeviceInfo(0, 0, 0, 1), 'train.reuters', 8888)\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "train.reuters.strategy: cannot build the cluster from Slurm's variables (1 task(s) per node, 0 GPU(s)): "
    ), result.stdout


@pytest.mark.parametrize(
    "tf_config,message",
    [
        (
            '["worker"]',
            'TF_CONFIG: no cluster: expected {"cluster": {"worker": ["host:port", ...]}, '
            '"task": {"type": "worker", "index": 0}}',
        ),
        ('{"cluster": {}}', "TF_CONFIG: no cluster: "),
        (
            '{"cluster": {"worker": "a:1,b:2"}, "task": {"type": "worker", "index": 0}}',
            'TF_CONFIG: cluster.worker: expected a list of "host:port", got "a:1,b:2"',
        ),
        (
            '{"cluster": {"worker": ["a:1", "b:2"]}}',
            "TF_CONFIG: task: expected a type among worker and an index, got null",
        ),
        (
            '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "chief", "index": 0}}',
            'TF_CONFIG: task: expected a type among worker and an index, got {"type": "chief", "index": 0}',
        ),
        (
            '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}}',
            "TF_CONFIG: task.index: expected 0 to 1 (the worker job has 2 hosts), got 2",
        ),
        (
            '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": "1"}}',
            'TF_CONFIG: task.index: expected 0 to 1 (the worker job has 2 hosts), got "1"',
        ),
    ],
)
def test_a_tf_config_that_is_json_but_not_a_cluster_is_a_config_error(tf_config, message):
    from pipeline.errors import ConfigError
    from pipeline.training.cluster import detect_cluster

    with pytest.raises(ConfigError) as caught:
        detect_cluster({"TF_CONFIG": tf_config})
    assert str(caught.value).startswith(message)


# --- a peer lost, or never reached -------------------------------------------------------------


class _Strategy:
    """What peers_watched reads of a strategy: its cluster resolver (TensorFlow's own)."""

    def __init__(self, resolver):
        self.cluster_resolver = resolver


def two_workers(ports, index=0):
    import tensorflow as tf

    spec = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{p}" for p in ports]})
    return tf.distribute.cluster_resolver.SimpleClusterResolver(spec, task_type="worker", task_id=index)


def test_a_collective_failed_by_a_lost_peer_is_one_line_naming_it():
    """TensorFlow's errors as a survivor meets them (the message of a real one, trimmed): the
    peer named by task, by address, or else found by connecting; other errors pass through."""
    import tensorflow as tf

    from pipeline.errors import ClusterError
    from pipeline.training.cluster import peers_watched

    ports = free_ports(3)
    strategy = _Strategy(two_workers(ports[:2]))
    by_task = (
        "Graph execution error: Detected at node allgather/CollectiveGatherV2 ... Collective ops is aborted by: "
        f"failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:{ports[1]}: Failed to connect "
        "to remote host: Connection refused Additional GRPC error information from remote target "
        "/job:worker/replica:0/task:1 while calling /tensorflow.WorkerService/RecvBuf"
    )
    for message in (by_task, by_task.replace("/job:worker/replica:0/task:1", "the peer"), "Socket closed"):
        with pytest.raises(ClusterError) as caught, peers_watched(strategy, resume="RESUME"):
            raise tf.errors.UnavailableError(None, None, message)
        reason = "socket closed" if message == "Socket closed" else "connection refused"
        assert str(caught.value) == f"lost worker-1 (127.0.0.1:{ports[1]}) mid-training: {reason}; RESUME"
    with pytest.raises(ClusterError, match=r"^lost worker-1 \(.*\) mid-training: aborted; RESUME$"):
        with peers_watched(strategy, resume="RESUME"):
            raise tf.errors.AbortedError(None, None, "aborted")
    with pytest.raises(tf.errors.InvalidArgumentError), peers_watched(strategy, resume="RESUME"):
        raise tf.errors.InvalidArgumentError(None, None, "a bug's")
    with pytest.raises(tf.errors.UnavailableError), peers_watched(_Strategy(None), resume="RESUME"):
        raise tf.errors.UnavailableError(None, None, "one host: not a peer's")


def test_the_start_watch_names_the_workers_that_do_not_answer(tmp_path):
    """`bounded_start`'s watching process: quiet when its parent closes the pipe in time; else
    one line naming the workers whose port refuses (all of them when every port answers)."""
    import socket
    import subprocess
    import sys

    from support.processes import subprocess_env
    from support.project import ROOT

    listening = socket.create_server(("127.0.0.1", 0))
    closed = free_ports(1)[0]
    others = {"worker-1": f"127.0.0.1:{listening.getsockname()[1]}", "worker-2": f"127.0.0.1:{closed}"}

    def watch(seconds, others, close):
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.training.cluster", str(seconds), "train.reuters", json.dumps(others)],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=subprocess_env(),
        )
        if close:  # the strategy built: the parent closes the pipe
            _, err = proc.communicate(timeout=60)
            return proc.returncode, err
        assert proc.stdin is not None and proc.stderr is not None
        err = proc.stderr.read()  # the pipe left open: the parent still waits inside TensorFlow
        code = proc.wait(timeout=60)
        proc.stdin.close()
        return code, err

    assert watch(30, others, close=True) == (0, "")
    code, err = watch(0.5, others, close=False)
    advice = "; check that every worker is started, on the address and port its cluster gives it, and that the "
    assert (code, err) == (
        1,
        f"error: train.reuters: waited 0.5 s (cluster_wait_seconds) for worker-2 (127.0.0.1:{closed}) to answer"
        f"{advice}port is open between them\n",
    )
    code, err = watch(0.5, {"worker-1": others["worker-1"]}, close=False)
    assert code == 1 and f"for worker-1 ({others['worker-1']}) to answer" in err
    listening.close()


def test_what_resumes_a_lost_run_is_said():
    from pathlib import Path

    from pipeline.training.lifecycle import resume_hint

    assert resume_hint(Path("backup"), env={}) == (
        "the stage run again on every worker resumes it from the backup of its last finished epoch (backup)"
    )
    assert resume_hint(None, env={"SLURM_JOB_ID": "7"}) == (
        "the job's requeue (sbatch --requeue) or the stage run again starts the training over (no --backup-dir)"
    )
