"""Talks to `baton mcp-server --port` over streamable HTTP with the official Python SDK's client
(`mcp` on PyPI), carrying the bearer token: lists the tools and asks for a run that does not
exist. Prints one JSON object with what it saw.

    python mcp_http_client.py URL TOKEN WORKSPACE
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main():
    url, token, workspace = sys.argv[1:4]
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = sorted(t.name for t in (await session.list_tools()).tools)
                missing = await session.call_tool(
                    "run_status", {"workspace": workspace, "run_id": "no-such-run"}
                )
                text = "".join(getattr(block, "text", "") for block in missing.content)
                print(json.dumps({"tools": tools, "is_error": missing.is_error, "text": text}))


asyncio.run(main())
