"""The params file, in three groups: its keys (`keys`: the sections' dataclasses and the tables
of models), how it is loaded (`loading`: read with `-S` overrides, built once, then checked)
and the commands that work on the file itself (`commands`: `pipeline add`, `remove` and
`params`). No TensorFlow: a config error stops any command in well under a second."""
