"""The commands that work on the params file itself: `pipeline add` and `remove` (`declare`)
and `pipeline params` (`params_doc`)."""
