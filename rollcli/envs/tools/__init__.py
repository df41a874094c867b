"""Tools and tool environments: the model calls Python functions during an episode.

| module | holds |
| --- | --- |
| `tool` | `Tool`: a plain function with its JSON schema (derived by transformers), argument checks, a deadline |
| `catalog` | the built-in tools by name, user tools as ``"package.module:function"`` |
| `calculator` | the built-in `calculator`: arithmetic only, parsed with `ast` |
| `python_tool` | the built-in `python`: a program run in roll's code sandbox |
| `call_format` | ``<tool_call>`` / ``<answer>`` parsing; the tool declaration for templates without tools |
| `tasks` | task sources (the built-in ``arithmetic``), the held-out split, answer judges |
| `env` | `ToolEnv`, registered as the ``tool`` environment |

See docs/agents.md.
"""

from rollcli.envs.tools.env import ToolEnv
from rollcli.envs.tools.tool import Tool, ToolDefinitionError, ToolError

__all__ = ["Tool", "ToolDefinitionError", "ToolEnv", "ToolError"]
