"""The kinds of dataset, each one module of this package (its preprocess sections, readers, form
on disk and facts, model table's key, templates, served requests and selftest samples), and their
registry (`known`: KINDS, by the name a params file gives, `preprocess.<ds>.kind`). No code outside
this package names a kind or a form; it asks the registry.

A new kind is a module here with its `KIND`, one entry in `known.KINDS`, its reader in
`pipeline.data`, its served requests' class in `pipeline.serving.forms` and its table in
`pipeline/config/keys/model_table.py` (docs/architecture.md)."""
