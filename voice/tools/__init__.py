"""Tools the assistant can call: declared from Python functions (schema), chosen by
meaning and filled under a llama.cpp grammar (choose, grammar). docs/tools.md."""

from voice.tools.schema import Say, Tool, Toolbox, ToolError, make_tool

__all__ = ["Say", "Tool", "ToolError", "Toolbox", "make_tool"]
