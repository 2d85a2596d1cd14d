"""The config classes of params.yaml's keys and train sections with settings changed: what the
tests of the schema and the models build from."""

import dataclasses
import typing


def config_classes() -> list[type]:
    """Every config class a params section can be (every kind's and reader's), nested ones included."""
    found: list[type] = []

    def visit(cls):
        if cls in found:
            return
        found.append(cls)
        for tp in typing.get_type_hints(cls).values():
            for arg in (tp, *typing.get_args(tp), *[a for t in typing.get_args(tp) for a in typing.get_args(t)]):
                if dataclasses.is_dataclass(arg):
                    visit(arg)

    from pipeline.config.keys.training import TRAIN_CONFIGS
    from pipeline.config.loading.datasets import COMMON
    from pipeline.kinds.known import KINDS

    for cls in COMMON.values():
        visit(cls)
    for kind in KINDS.values():
        for reader in kind.readers.values():
            visit(reader.preprocess)
        visit(TRAIN_CONFIGS[kind.name])
    return found


def field_cases() -> list:
    """(config class, dataclass field) of every key of the schema."""
    return [(cls, f) for cls in config_classes() for f in dataclasses.fields(cls)]


def with_settings(cfg, **changes):
    """A train section whose chosen model's settings (train.<ds>.<model>) have these changes."""
    return dataclasses.replace(cfg, **{cfg.model: dataclasses.replace(cfg.settings, **changes)})
