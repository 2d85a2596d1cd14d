"""A reproducible experiment pipeline: download, preprocess, train (tf.distribute), evaluate."""

__version__ = "0.1.0"
