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
