"""The JSON Schema of the widgets' comm: the run widget's contract and the crew board's.

Committed as ``js/schema/comm.schema.json`` (``python -m neta_jupyter.widgets --comm-schema``);
the TypeScript types of both widgets are generated from it, and a test fails while it is stale.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .board import BoardMessage, CrewBoardState
from .comm import KernelMessage, ViewMessage, WidgetTraits, _Message

__all__ = ["comm_schema"]


def comm_schema() -> dict[str, Any]:
    """JSON Schema of the whole contract: the run widget's messages and traits, the board's."""
    schema = _Protocol.model_json_schema(by_alias=True)
    schema["title"] = "CommProtocol"
    return schema


class _Protocol(_Message):
    """Every message and the traits, in one document (the TypeScript types are made from it)."""

    view_message: ViewMessage = Field(title="ViewMessage")
    """What a view sends."""
    kernel_message: KernelMessage = Field(title="KernelMessage")
    """What the kernel sends."""
    traits: WidgetTraits
    """The synced state."""
    board_message: BoardMessage = Field(title="BoardMessage")
    """What a crew board's view sends of its own (besides ``viewMessage``)."""
    board: CrewBoardState
    """The crew board's ``board`` trait."""
