"""`pipeline selftest`: whether distributed training is right on this host, in minutes, before
a long run on it.

For each dataset's model, at the params in force (its loop, precision and all-reduce), a
few steps of plain SGD on the same global batches are taken twice, each in a process of its own
(TensorFlow fixes its devices once per process):

- over N replicas, every visible GPU (N logical CPU devices where there is none), as a
  training takes them, the weights saved before and after each step;
- on one device, each step from the replicas' weights before it, with the mean of the N
  shares' own gradients (each share of the batch through the model on its own, as a replica
  computes it: BatchNormalization sees that share), which is what the replicas' all-reduce
  must give. Starting each step from the same point keeps a rounding difference from growing
  over the steps, as it does in a from-scratch MobileNetV2.

Then: the weights agree within a tolerance of the largest update (float32: 1e-4; mixed
precision looser), no loss is NaN or infinite, and the all-reduce in force sums a value from
every replica right (with NCCL on GPUs, and when it fails the fallback the params allow). SGD,
not the params' optimizer: its step is linear in the gradient, so a wrongly scaled or dropped
replica's gradient shows in the weights, where Adam's normalised step would hide it.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from pipeline.config.loading import datasets
from pipeline.config.loading.loader import load_params, overridden, params_of
from pipeline.runtime import processes
from pipeline.tools.bench import gpu_count, replica_overrides
from pipeline.tools.doctor import Check
from pipeline.training import distribute

if TYPE_CHECKING:
    from pipeline.config.keys.schema import DatasetParams
    from pipeline.config.keys.training import TrainConfig

BATCH_PER_REPLICA = 4
LEARNING_RATE = 0.001
# The largest weight difference allowed, relative to the largest weight update of the steps.
# the classes of the synthetic labels: the check compares replicas, not what they learn
SYNTHETIC_CLASSES = 10
TOLERANCE = {"float32": 1e-4, "mixed_bfloat16": 5e-2, "mixed_float16": 2e-2}


def run(params_path: Path, names: Sequence[str], steps: int) -> list[Check]:
    """The checks, one per line of the report: run in two processes, compared here."""
    # a config error stops it here, in one line, before any process; each process is handed
    # the params as read here, not the file again
    given = {dataset: load_params(params_path, dataset) for dataset in names}
    gpus = 0 if distribute.no_gpu_without_tensorflow() else gpu_count()
    if gpus == 1:
        return [
            Check(
                "replicas",
                "warn",
                "this host has one GPU: a training there distributes nothing, and there are no replicas to compare",
                "run it where the long run will have two GPUs or more",
            )
        ]
    replicas = gpus if gpus > 1 else 2
    where = f"{gpus} GPUs" if gpus > 1 else "2 logical CPU devices"
    checks: list[Check] = []
    all_reduce: Optional[dict] = None
    with tempfile.TemporaryDirectory(prefix="pipeline-selftest-") as tmp:
        for dataset in names:  # two strategies in one process collide (tensorflow#61314)
            request = {
                "raw": given[dataset].raw,
                "source": str(params_path),
                "dataset": dataset,
                "split": replicas,
                "steps": steps,
                "folder": tmp,
                "all_reduce": all_reduce is None,
            }
            many = _in_process({**request, "replicas": replicas})
            one = _in_process({**request, "replicas": 1})  # from the replicas' weights before each step
            checks += _compare(dataset, one, many, replicas, where)
            all_reduce = all_reduce or many["all_reduce"]
    return [*checks, _all_reduce_check(all_reduce, replicas)]


def _in_process(spec: dict) -> dict:
    return processes.run(
        "pipeline.tools.selftest", spec, Path(spec["folder"]) / f"{spec['dataset']}-{spec['replicas']}.json"
    )


def _compare(dataset: str, one: dict, many: dict, replicas: int, where: str) -> list[Check]:
    import numpy as np

    losses = [*one["losses"], *many["losses"]]
    finite = all(np.isfinite(losses))
    shown = " ".join(f"{v:.4g}" for v in many["losses"])
    checks = [
        Check(
            f"{dataset} loss",
            "pass" if finite else "fail",
            f"{replicas} replicas, {many['precision']}: step losses {shown}",
            "train with precision float32 and a lower learning rate; if it stays, the replicas' "
            "devices or TensorFlow's build are at fault",
        )
    ]
    differ = update = 0.0
    for k in range(len(many["losses"])):
        before = _load(f"{many['stem']}-before-{k}.npz")
        ours, theirs = _load(f"{one['stem']}-after-{k}.npz"), _load(f"{many['stem']}-after-{k}.npz")
        update = max(update, *(float(np.max(np.abs(a.astype("float64") - s))) for a, s in zip(ours, before)))
        differ = max(differ, *(float(np.max(np.abs(a.astype("float64") - b))) for a, b in zip(ours, theirs)))
    tolerance = TOLERANCE[many["precision"]] * update
    agree = finite and differ <= tolerance
    checks.append(
        Check(
            f"{dataset} update",
            "pass" if agree else "fail",
            f"{replicas} replicas ({where}, {many['strategy']}, loop {many['loop']}) and one device agree at each "
            f"of {len(many['losses'])} steps: weights differ by {differ:.2g} at most, the largest update is "
            f"{update:.2g} (tolerance {TOLERANCE[many['precision']]:g} of it)",
            f"train on one replica (devices.logical_devices: null, or one GPU) and report the host; try "
            f"cross_device_ops: hierarchical_copy or reduction_to_one_device, and loop: "
            f"{'custom' if many['loop'] == 'fit' else 'fit'}",
        )
    )
    return checks


def _all_reduce_check(found: Optional[dict], replicas: int) -> Check:
    assert found is not None  # every dataset's run at several replicas found one
    want = replicas * (replicas + 1) / 2
    tried = ", ".join(f"{name}: {result}" for name, result in found["tried"])
    if found["works"] is None:
        return Check(
            "all-reduce",
            "fail",
            f"no all-reduce sums {replicas} replicas' values right ({tried})",
            "check the GPUs' interconnect and NCCL (NCCL_DEBUG=INFO), or train on one GPU",
        )
    if found["works"] != found["tried"][0][0]:
        return Check(
            "all-reduce",
            "fail",
            f"the one in force does not sum right ({tried}); {found['works']} does",
            f"set cross_device_ops: {found['works']}",
        )
    return Check(
        "all-reduce",
        "pass",
        f"{found['works']} sums a value from each of {replicas} replicas "
        f"right ({want:g}), small and 1M-element tensors",
    )


def format_lines(checks: list[Check]) -> list[str]:
    """A line per check, as `pipeline doctor` prints its own: status, name, detail, and the fix."""
    width = max(len(c.name) for c in checks)
    return [
        f"{c.status:<5} {c.name:<{width}} {c.detail}" + (f"; fix: {c.fix}" if c.status != "pass" else "")
        for c in checks
    ]


def verdict(checks: list[Check], seconds: float) -> str:
    failed = sum(c.status == "fail" for c in checks)
    if failed:
        return f"selftest: {failed} of {len(checks)} checks failed ({seconds:.0f} s): do not start a long run here yet"
    warned = sum(c.status == "warn" for c in checks)
    return f"selftest: passed, {len(checks)} check{'s' if len(checks) != 1 else ''} in {seconds:.0f} s" + (
        f" ({warned} with a warning)" if warned else ""
    )


def report(checks: list[Check], as_json: bool, seconds: float) -> str:
    """What `pipeline selftest` prints: a line per check and the verdict, or the checks as JSON."""
    if as_json:
        return json.dumps([c.as_dict() for c in checks], indent=2)
    return "\n".join([*format_lines(checks), verdict(checks, seconds)])


# --------------------------------------------------------------------------- in each process


def _steps(spec: dict) -> dict:
    """What one process of `run` measures for its dataset: the initial and final weights and the
    step losses; with several replicas, and when asked, the all-reduce too."""
    ds, replicas = spec["dataset"], spec["replicas"]
    # Both processes make the same devices (N of them); the one-device process trains on the first.
    params = overridden(
        params_of(spec["raw"], ds, spec["source"]),
        [
            *replica_overrides(ds, spec["split"], gpu_count()),
            f"train.{ds}.optimizer=sgd",
            f"train.{ds}.learning_rate={LEARNING_RATE}",
        ],
        spec["source"],
    )
    info = distribute.configure_devices(params.train.devices, where=f"train.{ds}.devices")
    import tensorflow as tf

    strategy = (
        distribute.strategy_for(params.train, info, where=f"train.{ds}")
        if replicas > 1
        else tf.distribute.get_strategy()
    )
    found = _train(params, strategy, spec, Path(spec["folder"]) / f"{ds}-{replicas}")
    if replicas > 1 and spec["all_reduce"]:
        found["all_reduce"] = _all_reduce(params.train, info, strategy, replicas)
    return found


def _without_dropout(cfg):
    """`cfg` with its model's dropout at 0: dropout draws its masks per replica, so no two
    set-ups take the same step with it, and the check compares steps."""
    settings = cfg.settings
    if not getattr(settings, "dropout", 0):
        return cfg
    return dataclasses.replace(cfg, **{cfg.model: dataclasses.replace(settings, dropout=0.0)})


def _train(params: DatasetParams, strategy, spec: dict, stem: Path) -> dict:
    """The steps, one at a time. With several replicas: as a training takes them, the weights
    saved before and after each. On one device: each from the replicas' weights before it
    (the same point: a difference cannot grow from step to step), the mean of the shares'
    gradients applied, the weights after it saved."""
    import keras

    from pipeline.data.inputs import image_size_for, make_dataset  # TensorFlow: only once it runs
    from pipeline.training.models import build_model, compile_model, loss  # Keras: only when this runs

    cfg, split = _without_dropout(params.train), spec["split"]
    keras.utils.set_random_seed(cfg.seed)
    keras.mixed_precision.set_dtype_policy(cfg.precision)
    global_batch = BATCH_PER_REPLICA * split
    data = _synthetic(params, global_batch * spec["steps"], Path(f"{stem}-data"))
    with strategy.scope():
        model = build_model(cfg, data)
        compile_model(model, cfg)
    ds = make_dataset(data, "train", batch_size=global_batch, shuffle=False, image_size=image_size_for(data, model))
    replicas_stem = Path(spec["folder"]) / f"{params.dataset}-{split}"
    if strategy.num_replicas_in_sync == 1:
        losses = _replicas_emulated(model, ds, split, loss(), replicas_stem, stem)
    else:
        losses = _replicas_stepped(model, strategy, cfg, ds, stem)
    name = type(strategy).__name__
    return {
        "stem": str(stem),
        "losses": losses,
        "precision": cfg.precision,
        "loop": cfg.loop,
        "strategy": distribute.STRATEGY_NAMES.get(name, name),
    }


def _save(path: str, variables) -> None:
    import numpy as np

    np.savez(path, *[np.asarray(v) for v in variables])


def _load(path: str) -> list:
    import numpy as np

    with np.load(path) as saved:
        return [saved[f"arr_{i}"] for i in range(len(saved.files))]


def _replicas_stepped(model, strategy, cfg: TrainConfig, ds, stem: Path) -> list[float]:
    """Each step as the params' loop takes it over the replicas; the weights around it saved."""
    loop = None
    if cfg.loop != "fit":
        from pipeline.training.custom_loop import (
            CustomLoop,  # TensorFlow: only once it trains
        )

        loop = CustomLoop(model, strategy, jit_compile=cfg.jit_compile)
    losses = []
    for k in range(sum(1 for _ in ds)):
        _save(f"{stem}-all-{k}.npz", model.get_weights())
        _save(f"{stem}-before-{k}.npz", [v.numpy() for v in model.trainable_variables])
        one = ds.skip(k).take(1)
        if loop is None:
            losses.append(float(model.fit(one, epochs=1, verbose=0, shuffle=False).history["loss"][0]))
        else:
            total, _, count = loop.train_step(next(iter(strategy.experimental_distribute_dataset(one))))
            losses.append(float(total) / float(count))
        _save(f"{stem}-after-{k}.npz", [v.numpy() for v in model.trainable_variables])
    return losses


def _replicas_emulated(model, ds, split: int, loss_fn, replicas_stem: Path, stem: Path) -> list[float]:
    """Each step on one device as `split` replicas take it, from their weights before it: each
    share of the global batch through the model on its own, the gradients averaged, one update."""
    import tensorflow as tf

    optimizer, weights = model.optimizer, model.trainable_variables
    losses = []
    for k, (x, y) in enumerate(ds):
        model.set_weights(_load(f"{replicas_stem}-all-{k}.npz"))
        grads, step_loss = None, 0.0
        for part_x, part_y in zip(tf.split(x, split), tf.split(y, split)):
            with tf.GradientTape() as tape:
                part = loss_fn(part_y, tf.cast(model(part_x, training=True), tf.float32))
                scaled = optimizer.scale_loss(part / split)
            found = [tf.convert_to_tensor(g) for g in tape.gradient(scaled, weights)]  # Embedding's: sparse
            grads = found if grads is None else [g + f for g, f in zip(grads, found)]
            step_loss += float(part) / split
        optimizer.apply(grads, weights)
        _save(f"{stem}-after-{k}.npz", [v.numpy() for v in weights])
        losses.append(step_loss)
    return losses


def _synthetic(params: DatasetParams, n: int, folder: Path):
    """A prepared folder (written at `folder`) of `n` inputs of the dataset's shape and labels
    of SYNTHETIC_CLASSES classes (its own are known only once it is prepared), the same in
    every process: read as a training reads its shards."""
    import numpy as np

    from pipeline.data import prepared  # NumPy: only once it runs

    rng = np.random.RandomState(0)
    kind = datasets.of(params.preprocess, params.dataset).of_kind
    x, facts, assets = kind.samples(params.preprocess, n, rng)
    y = rng.randint(0, SYNTHETIC_CLASSES, n).astype(np.int32)
    return prepared.write_arrays(
        folder,
        {"train": (x, y)},
        input_=kind.form,
        class_names=[str(c) for c in range(SYNTHETIC_CLASSES)],
        facts=facts,
        assets=assets,
    )


def _all_reduce(cfg: TrainConfig, info, strategy, replicas: int) -> dict:
    """Which all-reduce sums each replica's value right: the training's own first, then (on
    GPUs, when the params leave it to auto) the fallbacks."""
    import tensorflow as tf

    choices = [cfg.cross_device_ops]
    if cfg.cross_device_ops == "auto" and info.visible_gpus > 1:
        choices += ["hierarchical_copy", "reduction_to_one_device"]
    tried, works = [], None
    for choice in choices:
        if choice != cfg.cross_device_ops:
            strategy = distribute.strategy_for(dataclasses.replace(cfg, cross_device_ops=choice), info, "selftest")
        name = distribute.describe(strategy, info)["cross_device_ops"]
        try:
            right = all(_sums_right(strategy, replicas, size) for size in (1, 1 << 20))
            tried.append((name, "right" if right else "wrong sum"))
        except tf.errors.OpError as exc:
            tried.append((name, f"failed: {exc.message.splitlines()[0][:120]}"))
            right = False
        if right:
            works = name
            break
    return {"tried": tried, "works": works}


def _sums_right(strategy, replicas: int, size: int) -> bool:
    import numpy as np
    import tensorflow as tf

    def value():
        index = tf.distribute.get_replica_context().replica_id_in_sync_group
        return tf.fill([size], tf.cast(index + 1, tf.float32))

    total = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(value), axis=None)
    return bool(np.allclose(total.numpy(), replicas * (replicas + 1) / 2))


if __name__ == "__main__":  # a process of `run` (pipeline.runtime.processes)
    from pipeline.runtime import processes

    processes.serve(_steps)
