"""What the kernel tools read of the user's namespace: code that runs inside the kernel.

:func:`introspection_code` is a self-contained snippet (no neta imports) that prints one marked
JSON line describing the namespace or one variable; :func:`describe_variables` computes the same
lines where the namespace is at hand (the ``%neta`` magic, in the user's kernel).
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import textwrap
from typing import Any

from .values import ToolError

MAX_CAPTURED_VARIABLES = 200
"""Variables the ``%neta`` cell sends with its prompt; the rest are counted."""
MAX_CAPTURED_LINE = 1_000
"""Characters of one captured variable's summary line."""
AS_OF_PROMPT = "as of when the prompt ran"

_JSON_MARKER = "__neta_json__:"

# --- the introspection snippet (runs inside the user's kernel: self-contained, no neta imports)


def _neta_describe_namespace(namespace: dict[str, Any], name: str | None) -> str:
    import contextlib
    import json
    import types

    hidden: set[str] = {"In", "Out", "exit", "quit", "get_ipython", "open"}
    shell_getter = namespace.get("get_ipython")
    if callable(shell_getter):
        with contextlib.suppress(Exception):
            hidden |= set(getattr(shell_getter(), "user_ns_hidden", {}))

    def short(value: Any, limit: int = 80) -> str:
        try:
            text = " ".join(repr(value).split())
        except Exception as exc:
            text = f"<unprintable: {type(exc).__name__}>"
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def kind(value: Any) -> tuple[str, str]:
        cls = type(value)
        module = getattr(cls, "__module__", "") or ""
        return cls.__name__, module.split(".")[0]

    def summary(value: Any) -> str:
        cls_name, package = kind(value)
        shape = getattr(value, "shape", None)
        if package == "pandas" and cls_name == "DataFrame":
            columns = ", ".join(f"{c} ({t})" for c, t in value.dtypes.astype(str).items())
            head = f"{cls_name} {value.shape}"
            return head + (f", columns: {columns}" if columns else "")
        if package == "pandas" and cls_name == "Series":
            return f"Series {value.shape} {value.dtype}"
        if isinstance(shape, tuple) and hasattr(value, "dtype"):
            return f"{cls_name} {shape} {value.dtype}"
        if isinstance(value, (str, bytes, int, float, complex, bool)) or value is None:
            return f"{cls_name} = {short(value)}"
        if isinstance(value, (list, tuple, dict, set, frozenset)):
            return f"{cls_name} of {len(value)} = {short(value)}"
        return f"{cls_name} {short(value, 60)}"

    def detail(var: str, value: Any) -> str:
        cls_name, package = kind(value)
        lines = [f"{var}: {summary(value)}"]
        if package == "pandas" and cls_name == "DataFrame":
            lines[0] = f"{var}: DataFrame {tuple(value.shape)}"
            missing = value.isna().sum()
            lines.append("columns:")
            for column, dtype in value.dtypes.astype(str).items():
                lines.append(f"  {column}: {dtype}, {int(missing[column])} missing")
            lines.append("head(5):")
            lines.append(value.head(5).to_string(max_cols=30, max_colwidth=40))
        elif package == "pandas" and cls_name == "Series":
            lines[0] += f", {int(value.isna().sum())} missing"
            lines.append("head(5):")
            lines.append(value.head(5).to_string())
        elif hasattr(value, "shape") and hasattr(value, "dtype"):
            text = repr(value)
            lines.append(text if len(text) <= 2000 else text[:2000] + "…")
        else:
            text = repr(value)
            if len(text) > 80:
                lines.append(text if len(text) <= 2000 else text[:2000] + "…")
            doc = (getattr(value, "__doc__", None) or "").strip().splitlines()
            if callable(value) and doc:
                lines.append(doc[0])
        return "\n".join(lines)

    def visible(var: str, value: Any) -> bool:
        if var.startswith("_") or var in hidden:
            return False
        if (getattr(type(value), "__module__", "") or "").startswith("neta_jupyter"):
            return False  # the agent's own run handles are not the user's data
        return not (isinstance(value, types.ModuleType) or callable(value))

    if name is not None:
        if name not in namespace:
            return json.dumps({"error": f"no variable named {name!r} in the kernel"})
        try:
            return json.dumps({"text": detail(name, namespace[name])})
        except Exception as exc:
            return json.dumps({"error": f"could not inspect {name}: {type(exc).__name__}: {exc}"})
    rows = []
    for var, value in list(namespace.items()):
        if visible(var, value):
            try:
                rows.append(f"{var}: {summary(value)}")
            except Exception as exc:
                rows.append(f"{var}: {type(value).__name__} (not described: {exc})")
    return json.dumps({"rows": rows})


class _DropAnnotations(ast.NodeTransformer):
    """The kernel has no ``typing`` names in scope, and annotations are only for our checkers."""

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.returns = None
        self.generic_visit(node)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.stmt:
        if node.value is None:
            return ast.Pass()
        return ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno)


@functools.cache
def _snippet_source() -> str:
    tree = ast.parse(textwrap.dedent(inspect.getsource(_neta_describe_namespace)))
    return ast.unparse(ast.fix_missing_locations(_DropAnnotations().visit(tree)))


def introspection_code(name: str | None) -> str:
    """Code that prints one marked JSON line about the namespace, and leaves nothing behind."""
    source = _snippet_source()
    function = _neta_describe_namespace.__name__
    return (
        f"{source}\n"
        "try:\n"
        f"    print({_JSON_MARKER!r} + {function}(globals(), {name!r}))\n"
        "finally:\n"
        f"    del {function}\n"
    )


def describe_variables(namespace: dict[str, Any]) -> list[str]:
    """The lines ``list_variables`` shows, computed here (the magic runs in the user's kernel)."""
    rows: list[str] = json.loads(_neta_describe_namespace(namespace, None))["rows"]
    cut = [r if len(r) <= MAX_CAPTURED_LINE else r[: MAX_CAPTURED_LINE - 1] + "…" for r in rows]
    if len(cut) > MAX_CAPTURED_VARIABLES:
        more = len(cut) - MAX_CAPTURED_VARIABLES + 1
        cut = [*cut[: MAX_CAPTURED_VARIABLES - 1], f"… and {more} more variables"]
    return cut


def variables_as_of_prompt(rows: list[str]) -> str:
    """Captured variables for the model's context, saying when they were captured."""
    return f"({AS_OF_PROMPT})\n{listed(rows)}"


def listed(rows: list[str]) -> str:
    """Summary lines, one per variable, or that there are none."""
    return "\n".join(rows) if rows else "(no user variables were defined)"


def introspection_answer(output: str) -> dict[str, Any]:
    """The JSON the snippet printed; a :class:`ToolError` when it printed none."""
    for line in reversed(output.splitlines()):
        if line.startswith(_JSON_MARKER):
            answer: dict[str, Any] = json.loads(line[len(_JSON_MARKER) :])
            return answer
    raise ToolError(f"the kernel did not answer the introspection: {output[:500]}")
