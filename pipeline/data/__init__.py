"""The data: fetching the download stage's files (`fetch`, `archives`), each dataset's reader
(`reuters`, `mnist`: `prepare(raw_dir, cfg) -> ({split: (x, y)}, stats)`, `assets(raw_dir)`,
`class_names(n)`, which pipeline/config/datasets.py names for each dataset), the prepared-data
format the later stages share (`arrays`) and the tf.data input pipelines (`inputs`). The stats
record what the inputs are (`"input"`: "sequences" or "images") for the stages after
preprocess."""
