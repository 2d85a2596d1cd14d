"""`pipeline bench`: the training throughput of a dataset's model, on its real input pipeline.

The model, strategy, precision, XLA setting and input pipeline are the train stage's, built by
`trainer.prepare` from the params in force. Warm-up steps run through Keras `fit` (which
builds and traces everything, as the train stage does); then the timed steps run one
execution at a time: `steps_per_execution` batches taken from the iterator (the time the step
waits for its input, measured; full batches only) and handed to one compiled call of Keras' own `train_step`
(the custom loop's step under `loop: custom`). Per execution, the time is taken once the
loss is on the host, so each step's time includes its computation.

With `replicas`, each count is measured in a process of its own (TensorFlow fixes its devices
once per process): N logical CPU devices on a host without GPUs, the first N GPUs otherwise.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from pipeline.config.loading.loader import load_params, overridden, params_of
from pipeline.data.fetch import pretrained_beside
from pipeline.errors import ConfigError
from pipeline.runtime import environment, processes, usage
from pipeline.tools import capacity
from pipeline.tracking import runs
from pipeline.training import distribute

if TYPE_CHECKING:
    from pipeline.config.keys.schema import DatasetParams
    from pipeline.config.keys.training import TrainConfig

# What the table shows, in order: (key, heading, format).
COLUMNS = (
    ("replicas", "replicas", "{:d}"),
    ("samples_per_second", "samples/s", "{:,.0f}"),
    ("samples_per_second_per_replica", "per replica", "{:,.0f}"),
    ("step_ms_median", "step ms p50", "{:.2f}"),
    ("step_ms_p95", "p95", "{:.2f}"),
    ("gflops", "GFLOP/s", "{:,.1f}"),
    ("percent_of_peak", "% of peak", "{:.1f}"),
    ("input_wait_percent", "input wait %", "{:.1f}"),
    ("cpu_percent", "CPU %", "{:.0f}"),
    ("peak_rss_mb", "peak RSS MB", "{:,.0f}"),
)


def measure(params: DatasetParams, *, prepared_dir: Path, warmup: int, steps: int) -> dict:
    """Warm up, then time `steps` training steps of `params.train` on the prepared folder
    `prepared_dir`."""
    cfg = params.train

    setup = distribute.setup(cfg, where=f"train.{params.dataset}")  # before any tensor
    from pipeline.data import prepared as prepared_data
    from pipeline.training import trainer  # TensorFlow: only once it trains

    strategy = setup.strategy
    compiled = trainer.prepare(
        cfg, prepared=prepared_data.read(prepared_dir), strategy=strategy, pretrained=pretrained_beside(prepared_dir)
    )
    batch, dataset = full_batches(compiled)
    model = compiled.model
    flops = capacity.training_flops(model, compiled.train_ds.element_spec[0])
    per_call = cfg.steps_per_execution if cfg.loop == "fit" else 1
    execute = _executor(cfg, model, strategy, dataset, warmup, per_call)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))

    def one_call() -> tuple[float, float]:
        start = time.perf_counter()
        batches = tuple(next(iterator) for _ in range(per_call))
        fed = time.perf_counter()
        loss = execute(batches)
        for value in strategy.experimental_local_results(loss):
            value.numpy()  # wait for the step to finish
        return fed - start, time.perf_counter() - start

    warm_calls = max(1, warmup // per_call)
    for _ in range(warm_calls):  # this loop's own tracing, outside the timing
        one_call()
    calls = max(1, -(-steps // per_call))
    waits, times = [], []
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    for _ in range(calls):
        wait, took = one_call()
        waits.append(wait)
        times.append(took)
    wall = time.perf_counter() - wall_start
    cpu = time.process_time() - cpu_start
    peak = capacity.devices_peak(gpu_names(setup.facts["devices"]), cfg.precision)
    return _figures(
        params,
        setup.facts,
        strategy.num_replicas_in_sync,
        batch=batch,
        per_call=per_call,
        warm_calls=warm_calls,
        waits=waits,
        times=times,
        wall=wall,
        cpu=cpu,
        flops=flops,
        peak=peak,
    )


def full_batches(compiled):
    """(the batch a training step takes, `compiled`'s training batches of that size, repeated).

    Full batches only: the short last batch of each pass has another shape, and in an
    execution of several steps it would retrace the compiled call at each new position. A split
    smaller than the global batch is one batch of its own size, as training takes it.
    """
    import tensorflow as tf

    batch = compiled.step_batch
    return batch, compiled.train_ds.repeat().filter(lambda x, y: tf.shape(y)[0] == batch)


def gpu_names(devices: list[str]) -> list[str]:
    """The names of the GPUs among a strategy's `devices`, one per device; none for CPU devices."""
    names = environment.gpu_names()
    return [names[int(device.rsplit(":", 1)[1]) % len(names)] for device in devices if "GPU:" in device and names]


def _executor(cfg: TrainConfig, model, strategy, dataset, warmup: int, per_call: int):
    """The compiled call that runs `per_call` training steps on a tuple of distributed batches
    and returns the loss: Keras' own train_step (after Keras' own warm-up through `fit`, which
    builds the metrics and optimizer state), or the custom loop's step."""
    import tensorflow as tf

    if cfg.loop != "fit":
        from pipeline.training.custom_loop import (
            CustomLoop,  # TensorFlow: only once it trains
        )

        loop = CustomLoop(model, strategy, jit_compile=cfg.jit_compile)
        return lambda batches: loop.train_step(batches[0])[0]
    model.fit(dataset, steps_per_epoch=max(warmup, per_call), epochs=1, verbose=0, shuffle=False)
    # as Keras compiles one step: strategy.run of train_step, with XLA when asked for
    step = tf.function(lambda batch: strategy.run(model.train_step, args=(batch,)), jit_compile=bool(cfg.jit_compile))

    @tf.function
    def execute(batches):
        for one in batches:
            logs = step(one)
        return logs["loss"]

    return execute


def _figures(
    params: DatasetParams,
    facts: dict,
    replicas: int,
    *,
    batch: int,
    per_call: int,
    warm_calls: int,
    waits: list,
    times: list,
    wall: float,
    cpu: float,
    flops: int,
    peak,
) -> dict:
    """What a measurement reports: its settings, then throughput, arithmetic done against the
    devices' peak (`pipeline.tools.capacity`; none where the peak is unknown), step times, input
    wait, CPU and memory."""
    cfg = params.train
    step_ms = sorted(1000 * t / per_call for t in times)
    calls = len(times)
    samples = batch * per_call * calls
    gflops = samples / wall * flops / 1e9
    return {
        "dataset": params.dataset,
        "model": cfg.model,
        "loop": cfg.loop,
        "strategy": facts["strategy"],
        "replicas": replicas,
        "devices": facts["devices"],
        "precision": cfg.precision,
        "jit_compile": bool(cfg.jit_compile),
        "steps_per_execution": per_call,
        "global_batch_size": batch,
        "warmup_steps": warm_calls * per_call,
        "timed_steps": per_call * calls,
        "seconds": wall,
        "samples_per_second": samples / wall,
        "samples_per_second_per_replica": samples / wall / replicas,
        "flops_per_sample": flops,
        "gflops": gflops,
        "peak_gflops": peak.gflops if peak else None,
        "peak": peak.how if peak else None,
        "percent_of_peak": 100 * gflops / peak.gflops if peak else None,
        "step_ms_median": statistics.median(step_ms),
        "step_ms_p95": step_ms[min(len(step_ms) - 1, int(round(0.95 * (len(step_ms) - 1))))],
        "input_wait_percent": 100 * sum(waits) / wall,
        "cpu_percent": 100 * cpu / wall,
        "peak_rss_mb": usage.peak_rss_mb(),
        "cpu_cores": os.cpu_count(),
    }


def replica_overrides(dataset: str, replicas: int, gpus: int) -> list[str]:
    """The params that give `replicas` replicas: the first N GPUs, or N logical CPU devices."""
    key = f"train.{dataset}"
    if gpus:
        if replicas > gpus:
            raise ConfigError(f"--replicas {replicas}: this host has {gpus} GPU{'s' if gpus != 1 else ''}")
        devices = [f"{key}.devices.visible_gpus={list(range(replicas))}"]
    else:
        devices = [f"{key}.devices.visible_gpus=null", f"{key}.devices.logical_devices={replicas}"]
    # one replica: auto (no distribution); several: MirroredStrategy over them
    return [*devices, f"{key}.strategy={'auto' if replicas == 1 else 'mirrored'}"]


def run(
    params_path: Path,
    dataset: str,
    overrides: Sequence[str],
    *,
    prepared_dir: Path,
    warmup: int,
    steps: int,
    replicas: Optional[str] = None,
    log_runs: bool = True,
) -> list[dict]:
    """`pipeline bench`: one measurement with the params in force, or with `replicas` (`1,2,4`)
    one per replica count, each in a process of its own, with its scaling efficiency. Each
    measurement is an MLflow run in the dataset's experiment unless `log_runs` is false."""
    params = load_params(params_path, dataset, overrides)  # a bad key or value: one line, before any work
    if replicas is None:
        return [_measure_and_log(params, prepared_dir, warmup, steps, log_runs)]
    request = {  # the params as read here, not the file again: each process takes what it is given
        "raw": params.raw,
        "source": str(params_path),
        "dataset": dataset,
        "prepared_dir": str(prepared_dir),
        "warmup": warmup,
        "steps": steps,
        "log_runs": log_runs,
    }
    results = scaling(request, parse_counts(replicas))
    if log_runs:
        runs.log_scaling(results)
    return results


def _measure_and_log(params: DatasetParams, prepared_dir: Path, warmup: int, steps: int, log_runs: bool) -> dict:
    result = measure(params, prepared_dir=prepared_dir, warmup=warmup, steps=steps)
    if log_runs:
        result["mlflow_run_id"] = runs.log_benchmark(params, result, prepared_dir)
    return result


def scaling(request: dict, counts: Sequence[int]) -> list[dict]:
    """The measurement `request` (run's arguments) once per replica count, each in its own
    process (TensorFlow fixes its devices once per process); their results with each one's
    efficiency against the first count."""
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as tmp:
        results = [
            processes.run("pipeline.tools.bench", {**request, "replicas": count}, Path(tmp) / f"{count}.json")
            for count in counts
        ]
    base = results[0]
    for result in results:
        ideal = base["samples_per_second_per_replica"] * result["replicas"]
        result["scaling_efficiency"] = result["samples_per_second"] / ideal
    return results


def _measure_replicas(spec: dict) -> dict:
    """One count of `scaling`, in the process `scaling` started: the params in force on the
    first N GPUs, or N logical CPU devices."""
    dataset, source = spec["dataset"], spec["source"]
    given = params_of(spec["raw"], dataset, source)
    params = overridden(given, replica_overrides(dataset, spec["replicas"], gpu_count()), source)
    return _measure_and_log(params, Path(spec["prepared_dir"]), spec["warmup"], spec["steps"], spec["log_runs"])


def table(results: list[dict]) -> str:
    """The results as a terminal table, one row per measurement."""
    columns = list(COLUMNS)
    if "scaling_efficiency" in results[0]:
        columns.append(("scaling_efficiency", "efficiency", "{:.2f}"))
    cells = [["-" if r[key] is None else fmt.format(r[key]) for key, _, fmt in columns] for r in results]
    widths = [max(len(head), *(len(row[i]) for row in cells)) for i, (_, head, _) in enumerate(columns)]
    lines = ["  ".join(head.rjust(w) for (_, head, _), w in zip(columns, widths))]
    lines += ["  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def headline(result: dict) -> str:
    """What was measured: model, strategy, devices and the settings that change speed."""
    return (
        f"{result['dataset']}: {result['model']}, {result['loop']}, {result['strategy']} on "
        f"{', '.join(result['devices'])}; global batch {result['global_batch_size']}, {result['precision']}, "
        f"XLA {'on' if result['jit_compile'] else 'off'}, steps_per_execution {result['steps_per_execution']}; "
        f"{_steps(result['timed_steps'])} timed after {_steps(result['warmup_steps'])} of warm-up; "
        f"{result['flops_per_sample'] / 1e6:,.1f} MFLOP per training sample"
    )


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def peak_line(result: dict) -> str:
    """Under the table: the peak its "% of peak" is a fraction of, and how it is reached."""
    if result["peak"] is None:
        return "peak: unknown for these devices (no % of peak)"
    return f"peak: {result['peak_gflops']:,.1f} GFLOP/s = {result['peak']}"


def report(results: list[dict]) -> str:
    """What `pipeline bench` prints: the headline, the table, the peak."""
    return "\n".join([headline(results[0]), table(results), peak_line(results[0])])


def gpu_count() -> int:
    import tensorflow as tf

    return len(tf.config.list_physical_devices("GPU"))


def parse_counts(text: Optional[str]) -> list[int]:
    try:
        counts = [int(part) for part in (text or "").split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise ConfigError(f"--replicas {text}: expected replica counts separated by commas, e.g. 1,2,4")
    return counts


if __name__ == "__main__":  # a process of `scaling` (pipeline.runtime.processes)
    from pipeline.runtime import processes

    processes.serve(_measure_replicas)
