"""One training case in its own process (strategies collide within one, tensorflow#61314).

python train_case.py one_step REPLICAS OUT.npz
    One custom-loop step on a fixed global batch from fixed initial weights; saves weights.
python train_case.py curve LOOP REPLICAS DETERMINISTIC OUT.json [JSON_OVERRIDES]
    A few epochs of `trainer.train` on small data; saves the per-epoch history.
python train_case.py early LOOP REPLICAS OUT.json RESTORE [BACKUP_DIR]
    `trainer.train` with early stopping on the training loss in the wrong direction
    (mode max: the first epoch is the best), patience 2; saves the history, the epochs
    handed to MLflow's hook, and the returned model's own validation loss. With
    BACKUP_DIR the backup is kept (no `finish`), as a run killed before it ended.
python train_case.py weighted LOOP REPLICAS CLASS_WEIGHT OUT.json
    Two epochs of `trainer.train` (one step each: the whole split in one global batch) on
    imbalanced data with `class_weight` CLASS_WEIGHT; saves the history, the weights it
    trained with, and the first epoch's loss (weighted by class and not) and accuracy computed
    by hand from the initial model (the same seed and builder).
"""

import atexit
import dataclasses
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def scratch_folder() -> Path:
    """A temporary folder, removed when this process exits."""
    folder = Path(tempfile.mkdtemp(prefix="train-case-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def setup(replicas: int):
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices=devices)


def small_data(n=96, max_len=40, vocab=200, classes=46, seed=1):
    rng = np.random.RandomState(seed)
    x = rng.randint(1, vocab, (n, max_len)).astype(np.int32)
    y = (x[:, 0] % classes).astype(np.int32)
    return x, y


def small_prepared():
    """A prepared folder (in a temporary folder) of `small_data`: 96 training and 32 validation
    sequences of 40 ids, as a training reads its shards."""
    from pipeline.data import prepared
    from pipeline.kinds.labelled_texts import full_length_facts

    splits = {"train": small_data(n=96), "val": small_data(n=32, seed=2)}
    names = [str(c) for c in range(46)]
    folder = scratch_folder()
    facts = full_length_facts(40, 200)
    return prepared.write_arrays(folder, splits, input_="sequences", class_names=names, facts=facts)


def base_cfg(dataset: str = "reuters", **changes):
    """`dataset`'s train section of the project's params.yaml, with `changes`."""
    from pipeline.config.loading.loader import load_params

    cfg = load_params(ROOT / "params.yaml", dataset).train
    return dataclasses.replace(cfg, **changes)


def one_step(replicas: int, out: str) -> None:
    import keras

    from pipeline.training import models
    from pipeline.training.custom_loop import CustomLoop

    strategy = setup(replicas)
    # SGD: the step is linear in the gradient, so a loss scaled by the per-replica instead of the
    # global batch moves the weights twice as far. Adam-type steps divide the gradient by its own
    # size: they hide that, and turn rounding in near-zero gradients into 1e-4 weight differences
    # (seen with Nadam on an AMD EPYC host).
    cfg = base_cfg(optimizer="sgd", learning_rate=0.1)
    with strategy.scope():
        model = models.build_model(cfg, small_prepared())
        rng = np.random.RandomState(0)
        model.set_weights([rng.normal(0, 0.1, w.shape).astype(np.float32) for w in model.get_weights()])
        models.compile_model(model, dataclasses.replace(cfg, loop="custom"))
    loop = CustomLoop(model, strategy)
    x, y = small_data(n=32)
    import tensorflow as tf

    batch = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((x, y)).batch(32))))
    loss_sum, correct, count = (float(v) for v in loop.train_step(batch))
    assert count == 32, count
    np.savez(out, *[np.asarray(w) for w in model.get_weights()], loss=loss_sum / count)
    keras.backend.clear_session()


def curve(loop: str, replicas: int, deterministic: bool, out: str, extra: str = "{}") -> None:
    from pipeline.training import trainer

    strategy = setup(replicas)
    data = small_prepared()
    # shuffle_buffer 1 keeps the order fixed: fit and the custom loop advance a reshuffling
    # dataset differently (seen: a different first-epoch order), which is not what is compared.
    cfg = base_cfg(
        loop=loop,
        epochs=3,
        batch_size_per_replica=16 // replicas,
        deterministic=deterministic,
        shuffle_buffer=1,
        **json.loads(extra),
    )
    result = trainer.train(cfg, prepared=data, strategy=strategy, verbose=0)
    keys = ("loss", "accuracy", "val_loss", "val_accuracy")
    Path(out).write_text(
        json.dumps(
            {
                "history": [{k: r[k] for k in keys} for r in result.history],
                "logits_dtype": str(result.model.output.dtype),
                "compute_dtype": result.model.layers[2].compute_dtype,
                "optimizer": type(result.model.optimizer).__name__,
            }
        )
    )


def early(loop: str, replicas: int, out: str, restore: str, backup_dir: str = "") -> None:
    import keras

    from pipeline.config.keys.training import EarlyStoppingConfig
    from pipeline.training import trainer
    from pipeline.training.models import loss
    from pipeline.training.resume import Backup

    strategy = setup(replicas)
    data = small_prepared()
    xv, yv = small_data(n=32, seed=2)
    stopping = EarlyStoppingConfig(
        monitor="loss", mode="max", patience=2, min_delta=0.0, restore_best_weights=restore == "true"
    )
    cfg = base_cfg(
        loop=loop,
        epochs=6,
        batch_size_per_replica=16 // replicas,
        shuffle_buffer=1,
        learning_rate=0.01,
        early_stopping=stopping,
    )
    published = []
    result = trainer.train(
        cfg,
        prepared=data,
        strategy=strategy,
        backup=Backup(backup_dir or None, strategy),
        on_epoch=lambda epoch, row: published.append(epoch),
        verbose=0,
    )
    logits = keras.ops.convert_to_numpy(result.model(xv, training=False))
    own_val_loss = float(keras.ops.convert_to_numpy(loss()(yv, logits)))
    Path(out).write_text(
        json.dumps(
            {
                "history": result.history,
                "published": published,
                "summary": result.summary,
                "own_val_loss": own_val_loss,
            }
        )
    )


def imbalanced_prepared():
    """48 training sequences of 3 classes (30, 12 and 6), 12 validation ones."""
    from pipeline.data import prepared
    from pipeline.kinds.labelled_texts import full_length_facts

    rng = np.random.RandomState(3)
    y = np.repeat(np.arange(3, dtype=np.int32), [30, 12, 6])
    rng.shuffle(y)
    x = (rng.randint(1, 100, (48, 40)) + 100 * (y[:, None] == 2)).astype(np.int32)
    splits = {"train": (x, y), "val": (x[:12], y[:12])}
    folder = scratch_folder()
    return prepared.write_arrays(
        folder, splits, input_="sequences", class_names=["a", "b", "c"], facts=full_length_facts(40, 200)
    )


def by_hand(cfg, data, strategy, weights):
    """(weighted loss, accuracy, loss) of the training split under the initial model, built as
    `trainer.prepare` builds it: sum(w l) / n, mean(right), mean(l)."""
    import keras

    from pipeline.training import models

    keras.utils.set_random_seed(cfg.seed)
    with strategy.scope():
        model = models.build_model(cfg, data)
    x, y = data.head("train", 100)
    logits = keras.ops.convert_to_numpy(model(x, training=True))
    losses = keras.ops.convert_to_numpy(models.loss(reduction=None)(y, logits)).astype(np.float64)
    w = np.asarray(weights, np.float64)[y]
    right = logits.argmax(axis=1) == y
    keras.backend.clear_session()
    return float((w * losses).sum() / len(y)), float(right.mean()), float(losses.mean())


def weighted(loop: str, replicas: int, class_weight: str, out: str) -> None:
    from pipeline.training import trainer

    strategy = setup(replicas)
    data = imbalanced_prepared()
    cfg = base_cfg(
        loop=loop,
        epochs=2,
        batch_size_per_replica=64 // replicas,
        deterministic=True,
        shuffle_buffer=1,
        optimizer="sgd",
        learning_rate=0.1,
        class_weight=class_weight,
    )
    weights = data.class_weights("train")
    expected = by_hand(cfg, data, strategy, weights)
    result = trainer.train(cfg, prepared=data, strategy=strategy, verbose=0)
    keys = ("loss", "accuracy", "val_loss", "val_accuracy")
    Path(out).write_text(
        json.dumps(
            {
                "history": [{k: r[k] for k in keys} for r in result.history],
                "weights": weights,
                "weighted_loss": expected[0],
                "accuracy": expected[1],
                "loss": expected[2],
            }
        )
    )


if __name__ == "__main__":
    from pipeline.runtime import imports

    imports.skip_keras_extras()  # TensorFlow imported as a `pipeline` command imports it
    mode, *args = sys.argv[1:]
    if mode == "one_step":
        one_step(int(args[0]), args[1])
    elif mode == "early":
        early(args[0], int(args[1]), *args[2:])
    elif mode == "weighted":
        weighted(args[0], int(args[1]), args[2], args[3])
    else:
        curve(args[0], int(args[1]), args[2] == "true", *args[3:])
