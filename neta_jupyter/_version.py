"""The package's version, in a leaf module.

The CLI and the webhooks' User-Agent read it from here, not from the package's ``__init__``,
which reaches every room (the server extension, the magics) and so must be imported by none.
"""

__version__ = "0.1.0"
