"""Tools the agent can call, their registry and the permission rules that guard them."""

from .agent import clarify, escalate, todo
from .delegate import delegate
from .files import list_files, read_file
from .permissions import DEFAULT_RULES, Decision, PermissionRule, decide
from .registry import KernelBridge, ProcessSink, Tool, ToolContext, ToolRegistry, tool
from .scope import SIDE_EVENTS, RunScope, RunSuspended
from .sending import send_file
from .skills import discover_skills, run_skill
from .values import SubTask, ToolError, ToolFile, ToolResult


def builtin_tools() -> list[Tool]:
    """Tools every runtime offers unless configured otherwise."""
    return [list_files, read_file, send_file, clarify, todo, run_skill, delegate, escalate]


__all__ = [
    "DEFAULT_RULES",
    "SIDE_EVENTS",
    "Decision",
    "KernelBridge",
    "PermissionRule",
    "ProcessSink",
    "RunScope",
    "RunSuspended",
    "SubTask",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolFile",
    "ToolRegistry",
    "ToolResult",
    "builtin_tools",
    "decide",
    "delegate",
    "discover_skills",
    "list_files",
    "read_file",
    "run_skill",
    "send_file",
    "tool",
]
