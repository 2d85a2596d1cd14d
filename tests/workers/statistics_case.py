"""One training of the small convnet in its own process (strategies collide within one,
tensorflow#61314).

python statistics_case.py LOOP REPLICAS COUNT OUT.json
    Two epochs of `trainer.train` of the small convnet (not augmented: the statistics of the
    same pictures are the same) on 48 colour pictures with
    `batchnorm_statistics` COUNT; saves the history, how far the trained model's
    BatchNormalization statistics are from those recomputed from the same pictures, and the
    validation loss recorded for the epoch kept beside the kept model's own.
"""

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
from train_case import base_cfg, scratch_folder, setup


def small_pictures():
    """A prepared folder of 48 training and 16 validation colour pictures of 12 pixels, two
    classes (bright or dark)."""
    from pipeline.data import prepared
    from pipeline.kinds.image_folders import ImageFoldersFacts

    rng = np.random.RandomState(3)

    def split(n):
        y = np.arange(n) % 2
        x = rng.randint(0, 128, (n, 12, 12, 3)) + 100 * y[:, None, None, None]
        return x.astype(np.uint8), y.astype(np.int32)

    facts = ImageFoldersFacts(12, "rgb", "folders", images_sha256=None)
    splits = {"train": split(48), "val": split(16)}
    return prepared.write_arrays(scratch_folder(), splits, input_="images", class_names=["a", "b"], facts=facts)


def statistics(loop: str, replicas: int, count: int, out: str) -> None:
    import keras

    from pipeline.data.inputs import model_inputs
    from pipeline.training import batchnorm, trainer

    strategy = setup(replicas)
    data = small_pictures()
    mnist = base_cfg("mnist")
    settings = dataclasses.replace(
        mnist.small_convnet, filters=(4, 8), dense_units=8, dropout=0.0, shift=0.0, zoom=0.0, greyscale=0.0,
        batchnorm_statistics=count,
    )  # fmt: skip
    cfg = dataclasses.replace(
        mnist, model="small_convnet", small_convnet=settings, loop=loop, epochs=2,
        batch_size_per_replica=16 // replicas, lr_decay_epochs=(), shuffle_buffer=1,
    )  # fmt: skip
    result = trainer.train(cfg, prepared=data, strategy=strategy, verbose=0)
    model = result.model
    layers = batchnorm.layers_of(model)
    trained = batchnorm.statistics_of(layers)
    with_stats = dataclasses.replace(cfg, small_convnet=dataclasses.replace(settings, batchnorm_statistics=48))
    callback = batchnorm.epoch_statistics(with_stats, data, model)
    assert callback is not None
    batchnorm.recompute(model, callback.pictures)
    again = batchnorm.statistics_of(layers)
    # the validation the run recorded for the epoch it kept, against the kept model's own
    best = result.summary["best_epoch"]
    x, y = data.head("val", data.samples("val"))
    images = model_inputs(x, model.input_shape[1])
    own = float(np.mean(keras.losses.sparse_categorical_crossentropy(y, model(images), from_logits=True)))
    keys = ("loss", "accuracy", "val_loss", "val_accuracy")
    Path(out).write_text(
        json.dumps(
            {
                "history": [{k: r[k] for k in keys} for r in result.history],
                "layers": len(layers),
                "difference": max(float(np.max(np.abs(a - b))) for a, b in zip(trained, again)),
                "recorded_val_loss": result.history[best - 1]["val_loss"],
                "own_val_loss": own,
            }
        )
    )


if __name__ == "__main__":
    from pipeline.runtime import imports

    imports.skip_keras_extras()  # TensorFlow imported as a `pipeline` command imports it
    loop, replicas, count, out = sys.argv[1:]
    statistics(loop, int(replicas), int(count), out)
