"""pipeline/training/cluster.py: which cluster a process is a worker of, TF_CONFIG checked as TensorFlow
will read it, and Slurm's variables."""

import json

import pytest
from helpers import run_python


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
