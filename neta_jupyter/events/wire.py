"""The base of every wire model of the event protocol, and of every event's body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class _Wire(BaseModel):
    """Base of wire models: camelCase on the wire, snake_case in Python, unknown fields ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class EventBody(_Wire):
    """Base of an event's body (``data``): the one place an event type is declared.

    A body names the event types that carry it in :attr:`event_types`, each with the sentence
    the catalogue shows for it. The ``EventType`` enum, the union of bodies, the JSON Schema,
    the widget's TypeScript catalogue and the docs are generated from these declarations
    (``python -m neta_jupyter.events --write``).
    """

    event_types: ClassVar[Mapping[str, str]] = {}
    """``{eventType: what it says}`` for every event type that carries this body."""

    declared: ClassVar[list[type[EventBody]]] = []
    """Every body that declares event types, in the order they were defined."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "event_types" in cls.__dict__ and cls not in EventBody.declared:
            EventBody.declared.append(cls)
