"""The params file's keys: the sections alike for every dataset (`schema`), the train section
(`training`) and each kind's table of models and their settings (`model_table`); each key's
meaning, the values it takes and its check, on frozen dataclasses."""
