"""The data: fetching the download stage's files (`fetch`, `archives`), the readers of each
kind of dataset (`images` and `mnist`'s digits for image_folders, `texts` and `reuters`' Keras
arrays for labelled_texts: `prepare(raw_dir, out, cfg, where) -> Prepared`, streamed, which
pipeline/config/loading/datasets.py picks by the dataset's kind and reader), the prepared-data format
the later stages share (`prepared`: each split's shards and stats.json, read as one typed
description of the samples' form and the class names) and the tf.data input pipelines over
the shards (`inputs`)."""
