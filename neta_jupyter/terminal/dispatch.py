"""The dispatch both terminal displays share: an event's body to the handler for its kind.

The plain renderer (:mod:`neta_jupyter.cli_render`) and the live one (:mod:`.live`) handle the
same bodies of a run's reply, its tool calls and its end, each drawing them its own way; what
only one of them shows goes to its :meth:`BodyRenderer._aside`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from ..events import (
    AgentEvent,
    EventType,
    MessageData,
    PermissionAskData,
    PermissionResolvedData,
    ProcessData,
    ReasoningData,
    TextData,
    ToolData,
    ToolSideData,
)

AttachmentLocator = Callable[[str], str]
"""Turns an attachment's virtual path into something the user can open (a file path or URL)."""


class BodyRenderer(ABC):
    """Renders events by their body; subclasses draw each kind."""

    def render(self, event: AgentEvent) -> None:
        """Dispatch on the body; bodies with nothing to show a person are skipped."""
        kind = event.event_type
        match event.data:
            case TextData() as text:
                self._text(kind, text)
            case ReasoningData() as reasoning:
                self._thinking(kind, reasoning)
            case ToolData() as tool:
                self._tool(kind, tool)
            case ToolSideData() as side:
                self._side(side)
            case PermissionAskData() as ask:
                self._ask(ask)
            case PermissionResolvedData() as resolved:
                self._resolved(resolved)
            case MessageData() as message:
                self._message(kind, message)
            case ProcessData() as process:
                self._process(process)
            case _:
                self._aside(kind, event)

    @abstractmethod
    def _text(self, kind: EventType, data: TextData) -> None: ...

    @abstractmethod
    def _thinking(self, kind: EventType, data: ReasoningData) -> None: ...

    @abstractmethod
    def _tool(self, kind: EventType, data: ToolData) -> None: ...

    @abstractmethod
    def _side(self, side: ToolSideData) -> None: ...

    @abstractmethod
    def _ask(self, ask: PermissionAskData) -> None: ...

    @abstractmethod
    def _resolved(self, data: PermissionResolvedData) -> None: ...

    @abstractmethod
    def _message(self, kind: EventType, data: MessageData) -> None: ...

    @abstractmethod
    def _process(self, data: ProcessData) -> None: ...

    @abstractmethod
    def _aside(self, kind: EventType, event: AgentEvent) -> None:
        """The bodies the shared dispatch does not handle (skip those with nothing to show)."""
