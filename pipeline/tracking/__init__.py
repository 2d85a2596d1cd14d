"""MLflow: one experiment per dataset, one run per training, with its lineage.

DVC decides what reruns; MLflow keeps the history. The train stage opens the run and writes
its id to a small file (a DVC out); the evaluate stage reopens that run to add test metrics.
With no MLFLOW_TRACKING_URI, runs go to MLflow's own default store, `sqlite:///mlflow.db` in
the repository root (also from a `dvc exp run --temp` copy of the repository).

- `store`: which store is in force, opening and migrating it, the experiments it holds;
- `probe`: whether that store can take a run, asked before any work (a server's health and
  backend, a sqlite file, any other URI as MLflow would open it);
- `lineage`: where a run came from: the command or DVC stage, git, dvc.lock's hashes, the
  framework and the data it read;
- `runs`: the runs themselves: a training's, its evaluation's, a benchmark's.
"""
