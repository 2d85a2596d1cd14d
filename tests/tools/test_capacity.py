"""pipeline.tools.capacity: FLOPs counted from a model, and the peak of a CPU (from the files Linux
gives) or of a GPU (from its name)."""

import pytest

from pipeline.tools import capacity

pytestmark = pytest.mark.slow  # the FLOP counts import TensorFlow


def test_forward_flops_are_the_layers_arithmetic_for_one_sample():
    import keras
    import tensorflow as tf

    dense = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    assert capacity.forward_flops(dense, tf.TensorSpec([None, 4])) == 2 * 4 * 3 + 3  # products and bias
    conv = keras.Sequential([keras.Input((10, 2)), keras.layers.Conv1D(5, 3)])
    assert capacity.forward_flops(conv, tf.TensorSpec([None, 10, 2])) == 2 * 8 * 3 * 2 * 5 + 8 * 5
    depthwise = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.DepthwiseConv2D(3, use_bias=False)])
    assert capacity.forward_flops(depthwise, tf.TensorSpec([32, 8, 8, 3])) == 2 * 6 * 6 * 3 * 9  # per sample
    assert capacity.training_flops(dense, tf.TensorSpec([None, 4])) == 3 * 27


def found(peak: capacity.Peak | None) -> capacity.Peak:
    """`peak`, which the test expects there to be."""
    assert peak is not None, "no peak"
    return peak


def cpu_files(tmp_path, flags, *, siblings=2, cores=2, mhz="2445.404", max_khz=None, quota=None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    info = tmp_path / "cpuinfo"
    lines = [
        "processor\t: 0",
        "model name\t: Some CPU",
        f"siblings\t: {siblings}",
        f"cpu cores\t: {cores}",
        f"flags\t\t: fpu sse sse2 {flags}",
    ]
    if mhz:
        lines.insert(2, f"cpu MHz\t\t: {mhz}")
    info.write_text("\n".join(lines) + "\n\nprocessor\t: 1\nflags\t\t: nothing\n")
    sysfs = tmp_path / "sys"
    if max_khz:
        (sysfs / "cpu0" / "cpufreq").mkdir(parents=True)
        (sysfs / "cpu0" / "cpufreq" / "cpuinfo_max_freq").write_text(f"{max_khz}\n")
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    if quota:
        (cgroup / "cpu.max").write_text(quota)
    return {"cpuinfo": info, "sysfs": sysfs, "cgroup": cgroup}


def test_an_avx2_cpu_peak_is_cores_clock_lanes_and_two_fma_units(tmp_path):
    peak = capacity.cpu_peak(**cpu_files(tmp_path, "avx avx2 fma"), logical=2)
    assert peak is not None
    assert peak.gflops == pytest.approx(2 * 2.445404 * 8 * 2 * 2)
    assert peak.how == "2 cores x 2.45 GHz (clock) x AVX2: 8 fp32 lanes x 2 FMA units x 2"


def test_hyperthreads_share_a_core_and_a_quota_caps_the_cores(tmp_path):
    files = cpu_files(tmp_path, "avx2 fma avx512f", siblings=8, cores=4, max_khz=3_500_000)
    peak = capacity.cpu_peak(**files, logical=8)  # 8 threads of 4 cores, AVX-512, the kernel's max clock
    assert peak is not None
    assert peak.gflops == pytest.approx(4 * 3.5 * 16 * 2 * 2)
    assert peak.how.startswith("4 cores x 3.50 GHz (max clock) x AVX-512: 16 fp32 lanes")
    (files["cgroup"] / "cpu.max").write_text("150000 100000\n")  # docker run --cpus 1.5
    assert found(capacity.cpu_peak(**files, logical=8)).gflops == pytest.approx(2 * 3.5 * 16 * 2 * 2)
    (files["cgroup"] / "cpu.max").write_text("max 100000\n")
    assert found(capacity.cpu_peak(**files, logical=8)).gflops == pytest.approx(4 * 3.5 * 16 * 2 * 2)


def test_bfloat16_uses_amx_or_avx512_bf16_where_the_cpu_has_them(tmp_path):
    amx = cpu_files(tmp_path / "a", "avx2 fma avx512f avx512_bf16 amx_bf16", siblings=1, cores=1)
    assert found(capacity.cpu_peak("mixed_bfloat16", **amx, logical=1)).gflops == pytest.approx(2.445404 * 2048)
    assert found(capacity.cpu_peak("float32", **amx, logical=1)).gflops == pytest.approx(2.445404 * 64)
    plain = cpu_files(tmp_path / "b", "avx2 fma", siblings=1, cores=1)  # bf16 emulated: the fp32 units
    assert found(capacity.cpu_peak("mixed_bfloat16", **plain, logical=1)).gflops == pytest.approx(2.445404 * 32)


def test_no_peak_where_the_vector_units_or_the_clock_are_unknown(tmp_path):
    arm = cpu_files(tmp_path / "arm", "asimd")
    arm["cpuinfo"].write_text(arm["cpuinfo"].read_text().replace("fpu sse sse2 ", ""))
    assert capacity.cpu_peak(**arm, logical=2) is None
    assert capacity.cpu_peak(**cpu_files(tmp_path, "avx2 fma", mhz=None), logical=2) is None
    assert capacity.cpu_peak(cpuinfo=tmp_path / "absent", logical=2) is None
    no_fma = capacity.cpu_peak(**cpu_files(tmp_path / "x", "avx2", siblings=1, cores=1), logical=1)
    assert no_fma is not None
    assert no_fma.gflops == pytest.approx(2.445404 * 8 * 2) and "no FMA" in no_fma.how


@pytest.mark.parametrize(
    "name, precision, tflops",
    [
        ("NVIDIA A100-SXM4-80GB", "float32", 156.0),  # TF32, TensorFlow's default for float32
        ("NVIDIA A100-SXM4-80GB", "mixed_bfloat16", 312.0),
        ("NVIDIA A10G", "float32", 62.5),
        ("NVIDIA A10", "mixed_float16", 125.0),
        ("NVIDIA H100 80GB HBM3", "float32", 494.7),
        ("NVIDIA H100 PCIe", "float32", 378.0),
        ("Tesla T4", "float32", 8.1),
        ("Tesla V100-SXM2-16GB", "mixed_float16", 125.0),
        ("Tesla V100-PCIE-16GB", "float32", 14.0),  # the PCIe part
        ("Tesla V100-SXM2-16GB", "mixed_bfloat16", 15.7),  # no bf16 tensor cores
        ("NVIDIA L4", "float32", 60.0),
    ],
)
def test_a_gpu_peak_comes_from_its_name(name, precision, tflops):
    assert found(capacity.gpu_peak(name, precision)).gflops == pytest.approx(tflops * 1000)


def test_float32_without_tf32_and_unknown_gpus():
    assert found(capacity.gpu_peak("NVIDIA A100-SXM4-80GB", tf32=False)).gflops == pytest.approx(19_500)
    assert capacity.gpu_peak("NVIDIA GeForce GTX 1080") is None
