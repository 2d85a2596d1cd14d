"""pipeline/tools/devices.py: the text report, a line per device (`pipeline devices` itself:
tests/commands/test_devices_command.py)."""

from pipeline.tools import devices


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
