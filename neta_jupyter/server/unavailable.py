"""When the store cannot be opened: every route of the run API answers 503 and says why.

Without this the extension would fail to load and each route would answer 404, which tells a
user nothing about a damaged database file or a full disk.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..store import StorageError
from .base import NetaHandler
from .errors import ApiError


class UnavailableHandler(NetaHandler):
    """Authenticates like every route, then answers 503 with what is wrong and what to do."""

    def _refuse(self) -> None:
        failure: StorageError = self.settings["neta_store_failure"]
        raise ApiError(failure.status, failure.code, failure.message)

    @web.authenticated
    @authorized
    def get(self, *args: str) -> None:
        """Refused."""
        self._refuse()

    @web.authenticated
    @authorized
    def post(self, *args: str) -> None:
        """Refused."""
        self._refuse()

    @web.authenticated
    @authorized
    def put(self, *args: str) -> None:
        """Refused."""
        self._refuse()

    @web.authenticated
    @authorized
    def delete(self, *args: str) -> None:
        """Refused."""
        self._refuse()
