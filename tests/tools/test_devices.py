"""pipeline/tools/devices.py: `pipeline devices` on the repository's params, as text and as JSON."""

import pytest
from support.processes import child_json, run_pipeline

from pipeline.tools import devices


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


def test_the_text_report_has_a_line_per_device():
    report = {
        "physical": [{"name": "/physical_device:GPU:0", "type": "GPU"}],
        "logical": [{"name": "/device:GPU:0", "type": "GPU"}, {"name": "/device:GPU:1", "type": "GPU"}],
        "strategy": "MirroredStrategy",
        "replicas": 2,
        "workers": 1,
        "devices": ["/device:GPU:0", "/device:GPU:1"],
        "cross_device_ops": "NcclAllReduce",
    }
    assert devices.as_text(report).splitlines() == [
        "physical devices:",
        "  /physical_device:GPU:0 (GPU)",
        "logical devices:",
        "  /device:GPU:0 (GPU)",
        "  /device:GPU:1 (GPU)",
        "strategy: MirroredStrategy, 2 replica(s), 1 worker(s), on /device:GPU:0, /device:GPU:1",
        "all-reduce: NcclAllReduce",
    ]
