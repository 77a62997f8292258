"""A hand-written stdio MCP server (no SDK) whose misbehaviour is chosen by argv[1].

Modes:
    ok          a well-behaved server (tools: echo, slow, die, change)
    garbage     answers everything with text that is not JSON-RPC
    silent      reads requests and never answers
    crash       writes to stderr and exits at once
    badschema   lists a tool whose inputSchema is not an object schema
    earlynotify sends tools/list_changed before answering initialize

`slow` reports progress 0 (when asked for progress) and sleeps until cancelled; when
`notifications/cancelled` arrives, the request id is appended to the file named in argv[2]
(so tests can see the cancel reached the server).
`die` exits mid-call. `change` removes `echo` from the tool list and announces it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
CANCEL_LOG = sys.argv[2] if len(sys.argv) > 2 else None
lock = threading.Lock()
state = {"echo": True}


def send(message: dict[str, object]) -> None:
    with lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def tools() -> list[dict[str, object]]:
    listed: list[dict[str, object]] = [
        {
            "name": "slow",
            "description": "Sleeps until cancelled.",
            "inputSchema": {"type": "object", "properties": {}},
        },
        {"name": "die", "description": "Exits mid-call.", "inputSchema": {"type": "object"}},
        {"name": "change", "description": "Drops echo.", "inputSchema": {"type": "object"}},
        {
            "name": "dotted.name/with spaces",
            "description": "A name legato must rename.",
            "inputSchema": {"type": "object"},
        },
    ]
    if state["echo"]:
        listed.insert(
            0,
            {
                "name": "echo",
                "description": "Echoes text.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
            },
        )
    if MODE == "badschema":
        listed.append(
            {"name": "broken", "description": "Bad schema.", "inputSchema": {"type": "string"}}
        )
    return listed


def text(value: str, *, error: bool = False) -> dict[str, object]:
    return {"content": [{"type": "text", "text": value}], "isError": error}


def call(request_id: object, params: dict[str, Any]) -> None:
    name = params.get("name")
    arguments: dict[str, Any] = params.get("arguments") or {}
    if name == "echo" and state["echo"]:
        send({"jsonrpc": "2.0", "id": request_id, "result": text(str(arguments.get("text")))})
    elif name == "dotted.name/with spaces":
        send({"jsonrpc": "2.0", "id": request_id, "result": text("renamed ok")})
    elif name == "slow":
        meta: dict[str, Any] = params.get("_meta") or {}
        token = meta.get("progressToken")
        if token is not None:  # tell the client the call is running
            progress: dict[str, Any] = {"progressToken": token, "progress": 0, "message": "go"}
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
        time.sleep(3600)
    elif name == "die":
        sys.stderr.write("scripted server: out of memory\n")
        sys.stderr.flush()
        os._exit(3)
    elif name == "change":
        state["echo"] = False
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        send({"jsonrpc": "2.0", "id": request_id, "result": text("echo removed")})
    else:
        error = {"code": -32602, "message": f"Unknown tool: {name}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})


def handle(message: dict[str, Any]) -> None:
    method = message.get("method")
    request_id = message.get("id")
    params: dict[str, Any] = message.get("params") or {}
    if method == "initialize":
        if MODE == "earlynotify":
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "scripted", "version": "1"},
        }
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools()}})
    elif method == "tools/call":
        threading.Thread(target=call, args=(request_id, params), daemon=True).start()
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})
    elif method == "notifications/cancelled" and CANCEL_LOG:
        with Path(CANCEL_LOG).open("a", encoding="utf-8") as log:
            log.write(f"{params.get('requestId')}\n")
    elif request_id is not None:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})


def main() -> None:
    if MODE == "crash":
        sys.stderr.write("scripted server: cannot open the database\n")
        sys.exit(2)
    for line in sys.stdin:
        if MODE == "garbage":
            sys.stdout.write("this is not json-rpc\n")
            sys.stdout.flush()
            continue
        if MODE == "silent":
            continue
        handle(json.loads(line))


if __name__ == "__main__":
    main()
