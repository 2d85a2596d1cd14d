"""`pipeline tune`: the Optuna study (`studies`), where it lives (`storage`), what it records about
itself (`attributes`), its MLflow runs (`study_runs`) and the worker processes that train its
trials (`workers`)."""
