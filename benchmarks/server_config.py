"""Jupyter config of the benchmark's neta server (``--config``): the extension plus instruments.

Executed by traitlets, where ``get_config`` is predefined.
"""

from benchmarks.instruments import install

c = get_config()  # type: ignore[name-defined]  # noqa: F821
c.ServerApp.jpserver_extensions = {"neta_jupyter": True}
install()
