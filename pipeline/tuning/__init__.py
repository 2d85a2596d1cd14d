"""`pipeline tune`: the Optuna study in its storage (`studies`), its MLflow runs (`study_runs`)
and the worker processes that train its trials (`workers`)."""
