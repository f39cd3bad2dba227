"""JupyterHub's single-user server as neta sees it: every request is of the user it was spawned for.

The hub's own identity provider needs a running hub (OAuth against its API); this one keeps the
server's token and names the user as the hub does, from ``JUPYTERHUB_USER``. A test copies this
file next to the server it starts (``python -m`` puts its working directory on the path).
"""

from __future__ import annotations

import os

from jupyter_server.auth.identity import IdentityProvider, User
from tornado.web import RequestHandler


class HubUser(IdentityProvider):
    """Authenticated by the server's token, as the user JupyterHub spawned the server for."""

    async def get_user(self, handler: RequestHandler) -> User | None:  # type: ignore[override]
        found = await self._get_user(handler)
        return None if found is None else User(username=os.environ["JUPYTERHUB_USER"])
