"""Tools: `@tool`, `Tool`, `Toolset`, schemas from type hints, and `RunContext`."""

from legato.tools._catalog import ToolCatalog
from legato.tools._context import RunBudget, RunContext, RunScope
from legato.tools._contract import Conditions, StateAccess, ToolContract
from legato.tools._reconcile import Reconciled, Reconciler
from legato.tools._results import to_content
from legato.tools._schema import DocstringFormat, FunctionSchema, function_schema
from legato.tools._tool import SideEffects, SinkKind, Tool, tool
from legato.tools._toolset import Toolset, ToolSource, as_tool

__all__ = [
    "Conditions",
    "DocstringFormat",
    "FunctionSchema",
    "RunBudget",
    "RunContext",
    "Reconciled",
    "Reconciler",
    "RunScope",
    "SideEffects",
    "SinkKind",
    "StateAccess",
    "Tool",
    "ToolCatalog",
    "ToolContract",
    "ToolSource",
    "Toolset",
    "as_tool",
    "function_schema",
    "to_content",
    "tool",
]
