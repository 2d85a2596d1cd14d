"""Where a training step's time goes: the train stage's model, split into what it does.

On the prepared data and the params in force (one device, no distribution), each part timed
over the same number of steps, in one process:

- input: batches pulled from the train stage's tf.data pipeline alone;
- forward: the model on one batch already in memory (training mode);
- forward + backward: the loss and every weight's gradient;
- whole step: Keras' own `train_step` (the above, then the optimizer's update and the
  metrics), one compiled call per step on a batch in memory;
- fit, `steps_per_execution` 1 and N: what `pipeline bench` measures, batches taken from the
  pipeline, one compiled call per step or per N steps.

The differences between rows are the backward pass, the update and metrics, the handover of
batches from the input pipeline and the cost of a call into TensorFlow; the model's FLOPs per
sample against the CPU's peak say how far the arithmetic is from the machine's. A last line
gives the first call of the forward pass, of forward + backward and of the whole step: its
tracing into a graph, TensorFlow's optimization of that graph, and one run, which a training
run pays once.

    dvc repro preprocess@reuters
    python benchmarks/step_breakdown.py reuters [--steps 200] [-S train.reuters.key=value ...]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import harness
from harness import ROOT


def timed(fn, steps: int, repeats: int = 3) -> tuple[float, float]:
    """(seconds of the first call of `fn`, which traces it; seconds per call after it: the
    median of `repeats` runs of `steps` calls, after a warm-up). `fn` returns a tensor to wait
    for."""
    start = time.perf_counter()
    float(fn().numpy().ravel()[0])
    first = time.perf_counter() - start
    for _ in range(4):
        fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            out = fn()
        float(out.numpy().ravel()[0])  # the last call finished
        runs.append((time.perf_counter() - start) / steps)
    return first, statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=("reuters", "mnist"))
    parser.add_argument("--steps", type=int, default=200, help="Steps per timing (each repeated 3 times).")
    parser.add_argument("--spe", type=int, default=32, help="The larger steps_per_execution compared with 1.")
    parser.add_argument("--data", type=Path, default=None, help="The prepared data (default: data/prepared/DATASET).")
    harness.add_overrides(parser)
    opts = parser.parse_args()
    from pipeline import log

    log.configure(0)  # before TensorFlow: its C++ start-up lines filtered as in a `pipeline` command
    from pipeline.config.loading.loader import load_params

    params = load_params(ROOT / "params.yaml", opts.dataset, opts.overrides)
    cfg = params.train
    from pipeline.tools import bench, capacity
    from pipeline.training import distribute

    setup = distribute.setup(cfg, where=f"train.{opts.dataset}")
    import tensorflow as tf

    from pipeline.data import prepared as prepared_data
    from pipeline.training import trainer

    data = opts.data or ROOT / "data" / "prepared" / opts.dataset
    prepared = trainer.prepare(cfg, prepared=prepared_data.read(data), strategy=setup.strategy)
    model = prepared.model
    batch, dataset = bench.full_batches(prepared)
    x, y = next(iter(dataset))
    forward_flops = capacity.forward_flops(model, prepared.train_ds.element_spec[0])
    flops = capacity.TRAINING_PER_FORWARD * forward_flops
    peak = capacity.devices_peak([], cfg.precision)

    pulled = iter(dataset)
    _, input_only = timed(lambda: next(pulled)[1], opts.steps)
    first_forward, forward = timed(tf.function(lambda: model(x, training=True)), opts.steps)

    @tf.function
    def gradients():
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x, y, model(x, training=True))
        return tf.add_n(
            [
                tf.reduce_sum(g if not isinstance(g, tf.IndexedSlices) else g.values)
                for g in tape.gradient(loss, model.trainable_variables)
            ]
        )

    first_backward, backward = timed(gradients, opts.steps)
    model.fit(dataset, steps_per_epoch=5, epochs=1, verbose=0, shuffle=False)  # Keras builds its metrics and state
    first_step, step = timed(tf.function(lambda: model.train_step((x, y))["loss"]), opts.steps)
    rows = [
        ("input pipeline alone", input_only),
        ("forward", forward),
        ("forward + backward", backward),
        ("whole step (update, metrics)", step),
    ]
    for spe in (1, opts.spe):
        figures = bench.measure(
            load_params(
                ROOT / "params.yaml",
                opts.dataset,
                [*opts.overrides, f"train.{opts.dataset}.steps_per_execution={spe}"],
            ),
            prepared_dir=data,
            warmup=2 * spe,
            steps=opts.steps,
        )
        rows.append((f"fit, steps_per_execution {spe}", figures["step_ms_median"] / 1000))
    print(
        f"{opts.dataset}: {cfg.model}, global batch {batch}, {cfg.precision}; "
        f"{flops / 1e6:,.1f} MFLOP per training sample; {opts.steps} steps per timing, median of 3"
    )
    print(f"{'':32}{'ms/step':>9}{'samples/s':>11}{'GFLOP/s':>9}" + ("  % of peak" if peak else ""))
    for name, seconds in rows:
        rate = batch / seconds
        line = f"{name:32}{1000 * seconds:9.2f}{rate:11,.0f}"
        if name != "input pipeline alone":  # the forward pass is a third of a training step's arithmetic
            gflops = rate * (forward_flops if name == "forward" else flops) / 1e9
            line += f"{gflops:9.1f}" + (f"{100 * gflops / peak.gflops:11.1f}" if peak else "")
        print(line)
    if peak:
        print(f"peak: {peak.gflops:,.1f} GFLOP/s = {peak.how}")
    print(
        f"first call (trace, graph optimization, one run), s: forward {first_forward:.2f}, "
        f"forward + backward {first_backward:.2f}, whole step {first_step:.2f}"
    )


if __name__ == "__main__":
    main()
