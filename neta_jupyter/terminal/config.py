"""The settings of embedded runs, read from the Jupyter config files a server with neta reads.

A Jupyter server loads ``jupyter_config`` and ``jupyter_server_config`` (``.py`` and ``.json``)
from every folder of the Jupyter config path, and the extension adds its own
``jupyter_neta_jupyter_config``; a nearer folder wins over a farther one, the server's files over
the extension's. Here the same files are read in the same order, and ``c.NetaApp.<trait>`` of
the traits runs share (:class:`~neta_jupyter.runtime.settings.NetaSettings`: model, endpoints,
permission rules, limits) applies to ``neta-jupyter run`` as it does to the server. A file named
with ``--config`` comes last and wins. Server-only traits (ports, the server's data dir) are left
alone, silently.

Errors::

    ConfigError   a config file or a value in it cannot be used; the message names the file
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_config_dir, jupyter_config_path
from traitlets import TraitError
from traitlets.config import Config
from traitlets.config.loader import ConfigFileNotFound, JSONFileConfigLoader, PyFileConfigLoader

from ..runtime.settings import NetaSettings

SECTION = "NetaApp"
"""The config section the server's extension reads (``c.NetaApp.model = …``)."""
BASE_NAMES = ("jupyter_neta_jupyter_config", "jupyter_config", "jupyter_server_config")
"""Config file names in rising priority (as a server with the extension loads them)."""


class ConfigError(Exception):
    """A config file, or a value in it, cannot be used; the message says which and why."""


def config_paths() -> list[str]:
    """Folders searched for config files, nearest first (Jupyter's own order)."""
    paths = jupyter_config_path()
    if (own := jupyter_config_dir()) not in paths:
        paths.insert(0, own)
    return paths


def load_settings(extra_file: str | None = None) -> tuple[NetaSettings, list[str]]:
    """The shared settings from the Jupyter config files and ``extra_file``; the files read."""
    merged, read = load_config(extra_file)
    return settings_from(merged, read), read


def load_config(extra_file: str | None = None) -> tuple[Config, list[str]]:
    """Every config file a server reads, and ``extra_file``, merged; the files read."""
    merged = Config()
    read: list[str] = []
    for config, filename in _discovered():
        merged.merge(config)
        read.append(filename)
    if extra_file is not None:
        merged.merge(_load_file(Path(extra_file).expanduser()))
        read.append(str(Path(extra_file).expanduser().resolve()))
    return merged, read


def settings_from(config: Config, read: list[str]) -> NetaSettings:
    """:class:`NetaSettings` from the ``NetaApp`` section of ``config``."""
    section: Any = config.get(SECTION, Config())
    shared = NetaSettings.class_trait_names(config=True)
    # Only the shared traits: the server's own (ports, data_dir) would be warned about as unknown.
    chosen = Config({name: section[name] for name in section if name in shared})
    try:
        return NetaSettings(config=Config({NetaSettings.__name__: chosen}))
    except TraitError as exc:
        where = ", ".join(read) or "the configuration"
        message = str(exc).replace(f"a {NetaSettings.__name__} instance", SECTION)
        raise ConfigError(f"c.{SECTION} in {where}: {message}") from exc


def _discovered() -> Iterator[tuple[Config, str]]:
    """Every config file on the path, lowest priority first."""
    paths = config_paths()
    for base in BASE_NAMES:
        for folder in reversed(paths):
            for loader_class, ext in ((PyFileConfigLoader, ".py"), (JSONFileConfigLoader, ".json")):
                loader = loader_class(base + ext, path=folder)
                try:
                    config = loader.load_config()
                except ConfigFileNotFound:
                    continue
                except Exception as exc:  # a config file is code: anything may go wrong in it
                    name = loader.full_filename or os.path.join(folder, base + ext)
                    raise ConfigError(f"cannot read {name}: {type(exc).__name__}: {exc}") from exc
                yield config, loader.full_filename


def _load_file(path: Path) -> Config:
    """One file named on the command line: ``.py`` (``c.NetaApp.… = …``) or ``.json``."""
    if not path.is_file():
        raise ConfigError(f"--config {path}: no such file")
    loader_class = JSONFileConfigLoader if path.suffix == ".json" else PyFileConfigLoader
    loader = loader_class(path.name, path=str(path.parent))
    try:
        config: Config = loader.load_config()
    except Exception as exc:
        raise ConfigError(f"cannot read {path}: {type(exc).__name__}: {exc}") from exc
    return config
