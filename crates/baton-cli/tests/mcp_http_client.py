"""Talks to `baton mcp-server --port` over streamable HTTP with the official Python SDK's client
(`mcp` on PyPI), carrying the bearer token: lists the tools, then makes each call of CALLS (a
JSON array of [tool, arguments]) in one session. Prints one JSON object with what it saw.

    python mcp_http_client.py URL TOKEN CALLS
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main():
    url, token, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = sorted(t.name for t in (await session.list_tools()).tools)
                results = []
                for tool, arguments in calls:
                    result = await session.call_tool(tool, arguments)
                    text = "".join(getattr(block, "text", "") for block in result.content)
                    results.append({"is_error": result.is_error, "text": text})
                print(json.dumps({"tools": tools, "results": results}))


asyncio.run(main())
