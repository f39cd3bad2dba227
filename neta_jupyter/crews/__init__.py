"""Crews: task graphs whose tasks are child runs, followed and steered as one crew run."""

from .definition import (
    CrewAgent,
    CrewDefinition,
    CrewDefinitionError,
    CrewInput,
    CrewTask,
    checked,
    fill,
    resolve_inputs,
)
from .loading import definition_of, load_file, parse_text

__all__ = [
    "CrewAgent",
    "CrewDefinition",
    "CrewDefinitionError",
    "CrewInput",
    "CrewTask",
    "checked",
    "definition_of",
    "fill",
    "load_file",
    "parse_text",
    "resolve_inputs",
]
