"""How much arithmetic a training step is, and how much the machine can do: the model's FLOPs
per training sample and the peak FLOP/s of the devices that train it, so that a measured
throughput (`pipeline bench`) carries its own fraction of the machine.

FLOPs are counted once from the model: TensorFlow's own per-op counts (its graph profiler:
convolutions, matrix products, bias additions, poolings) over one forward pass of one sample,
times 3 for a training step (the backward pass computes two products per forward one: the
gradient for the layer's input and the one for its weights; the usual convention).

A CPU's peak is cores x clock x fp32 lanes x 2 (a fused multiply-add is two operations) x FMA
units per core:
- cores: the physical cores this process may use (its CPU affinity and a container's CPU
  quota; two hyperthreads of one core share its vector units);
- clock: the highest the kernel reports (`cpuinfo_max_freq`), else `cpu MHz` of /proc/cpuinfo
  (on a virtual machine, the host's nominal clock);
- lanes: 16 with AVX-512, 8 with AVX2, 4 with SSE;
- FMA units: 2 on x86 cores with FMA (Intel from Haswell on, AMD from Zen 2 on); some parts
  have one (Xeon Bronze and Silver for AVX-512; AMD Zen 1 splits 256-bit operations), so the
  peak is the upper bound these parts can reach. Without FMA, one multiply and one add a cycle.
- bfloat16 (`precision: mixed_bfloat16`): AMX tiles do 1,024 multiply-adds a cycle per core,
  AVX512-BF16 32 per unit.
No peak is given for a CPU whose vector units cannot be told from its flags (ARM, others).

A GPU's peak comes from its name and NVIDIA's datasheets (dense arithmetic, boost clock):
float32 on CUDA cores, TF32 where TensorFlow uses it for float32 (Ampere and later, its
default), 16-bit on tensor cores for mixed precision; an unknown GPU has none.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from pipeline.runtime.environment import cpuinfo_fields

TRAINING_PER_FORWARD = 3


def forward_flops(model, input_spec) -> int:
    """FLOPs of one forward pass of `model` on one sample shaped as `input_spec`'s (a
    tf.TensorSpec of a batch), counted by TensorFlow's graph profiler."""
    import tensorflow as tf
    from tensorflow.python.profiler import model_analyzer, option_builder
    from tensorflow.python.util import deprecation

    spec = tf.TensorSpec([1, *input_spec.shape[1:]], input_spec.dtype)
    graph = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec).graph
    options = (
        option_builder.ProfileOptionBuilder(option_builder.ProfileOptionBuilder.float_operation())
        .with_empty_output()
        .build()
    )
    with deprecation.silence():  # a v1 API: its notice would be the only line it prints
        return int(model_analyzer.profile(graph=graph, options=options).total_float_ops)


def training_flops(model, input_spec) -> int:
    """FLOPs of training one sample: `TRAINING_PER_FORWARD` forward passes' worth."""
    return TRAINING_PER_FORWARD * forward_flops(model, input_spec)


@dataclass(frozen=True)
class Peak:
    """A device's peak: GFLOP/s and how it was reached (one line)."""

    gflops: float
    how: str


# --- CPUs ----------------------------------------------------------------------------------


def _quota_cores(cgroup: Path) -> Optional[float]:
    """A container's CPU quota in cores (cgroup v2 `cpu.max`), None without one."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return int(quota) / int(period)


def _clock_ghz(fields: dict, sysfs: Path) -> tuple[Optional[float], str]:
    try:
        return int((sysfs / "cpu0/cpufreq/cpuinfo_max_freq").read_text()) / 1e6, "max clock"
    except (OSError, ValueError):
        pass
    try:
        return float(fields["cpu MHz"]) / 1000, "clock"
    except (KeyError, ValueError):
        return None, ""


def cpu_peak(
    precision: str = "float32",
    *,
    cpuinfo: Path = Path("/proc/cpuinfo"),
    sysfs: Path = Path("/sys/devices/system/cpu"),
    cgroup: Path = Path("/sys/fs/cgroup"),
    logical: Optional[int] = None,
) -> Optional[Peak]:
    """The CPU's peak for `precision` (see the module's doc), or None where it cannot be known.
    `logical`: the logical CPUs this process may use (default: its affinity)."""
    fields = cpuinfo_fields(cpuinfo)
    flags = set(fields.get("flags", "").split())
    ghz, clock_source = _clock_ghz(fields, sysfs)
    if not flags or ghz is None:
        return None
    if logical is None:
        logical = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        threads_per_core = max(1, int(fields["siblings"]) // int(fields["cpu cores"]))
    except (KeyError, ValueError, ZeroDivisionError):
        threads_per_core = 1
    cores = math.ceil(logical / threads_per_core)
    quota = _quota_cores(cgroup)
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    bf16 = precision == "mixed_bfloat16"
    if bf16 and "amx_bf16" in flags:
        per_cycle, unit = 2 * 1024, "AMX-BF16: 1,024 bf16 multiply-adds x 2"
    elif bf16 and "avx512_bf16" in flags:
        per_cycle, unit = 2 * 32 * 2, "AVX512-BF16: 32 bf16 lanes x 2 FMA units x 2"
    else:
        lanes, name = next(((n, f) for f, n in (("avx512f", 16), ("avx2", 8), ("sse", 4)) if f in flags), (0, ""))
        if not lanes:
            return None
        fma = 2 if "fma" in flags else 1
        what = "FMA units" if "fma" in flags else "no FMA: a multiply and an add"
        per_cycle = lanes * 2 * fma
        unit = f"{name.upper().replace('AVX512F', 'AVX-512')}: {lanes} fp32 lanes x {fma} {what} x 2"
    gflops = cores * ghz * per_cycle
    return Peak(gflops, f"{cores} core{'s' if cores != 1 else ''} x {ghz:.2f} GHz ({clock_source}) x {unit}")


# --- GPUs ----------------------------------------------------------------------------------

# name (as TensorFlow reports it; the first whose words all appear, in any case, wins) -> TFLOP/s dense:
# float32 on CUDA cores, TF32 tensor cores (None before Ampere), 16-bit tensor cores.
GPU_TFLOPS = (
    ("H100 PCIe", 51.0, 378.0, 756.0),
    ("H100", 67.0, 494.7, 989.4),  # SXM5
    ("A100", 19.5, 156.0, 312.0),
    ("A10G", 31.2, 62.5, 125.0),  # AWS' A10
    ("A10", 31.2, 62.5, 125.0),
    ("L40S", 91.6, 183.0, 362.1),
    ("L4", 30.3, 60.0, 121.0),
    ("T4", 8.1, None, 65.0),
    ("V100 PCIe", 14.0, None, 112.0),
    ("V100", 15.7, None, 125.0),  # SXM2
)


def gpu_peak(name: str, precision: str = "float32", *, tf32: bool = True) -> Optional[Peak]:
    """One GPU's peak from its `name` and the table (None: not in it). `tf32`: whether
    TensorFlow runs float32 products as TF32 (its default)."""
    words = name.upper().replace("-", " ").split()
    for model, fp32, tf32_peak, half in GPU_TFLOPS:
        if all(word in words for word in model.upper().split()):
            if precision in ("mixed_float16", "mixed_bfloat16"):
                if model.startswith(("T4", "V100")) and precision == "mixed_bfloat16":
                    return Peak(fp32 * 1000, f"{model}: no bfloat16 tensor cores, float32 {fp32} TFLOP/s")
                return Peak(half * 1000, f"{model}: 16-bit tensor cores, {half} TFLOP/s (NVIDIA's datasheet, dense)")
            if tf32 and tf32_peak:
                return Peak(
                    tf32_peak * 1000, f"{model}: TF32 tensor cores, {tf32_peak} TFLOP/s (NVIDIA's datasheet, dense)"
                )
            return Peak(fp32 * 1000, f"{model}: float32, {fp32} TFLOP/s (NVIDIA's datasheet)")
    return None


def devices_peak(gpu_names: list[str], precision: str) -> Optional[Peak]:
    """The peak of what trains: every GPU used (each must be known), else the CPU."""
    if not gpu_names:
        return cpu_peak(precision)
    import tensorflow as tf

    tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
    peaks = [gpu_peak(name, precision, tf32=tf32) for name in gpu_names]
    known = [p for p in peaks if p is not None]
    if len(known) < len(peaks):
        return None
    return Peak(sum(p.gflops for p in known), f"{len(known)} x {known[0].how}")
