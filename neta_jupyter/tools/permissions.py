"""Permission rules: tool-name and argument patterns → allow / ask / deny."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Action = Literal["allow", "ask", "deny"]


class PermissionRule(BaseModel):
    """One rule; the first rule that matches a call decides it.

    ``tool`` is a glob on the tool name; ``args`` maps argument names to globs matched against the
    argument's value (non-strings are matched on their JSON text); ``client``, a glob on the name
    of the outside agent calling through the MCP server, confines the rule to its calls.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(description="glob on the tool name, e.g. 'python' or 'read_*'")
    args: dict[str, str] = Field(default_factory=dict, description="argument name → glob")
    action: Action
    description: str | None = None
    client: str | None = Field(
        default=None, description="glob on the MCP client's name; the rule applies to it only"
    )

    @property
    def pattern(self) -> str:
        """The rule as one line, shown in the permission prompt."""
        parts = [self.tool] + [f"{k}={v}" for k, v in sorted(self.args.items())]
        if self.client is not None:
            parts.append(f"client={self.client}")
        return " ".join(parts)

    def matches(self, tool_name: str, arguments: dict[str, Any], client: str | None = None) -> bool:
        """Whether this rule applies to the call (``client``: the MCP client making it)."""
        if not fnmatchcase(tool_name, self.tool):
            return False
        if self.client is not None and (client is None or not fnmatchcase(client, self.client)):
            return False
        for key, glob in self.args.items():
            if key not in arguments:
                return False
            value = arguments[key]
            text = value if isinstance(value, str) else json.dumps(value)
            if not fnmatchcase(text, glob):
                return False
        return True


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome for one call and the rule behind it."""

    action: Action
    rule_description: str
    rule_pattern: str


DEFAULT_RULES: tuple[PermissionRule, ...] = (
    PermissionRule(
        tool="python", action="ask", description="running code in your kernel needs approval"
    ),
)


def decide(
    rules: list[PermissionRule] | tuple[PermissionRule, ...],
    tool_name: str,
    arguments: dict[str, Any],
    *,
    readonly: bool,
    always_allowed: frozenset[str] = frozenset(),
    client: str | None = None,
) -> Decision:
    """Apply the rules; then "always allow" remembered for the session; then the tool's nature.

    ``client``: the outside agent making the call through the MCP server, for rules naming one.
    """
    for rule in rules:
        if rule.matches(tool_name, arguments, client):
            if rule.action == "ask" and tool_name in always_allowed:
                return Decision("allow", "always allowed in this session", tool_name)
            return Decision(rule.action, rule.description or f"rule {rule.pattern}", rule.pattern)
    if readonly or tool_name in always_allowed:
        return Decision("allow", "read-only tool", tool_name)
    return Decision("ask", "tools that change things need approval", "*")


_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}


def stricter(one: Decision, other: Decision) -> Decision:
    """Of two decisions about one call, the one that lets it through less."""
    return other if _STRICTNESS[other.action] > _STRICTNESS[one.action] else one


def approval_digest(tool_name: str, arguments: str, state: str | None) -> str:
    """What an approval binds to, as hex SHA-256.

    The call (its tool, its argument JSON) and the state it acts on that could change before it
    runs (``Tool.binding``: a cell's source).
    """
    text = json.dumps([tool_name, arguments, state], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
