"""The baseline: Reuters trained with the reference settings, as one plain script.

Their model and hyperparameters (Embedding of 7, Conv1D 64x5, MaxPool, Conv1D 32x3, MaxPool,
Dense softmax; Nadam at Keras' default rate; batch 32 per replica; sequences padded and
truncated to 300 at the front), their input order (shuffle, batch, prefetch, then cache),
Keras `fit` under `MirroredStrategy()`, and validation on the test split after every epoch.
Only the timing and the JSON line at the end are additions, so that it can be measured side
by side with the pipeline's train stage (benchmarks/compare_reuters.py).

    python benchmarks/reuters_baseline.py --npz data/raw/reuters/reuters.npz [--epochs 10]

Prints one JSON line: training seconds (validation excluded), training samples per second,
the final test accuracy, the number of training samples and epochs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

EMBEDDING_DIM = 7
MAX_LEN = 300
BATCH_SIZE_PER_REPLICA = 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npz", required=True, help="Keras' reuters.npz (data/raw/reuters/reuters.npz).")
    parser.add_argument("--epochs", type=int, default=10)
    opts = parser.parse_args()

    # keras.datasets.reuters.load_data reads its cache folder, and downloads only when the
    # file is absent or its hash differs: hand it the local copy.
    home = tempfile.mkdtemp(prefix="keras-home-")
    os.makedirs(os.path.join(home, "datasets"))
    shutil.copy(opts.npz, os.path.join(home, "datasets", "reuters.npz"))
    os.environ["KERAS_HOME"] = home

    import keras
    import tensorflow as tf

    (x_train, y_train), (x_test, y_test) = keras.datasets.reuters.load_data(path="reuters.npz")
    shutil.rmtree(home)
    x_train = keras.utils.pad_sequences(x_train, maxlen=MAX_LEN)
    x_test = keras.utils.pad_sequences(x_test, maxlen=MAX_LEN)
    vocab_size = int(max(x_train.max(), x_test.max())) + 1
    num_classes = int(max(y_train.max(), y_test.max())) + 1

    strategy = tf.distribute.MirroredStrategy()
    global_batch = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync
    train_ds = (
        tf.data.Dataset.from_tensor_slices((x_train, y_train))
        .shuffle(len(x_train))
        .batch(global_batch)
        .prefetch(tf.data.AUTOTUNE)
        .cache()
    )
    test_ds = (
        tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(global_batch).prefetch(tf.data.AUTOTUNE).cache()
    )

    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input(shape=(MAX_LEN,)),
                keras.layers.Embedding(vocab_size, EMBEDDING_DIM),
                keras.layers.Conv1D(64, 5, activation="relu"),
                keras.layers.MaxPooling1D(2),
                keras.layers.Conv1D(32, 3, activation="relu"),
                keras.layers.MaxPooling1D(2),
                keras.layers.Flatten(),
                keras.layers.Dense(num_classes, activation="softmax"),
            ]
        )
        model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.Nadam(), metrics=["accuracy"])

    class TrainingTime(keras.callbacks.Callback):
        """Seconds spent training in each epoch: from its start to the start of validation."""

        seconds = 0.0

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_test_begin(self, logs=None):
            self.seconds += time.perf_counter() - self.start

    timer = TrainingTime()
    history = model.fit(train_ds, epochs=opts.epochs, validation_data=test_ds, callbacks=[timer], verbose=0)
    print(
        json.dumps(
            {
                "train_seconds": timer.seconds,
                "samples_per_second": len(x_train) * opts.epochs / timer.seconds,
                "test_accuracy": float(history.history["val_accuracy"][-1]),
                "train_samples": len(x_train),
                "epochs": opts.epochs,
            }
        )
    )


if __name__ == "__main__":
    main()
