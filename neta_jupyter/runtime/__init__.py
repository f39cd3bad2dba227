"""The agent runtime: the loop, its run API, and the translation of model streams into events."""

from .config import RuntimeConfig
from .errors import BadRunRequest, RunApiError, RunConflict, RunNotFound
from .manager import Runtime

__all__ = ["BadRunRequest", "RunApiError", "RunConflict", "RunNotFound", "Runtime", "RuntimeConfig"]
