"""Device configuration and strategies; each case runs in its own process (tensorflow#61314)."""

import json

import pytest

from conftest import run_pipeline, write_params

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def devices_json(tmp_path, **overrides):
    write_params(tmp_path, {f"train.reuters.{k}": v for k, v in overrides.items()})
    result = run_pipeline("devices", "--dataset", "reuters", "--json", cwd=tmp_path)
    return result


def test_two_logical_cpu_devices_give_two_replicas(tmp_path):
    result = devices_json(tmp_path, **{"devices.logical_devices": 2})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["strategy"] == "MirroredStrategy"
    assert report["replicas"] == 2
    assert report["logical_devices"] == 2 and report["physical_gpus"] == 0
    assert report["workers"] == 1
    assert [d["name"] for d in report["logical"] if d["type"] == "CPU"] == [
        "/device:CPU:0", "/device:CPU:1"]


def test_one_device_strategy(tmp_path):
    result = devices_json(tmp_path, strategy="one_device", **{"devices.logical_devices": 2})
    report = json.loads(result.stdout)
    assert (report["strategy"], report["replicas"]) == ("OneDeviceStrategy", 1)


def test_default_strategy_without_params():
    result = run_pipeline("devices")
    assert result.returncode == 0, result.stderr
    assert "strategy: MirroredStrategy, 1 replica(s), 1 worker(s)" in result.stdout
    assert "all-reduce: " in result.stdout


def test_gpus_the_host_does_not_have(tmp_path):
    result = devices_json(tmp_path, **{"devices.visible_gpus": [0, 2]})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: train.reuters.devices.visible_gpus: asked for GPU 0, 2, but this host has 0 GPUs")


def test_memory_limit_without_a_gpu(tmp_path):
    result = devices_json(tmp_path, **{"devices.memory_limit_mb": 1024})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: train.reuters.devices.memory_limit_mb: set to 1024, but there is no visible GPU to limit")


def test_logical_devices_out_of_range_is_a_config_error(tmp_path):
    result = devices_json(tmp_path, **{"devices.logical_devices": 0})
    assert result.returncode == 2
    assert "train.reuters.devices.logical_devices: expected a positive integer or null, got 0" in result.stderr


def test_all_reduce_choice_is_reported(tmp_path):
    report = json.loads(devices_json(tmp_path, cross_device_ops="reduction_to_one_device",
                                     **{"devices.logical_devices": 2}).stdout)
    assert report["cross_device_ops"] == "ReductionToOneDevice"
    report = json.loads(devices_json(tmp_path, **{"devices.logical_devices": 2}).stdout)
    assert report["cross_device_ops"].startswith("CollectiveAllReduce")  # TensorFlow's pick on CPUs


def test_nccl_needs_gpus(tmp_path):
    result = devices_json(tmp_path, cross_device_ops="nccl", **{"devices.logical_devices": 2})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: train.reuters.cross_device_ops: nccl needs GPUs, but the replicas are on CPUs")


def test_explicit_device_list(tmp_path):
    report = json.loads(devices_json(tmp_path, **{"devices.logical_devices": 3,
                                                  "devices.device_list": ["/cpu:0", "/cpu:2"]}).stdout)
    assert report["replicas"] == 2
    assert [d.split("/")[-1] for d in report["devices"]] == ["device:CPU:0", "device:CPU:2"]


def test_device_list_naming_a_missing_device(tmp_path):
    result = devices_json(tmp_path, **{"devices.logical_devices": 2, "devices.device_list": ["/gpu:0"]})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: train.reuters.devices.device_list: no device '/gpu:0' on this host; "
        "it has /device:CPU:0, /device:CPU:1")


def test_cluster_detection():
    from pipeline.distribute import detect_cluster

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


def test_xla_across_logical_cpu_devices_is_a_config_error(tmp_path):
    result = devices_json(tmp_path, jit_compile=True, **{"devices.logical_devices": 2})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: train.reuters.jit_compile: XLA cannot compile a step across 2 logical CPU devices; "
        "use one replica, or GPUs")


def test_steps_per_execution_on_replicas_is_a_config_error(tmp_path):
    result = devices_json(tmp_path, steps_per_execution=4, **{"devices.logical_devices": 2})
    assert result.returncode == 2
    assert "train.reuters.steps_per_execution: Keras 3 fit fails with steps_per_execution > 1" in result.stderr
    report = json.loads(devices_json(tmp_path, steps_per_execution=4, loop="custom",
                                     **{"devices.logical_devices": 2}).stdout)
    assert report["replicas"] == 2


def test_slurm_tasks_per_node_forms():
    from pipeline.distribute import _tasks_per_node

    assert _tasks_per_node({"SLURM_STEP_TASKS_PER_NODE": "2(x3),1"}) == 2
    assert _tasks_per_node({"SLURM_TASKS_PER_NODE": "4"}) == 4
    assert _tasks_per_node({}) == 1
