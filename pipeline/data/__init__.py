"""The data: fetching the download stage's files (`fetch`, `archives`), the readers of each
kind of dataset (`images` and `mnist`'s digits for image_folders, `texts` and `reuters`' Keras
arrays for labelled_texts: `prepare(raw_dir, cfg, where) -> ({split: (x, y)}, stats, assets)`,
which pipeline/config/datasets.py picks by the dataset's kind and reader), the prepared-data
format the later stages share (`arrays`) and the tf.data input pipelines (`inputs`). The stats
record what the inputs are (`"input"`: "sequences" or "images") and the class names for the
stages after preprocess."""
