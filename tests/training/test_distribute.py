"""Device configuration and strategies; each case runs in its own process (tensorflow#61314)."""

import pytest
from support.processes import child_json, run_command, run_pipeline, run_python, subprocess_env, train_args
from support.project import write_params

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def devices_json(tmp_path, **overrides):
    write_params(tmp_path, {f"train.reuters.{k}": v for k, v in overrides.items()})
    result = run_pipeline("devices", "--dataset", "reuters", "--json", cwd=tmp_path)
    return result


def test_two_logical_cpu_devices_give_two_replicas(tmp_path):
    result = devices_json(tmp_path, **{"devices.logical_devices": 2})
    assert result.returncode == 0, result.stderr
    report = child_json(result)
    assert report["strategy"] == "MirroredStrategy"
    assert report["replicas"] == 2
    assert report["logical_devices"] == 2 and report["physical_gpus"] == 0
    assert report["workers"] == 1
    assert [d["name"] for d in report["logical"] if d["type"] == "CPU"] == ["/device:CPU:0", "/device:CPU:1"]


def test_one_device_strategy(tmp_path):
    result = devices_json(tmp_path, strategy="one_device", **{"devices.logical_devices": 2})
    report = child_json(result)
    assert (report["strategy"], report["replicas"]) == ("OneDeviceStrategy", 1)


def test_auto_on_one_device_distributes_nothing_and_on_two_mirrors(tmp_path):
    # one device: TensorFlow's default strategy (a one-replica MirroredStrategy is 2x slower)
    one = child_json(devices_json(tmp_path))
    assert (one["strategy"], one["replicas"], one["devices"]) == ("DefaultStrategy", 1, ["/device:CPU:0"])
    # one device that is not the default one: placed there, not on the default device
    picked = child_json(devices_json(tmp_path, **{"devices.logical_devices": 2, "devices.device_list": ["/cpu:1"]}))
    assert (picked["strategy"], picked["devices"]) == (
        "OneDeviceStrategy",
        ["/job:localhost/replica:0/task:0/device:CPU:1"],
    )
    two = child_json(devices_json(tmp_path, **{"devices.logical_devices": 2}))
    assert (two["strategy"], two["replicas"]) == ("MirroredStrategy", 2)


TWO_WORKERS = '{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}}'
TRAIN = [
    *train_args(model_dir="m"),
]


@pytest.mark.parametrize(
    "args,overrides,env,code,message",
    [
        (
            ["devices", "--dataset", "reuters"],
            {"devices.visible_gpus": [0, 2]},
            {},
            2,
            "train.reuters.devices.visible_gpus: asked for GPU 0, 2, but this host has 0 GPUs",
        ),
        (
            ["devices", "--dataset", "reuters"],
            {"devices.memory_limit_mb": 1024},
            {},
            2,
            "train.reuters.devices.memory_limit_mb: set to 1024, but there is no visible GPU to limit",
        ),
        (
            ["bench", "reuters", "-S", "train.reuters.devices.visible_gpus=[1]"],
            {},
            {},
            2,
            "train.reuters.devices.visible_gpus: asked for GPU 1, but this host has 0 GPUs",
        ),
        (
            TRAIN,
            {},
            {"TF_CONFIG": TWO_WORKERS},
            2,
            "train.reuters.loop: Keras 3 fit does not run under MultiWorkerMirroredStrategy (keras-team/keras#20585); "
            "set train.reuters.loop to custom",
        ),
        (
            TRAIN,
            {"strategy": "multi_worker", "loop": "custom"},
            {},
            2,
            "train.reuters.strategy: multi_worker needs a cluster: set TF_CONFIG with two or more workers, "
            "or run under "
            "Slurm with two or more tasks",
        ),
        (TRAIN, {}, {}, 1, "prepared/stats.json: missing; run the preprocess stage first"),
        (
            ["devices", "--dataset", "reuters"],
            {"cross_device_ops": "nccl", "devices.logical_devices": 2},
            {},
            2,
            "train.reuters.cross_device_ops: nccl needs GPUs, but the replicas are on CPUs",
        ),
        (
            ["devices", "--dataset", "reuters"],
            {"jit_compile": True, "devices.logical_devices": 2},
            {},
            2,
            "train.reuters.jit_compile: XLA cannot compile a step across 2 logical CPU devices; "
            "use one replica, or GPUs",
        ),
        (
            TRAIN,
            {"steps_per_execution": 4, "devices.logical_devices": 2},
            {},
            2,
            "train.reuters.steps_per_execution: Keras 3 fit fails with steps_per_execution > 1 "
            "on more than one replica "
            "(keras-team/keras#19246); use 1, or loop: custom",
        ),
    ],
    ids=[
        "gpus-the-host-lacks",
        "memory-limit-without-a-gpu",
        "bench",
        "fit-on-a-cluster",
        "multi-worker-alone",
        "no-data",
        "nccl-on-cpus",
        "xla-across-cpus",
        "steps-per-execution-on-replicas",
    ],
)
def test_what_needs_no_tensorflow_stops_a_command_before_its_import(tmp_path, args, overrides, env, code, message):
    """Config and data errors that need no device list are found in a moment: before TensorFlow's
    import (about ten seconds), in a process that can see no GPU (CUDA_VISIBLE_DEVICES=-1). The
    multi-worker cases were tests/scenarios/test_multiworker.py's, which started TensorFlow for them."""
    write_params(tmp_path, {f"train.reuters.{k}": v for k, v in overrides.items()})
    result, exit_code, imported = run_command(args, cwd=tmp_path, env=subprocess_env(**env))
    assert (exit_code, "tensorflow" in imported) == (code, False), result.stderr
    assert result.stderr == f"error: {message}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["params.yaml"]  # nothing written


def test_a_process_sees_no_gpu_when_cuda_hides_them_or_the_host_has_no_gpu_node(tmp_path, monkeypatch):
    from pipeline.training import distribute

    node = tmp_path / "nvidia0"
    monkeypatch.setattr(distribute, "GPU_DEVICE_NODES", (str(tmp_path / "nvidia[0-9]*"),))
    assert distribute.no_gpu_without_tensorflow({}) is True  # no node
    node.touch()
    assert distribute.no_gpu_without_tensorflow({}) is False  # only TensorFlow can tell
    assert distribute.no_gpu_without_tensorflow({"CUDA_VISIBLE_DEVICES": "0"}) is False
    for hidden in ("-1", "", " ", "-1,0"):
        assert distribute.no_gpu_without_tensorflow({"CUDA_VISIBLE_DEVICES": hidden}) is True


def test_logical_devices_out_of_range_is_a_config_error(tmp_path):
    result = devices_json(tmp_path, **{"devices.logical_devices": 0})
    assert result.returncode == 2
    assert "train.reuters.devices.logical_devices: expected a positive integer or null, got 0" in result.stderr


def test_all_reduce_choice_is_reported(tmp_path):
    report = child_json(
        devices_json(tmp_path, cross_device_ops="reduction_to_one_device", **{"devices.logical_devices": 2})
    )
    assert report["cross_device_ops"] == "ReductionToOneDevice"
    report = child_json(devices_json(tmp_path, **{"devices.logical_devices": 2}))
    assert report["cross_device_ops"].startswith("CollectiveAllReduce")  # TensorFlow's pick on CPUs


def test_explicit_device_list(tmp_path):
    report = child_json(
        devices_json(tmp_path, **{"devices.logical_devices": 3, "devices.device_list": ["/cpu:0", "/cpu:2"]})
    )
    assert report["replicas"] == 2
    assert [d.split("/")[-1] for d in report["devices"]] == ["device:CPU:0", "device:CPU:2"]


def test_device_list_naming_a_missing_device(tmp_path):
    result = devices_json(tmp_path, **{"devices.logical_devices": 2, "devices.device_list": ["/gpu:0"]})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: train.reuters.devices.device_list: no device '/gpu:0' on this host; it has /device:CPU:0, /device:CPU:1"
    )


def test_steps_per_execution_on_replicas_is_for_the_custom_loop(tmp_path):
    # with fit, a config error: test_what_needs_no_tensorflow_stops_a_command_before_its_import
    report = child_json(devices_json(tmp_path, steps_per_execution=4, loop="custom", **{"devices.logical_devices": 2}))
    assert report["replicas"] == 2


# The checks made before TensorFlow is touched take the host's GPU count, so that the GPU
# cases are tested on any host; the same cases on real GPUs are marked `gpu`.


def reuters_devices(**changes):
    import dataclasses

    from support.project import ROOT

    from pipeline.config.loading.loader import load_params

    cfg = load_params(ROOT / "params.yaml", "reuters").train
    return dataclasses.replace(cfg.devices, **changes)


def test_a_gpu_split_needs_a_memory_limit():
    from pipeline.errors import ConfigError
    from pipeline.training.distribute import check_devices

    with pytest.raises(ConfigError) as caught:
        check_devices(reuters_devices(logical_devices=2), gpus=2, where="train.reuters.devices")
    assert str(caught.value) == (
        "train.reuters.devices.logical_devices: splitting a GPU into 2 devices needs "
        "train.reuters.devices.memory_limit_mb (the memory of each logical device)"
    )
    check_devices(reuters_devices(logical_devices=2, memory_limit_mb=1024), gpus=2, where="train.reuters.devices")
    check_devices(reuters_devices(logical_devices=2), gpus=0, where="train.reuters.devices")  # CPUs split freely


def test_nccl_on_split_gpus():
    from pipeline.errors import ConfigError
    from pipeline.training.distribute import _cross_device_ops

    with pytest.raises(ConfigError) as caught:
        _cross_device_ops("nccl", 1, on_gpus=True, count=2, virtual=True, where="train.reuters")
    assert str(caught.value) == "train.reuters.cross_device_ops: nccl does not work on virtual (split) GPUs"
    # auto picks no NCCL there: TensorFlow's default all-reduce
    assert _cross_device_ops("auto", 1, on_gpus=True, count=2, virtual=True, where="train.reuters") is None


def configure_two_logical_devices(before: str):
    """Run `before`, then configure_devices with two logical devices, in a fresh process;
    the ConfigError's message is the process's stdout."""
    return run_python(
        "import tensorflow as tf, dataclasses\n"
        "from pipeline.config.loading.loader import load_params\n"
        "from pipeline.training.distribute import configure_devices\n"
        "from pipeline.errors import ConfigError\n"
        f"{before}\n"
        "d = dataclasses.replace(load_params('params.yaml', 'reuters').train.devices, logical_devices=2)\n"
        "try:\n"
        "    configure_devices(d, where='train.reuters.devices')\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )


def test_device_settings_after_tensorflow_started():
    result = configure_two_logical_devices("tf.config.list_logical_devices()  # starts the runtime")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "train.reuters.devices: cannot apply device settings after TensorFlow has started: "
    )


def test_a_host_that_cannot_provide_the_devices():
    # No CPU-only host refuses a logical split, so TensorFlow's refusal (a ValueError, as for a
    # GPU asked for more memory than it has) is raised by a stand-in for its set-up call.
    result = configure_two_logical_devices(
        "def refuse(*a, **k):\n"
        "    raise ValueError('Virtual devices are not supported for this device')\n"
        "tf.config.set_logical_device_configuration = refuse"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "train.reuters.devices: this host cannot provide the devices asked for: "
        "Virtual devices are not supported for this device"
    )


def has_gpus(n):
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return False
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return listed.returncode == 0 and len(listed.stdout.splitlines()) >= n


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpus(1), reason="needs a GPU host (nvidia-smi lists none here)")
def test_on_a_gpu_a_split_needs_a_memory_limit(tmp_path):
    write_params(tmp_path, {"train.reuters.devices.logical_devices": 2})
    result = run_pipeline("devices", "--json", cwd=tmp_path, env=subprocess_env(CUDA_VISIBLE_DEVICES="0"))
    assert result.returncode == 2
    assert "train.reuters.devices.logical_devices: splitting a GPU into 2 devices needs" in result.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpus(1), reason="needs a GPU host (nvidia-smi lists none here)")
def test_on_a_gpu_nccl_on_split_gpus(tmp_path):
    write_params(
        tmp_path,
        {
            "train.reuters.devices.logical_devices": 2,
            "train.reuters.cross_device_ops": "nccl",
            "train.reuters.devices.memory_limit_mb": 512,
        },
    )
    result = run_pipeline("devices", "--json", cwd=tmp_path, env=subprocess_env(CUDA_VISIBLE_DEVICES="0"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: train.reuters.cross_device_ops: nccl does not work on virtual (split) GPUs"
    )


def test_a_task_outside_the_cluster_stops_the_stage_in_one_line(tmp_path):
    write_params(tmp_path)
    config = '{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, "task": {"type": "worker", "index": 5}}'
    result = run_pipeline("devices", cwd=tmp_path, env=subprocess_env(TF_CONFIG=config))
    assert result.returncode == 2
    assert result.stderr == "error: TF_CONFIG: task.index: expected 0 to 1 (the worker job has 2 hosts), got 5\n"


def test_the_replicas_each_strategy_name_plans():
    from pipeline.training.distribute import plan_replicas

    cpus = ["/device:CPU:0", "/device:CPU:1"]
    gpus = ["/device:GPU:0", "/device:GPU:1"]
    assert plan_replicas("auto", [], cpus[:1], None) == ("default", cpus[:1])
    assert plan_replicas("auto", [], cpus, ["/device:CPU:1"]) == ("one_device", ["/device:CPU:1"])
    assert plan_replicas("auto", [], cpus, None) == ("mirrored", cpus)
    assert plan_replicas("auto", gpus, cpus, None) == ("mirrored", gpus)  # GPUs first, the CPU left out
    assert plan_replicas("mirrored", [], cpus[:1], None) == ("mirrored", cpus[:1])
    assert plan_replicas("one_device", gpus, cpus, None) == ("one_device", gpus[:1])
    assert plan_replicas("default", [], cpus, None) == ("default", cpus[:1])
