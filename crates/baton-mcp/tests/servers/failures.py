"""An MCP server written with the official Python SDK (`mcp` on PyPI) for baton's failure tests.

stdio. Its behaviour is set by environment variables — or by NAME=VALUE arguments, which
override them — so one script plays every case:

  MCP_CALLS_FILE     a file each tool call appends one line to ("NAME ARGS-JSON"), fsynced
                     before the tool does anything else: how a test counts what the server got
  MCP_SLOW_START     seconds to sleep before speaking at all (a slow start-up)
  MCP_LOOKUP_DELAY   seconds `lookup` (read-only) takes
  MCP_WRITE_DELAY    seconds `write_note` (mutating) takes
  MCP_EXTRA_TOOL     when set, one more tool, `extra` (a tool list that changed between runs)
  MCP_SLOW_FIRST     TOOL=SECONDS,…: the first call of TOOL ever recorded in MCP_CALLS_FILE takes
                     that long (a call to kill baton in; its re-run after a resume is quick)
"""

import json
import os
import sys
import time

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

for arg in sys.argv[1:]:
    name, sep, value = arg.partition("=")
    if sep:
        os.environ[name] = value

time.sleep(float(os.environ.get("MCP_SLOW_START", "0")))

server = MCPServer("failures")


def record(name: str, args: dict) -> None:
    path = os.environ.get("MCP_CALLS_FILE")
    if not path:
        return
    earlier = 0
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            earlier = sum(1 for line in f if line.split(" ", 1)[0] == name)
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{name} {json.dumps(args, sort_keys=True)}\n")
        f.flush()
        os.fsync(f.fileno())
    for entry in filter(None, os.environ.get("MCP_SLOW_FIRST", "").split(",")):
        tool, _, seconds = entry.partition("=")
        if tool == name and earlier == 0:
            time.sleep(float(seconds))


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup(key: str) -> str:
    """Look a key up (read-only)."""
    record("lookup", {"key": key})
    time.sleep(float(os.environ.get("MCP_LOOKUP_DELAY", "0")))
    return f"value of {key}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def write_note(text: str) -> str:
    """Write a note somewhere outside the workspace (mutating)."""
    record("write_note", {"text": text})
    time.sleep(float(os.environ.get("MCP_WRITE_DELAY", "0")))
    return "written"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def hang() -> str:
    """Never answers."""
    record("hang", {})
    time.sleep(3600)
    return "never"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def crash() -> str:
    """The server process dies in the middle of the call."""
    record("crash", {})
    sys.stderr.write("failures: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def huge() -> str:
    """A 5 MB result."""
    record("huge", {})
    return "0123456789" * 500_000


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def fail(reason: str) -> str:
    """Reports an error (isError, with the reason for the model) instead of a result."""
    record("fail", {"reason": reason})
    raise ToolError(reason)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def touch(path: str) -> str:
    """Creates a file at an absolute path (what the sandbox lets a server write)."""
    record("touch", {"path": path})
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write("touched\n")
    except OSError as e:
        raise ToolError(f"cannot create {path}: {e}") from e
    return f"created {path}"


if os.environ.get("MCP_EXTRA_TOOL"):

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def extra() -> str:
        """Only there when MCP_EXTRA_TOOL is set."""
        return "extra"


if __name__ == "__main__":
    server.run("stdio")
