"""Drives `baton mcp-server` with the official Python SDK's client (`mcp` on PyPI), as Claude
Code or Codex would: starts a run, waits for its slow command, stops it, resumes it, waits for
the finish, reads its events and its diff; a start_run that names a base URL is refused (the
server's user's config, in HOME, names it). Prints one JSON object with what it saw.

    python mcp_client.py BATON WORKSPACE BASE_URL HOME
"""

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def text(result):
    return "".join(getattr(block, "text", "") for block in result.content)


async def call(session, tool, arguments):
    result = await session.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {text(result)}")
    return text(result)


async def wait_for(session, ref, predicate, what, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        events = json.loads(await call(session, "run_events", ref))
        if any(predicate(e) for e in events):
            return events
        await asyncio.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


async def main():
    baton, workspace, base_url, home = sys.argv[1:5]
    env = {"HOME": home, "PATH": os.environ.get("PATH", "")}
    params = StdioServerParameters(command=baton, args=["mcp-server"], env=env)
    seen = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            seen["tools"] = sorted(t.name for t in listed.tools)
            seen["read_only"] = sorted(
                t.name for t in listed.tools if t.annotations and t.annotations.read_only_hint
            )
            started = json.loads(
                await call(
                    session,
                    "start_run",
                    {"goal": "write a.txt", "workspace": workspace, "model": "m"},
                )
            )
            ref = {"workspace": workspace, "run_id": started["run_id"]}
            seen["run_id"] = started["run_id"]
            await wait_for(
                session, ref, lambda e: e["type"] == "tool_call_started", "the slow command"
            )
            seen["stop"] = await call(session, "stop_run", ref)
            seen["after_stop"] = json.loads(await call(session, "run_status", ref))["run"]["status"]
            seen["resume"] = await call(session, "resume_run", ref)
            events = await wait_for(
                session, ref, lambda e: e["type"] == "run_finished", "the run to finish"
            )
            seen["event_types"] = [e["type"] for e in events]
            seen["since_seq"] = [
                e["seq"] for e in json.loads(await call(session, "run_events", {**ref, "since": 5, "limit": 3}))
            ]
            seen["final"] = json.loads(await call(session, "run_status", ref))["run"]["status"]
            seen["diff"] = await call(session, "run_diff", ref)
            elsewhere = await session.call_tool(
                "start_run", {"goal": "x", "workspace": workspace, "base_url": base_url + "/evil"}
            )
            seen["base_url"] = {"is_error": elsewhere.is_error, "text": text(elsewhere)}
            bad = await session.call_tool("run_status", {"workspace": workspace})
            seen["missing_argument"] = {"is_error": bad.is_error, "text": text(bad)}
    print(json.dumps(seen))


asyncio.run(main())
