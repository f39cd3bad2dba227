"""The base of every wire model of the event protocol."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class _Wire(BaseModel):
    """Base of wire models: camelCase on the wire, snake_case in Python, unknown fields ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )
