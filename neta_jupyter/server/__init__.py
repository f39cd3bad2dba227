"""The jupyter-server extension: the only layer that speaks tornado."""
