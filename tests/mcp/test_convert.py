"""Translations between MCP values and legato's: content blocks and tool names."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import mcp.types as t
import pytest

from legato.exceptions import ConfigurationError
from legato.mcp import MCPClient, NameMap
from legato.mcp._convert import content_from_mcp, content_to_mcp
from legato.mcp.server import build_server
from legato.messages import DocumentPart, ImagePart, TextPart

PNG = b"\x89PNG\r\n\x1a\n0000"


def test_every_content_block_kind_becomes_a_part() -> None:
    b64 = base64.b64encode(PNG).decode()
    parts = content_from_mcp(
        [
            t.TextContent(type="text", text="hi"),
            t.ImageContent(type="image", data=b64, mime_type="image/png"),
            t.AudioContent(type="audio", data=b64, mime_type="audio/wav"),
            t.EmbeddedResource(
                type="resource",
                resource=t.TextResourceContents(
                    uri="x://t", text="embedded", mime_type="text/plain"
                ),
            ),
            t.EmbeddedResource(
                type="resource",
                resource=t.BlobResourceContents(uri="x://b", blob=b64, mime_type="application/pdf"),
            ),
            t.ResourceLink(type="resource_link", uri="x://l", name="link", description="a file"),
        ]
    )
    assert parts[0] == TextPart(text="hi")
    assert parts[1] == ImagePart(data=PNG, media_type="image/png")
    assert parts[2] == DocumentPart(data=PNG, media_type="audio/wav")
    assert parts[3] == TextPart(text="embedded")
    assert parts[4] == DocumentPart(data=PNG, media_type="application/pdf", title="x://b")
    assert parts[5] == TextPart(text="[resource link: x://l] (a file)")


def test_structured_content_alone_is_sent_as_json() -> None:
    assert content_from_mcp([], {"temp": 21}) == (TextPart(text='{"temp": 21}'),)


def test_parts_round_trip_through_mcp_blocks() -> None:
    parts = (
        TextPart(text="t"),
        ImagePart(data=PNG, media_type="image/png"),
        DocumentPart(data=b"a,b", media_type="text/csv", title="x://csv"),
        DocumentPart(data=PNG, media_type="application/octet-stream", title="x://bin"),
    )
    back = content_from_mcp(content_to_mcp(parts))
    assert back == (parts[0], parts[1], TextPart(text="a,b"), parts[3])


def test_names_are_made_valid_unique_and_reversible() -> None:
    names = NameMap(prefix="srv")
    plain = names.legato_name("read_file")
    dotted = names.legato_name("files.read")
    slashed = names.legato_name("files/read")
    long = names.legato_name("x" * 100)
    assert plain == "srv_read_file"
    assert dotted.startswith("srv_files_read_") and slashed.startswith("srv_files_read_")
    assert dotted != slashed
    assert len(long) <= 64
    for mcp_name in ("read_file", "files.read", "files/read", "x" * 100):
        assert names.original(names.legato_name(mcp_name)) == mcp_name
    assert names.legato_name("files.read") == dotted  # stable


@dataclass
class Workspace:
    root: Path


def test_roots_accept_workspace_objects(tmp_path: Path) -> None:
    client = MCPClient(build_server([]), roots=[Workspace(root=tmp_path), str(tmp_path), tmp_path])
    assert client._roots == [tmp_path.resolve()] * 3
    with pytest.raises(ConfigurationError, match="a root must be a path"):
        MCPClient(build_server([]), roots=[42])
