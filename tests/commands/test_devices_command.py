"""`pipeline devices` (pipeline/commands/devices.py) on the repository's params: the first
dataset's train params by default, another's with --dataset; as text and as JSON."""

import pytest
from support.processes import child_json, run_pipeline


@pytest.mark.slow
def test_devices_reads_the_shipped_params():
    result = run_pipeline("devices")  # the repository's params.yaml, the first dataset's train params
    assert result.returncode == 0, result.stderr
    assert "strategy: DefaultStrategy, 1 replica(s), 1 worker(s), on /device:CPU:0" in result.stdout
    assert "all-reduce: none" in result.stdout


@pytest.mark.slow
def test_the_json_report_lists_the_devices_and_the_strategy():
    result = run_pipeline("devices", "--dataset", "mnist", "--json")
    assert result.returncode == 0, result.stderr
    report = child_json(result)
    assert {"name": "/physical_device:CPU:0", "type": "CPU"} in report["physical"]
    assert {"name": "/device:CPU:0", "type": "CPU"} in report["logical"]
    assert (report["strategy"], report["replicas"], report["workers"]) == ("DefaultStrategy", 1, 1)
