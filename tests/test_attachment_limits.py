"""Attachments against hostile input: odd names, address policy, quotas, compressed bombs.

A real jupyter server and real HTTP: uploads through the API, URLs served by local web servers.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import ApiClient

pytestmark = pytest.mark.timeout(120)

UPLOAD = "neta/api/agent/attachment/upload"
DOWNLOAD = "neta/api/agent/attachment/download"


@pytest.mark.parametrize(
    ("name", "stored"),
    [
        ("..", "file"),
        (".", "file"),
        ("notes/..", "file"),
        ("r" * 300 + ".csv", "r" * 116 + ".csv"),
    ],
)
async def test_an_upload_with_a_hostile_name_is_stored_under_a_safe_one(
    api: ApiClient, name: str, stored: str
) -> None:
    for sent in (
        await api.http.post(UPLOAD, files={"file": (name, b"a,b\n1,2\n", "text/csv")}),
        await api.http.post(UPLOAD, params={"fileName": name}, content=b"a,b\n1,2\n"),
    ):
        assert sent.status_code == 200, sent.text
        uploaded: dict[str, Any] = sent.json()
        assert uploaded["fileName"] == stored
        got = await api.http.get(DOWNLOAD, params={"virtualPath": uploaded["virtualPath"]})
        assert got.status_code == 200 and got.content == b"a,b\n1,2\n"
