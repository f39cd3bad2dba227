"""What the doctor and a kernel ask of the Jupyter server installed here, without starting one.

Only this package speaks jupyter_server: the doctor (:mod:`neta_jupyter.terminal.doctor`) and a
kernel looking for its server (:mod:`neta_jupyter.kernel.discovery`) ask through these. Each
imports jupyter_server when called, so neither a kernel nor the CLI pays for it otherwise.
"""

from __future__ import annotations

from typing import Any

from jupyter_core.paths import jupyter_config_path


def running_servers() -> list[dict[str, Any]]:
    """The Jupyter servers of this user that are running (their runtime files)."""
    from jupyter_server.serverapp import list_running_servers

    return list(list_running_servers())


def extension_enabled(extension: str) -> bool:
    """Whether a server would load ``extension``: the nearest config folder naming it decides."""
    from jupyter_server.extension.config import ExtensionConfigManager

    for folder in jupyter_config_path():  # nearest first, as the server reads them
        manager = ExtensionConfigManager(read_config_path=[folder])
        said = manager.get_jpserver_extensions()  # type: ignore[no-untyped-call]
        if extension in said:
            return bool(said[extension])
    return False


def extension_load_error(extension: str) -> Exception | None:
    """Why a server could not load ``extension`` (what it would log), or ``None`` when it can."""
    from jupyter_server.extension.manager import ExtensionPackage

    try:
        ExtensionPackage(name=extension, enabled=True).validate()  # type: ignore[no-untyped-call]
    except Exception as exc:
        return exc
    return None
