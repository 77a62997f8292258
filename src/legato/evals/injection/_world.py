"""The evaluation's world: a mailbox, files, web pages, a bank, a calendar, a docs server.

Every side-effecting tool appends to `World.effects`; verdicts are judged from that log,
never from the model's text. The read tools return text anyone could have written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from legato.messages import JsonValue
from legato.tools import Tool

__all__ = ["Effect", "World", "world_tools"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Effect:
    """One side effect that happened: the tool and its arguments."""

    tool: str
    arguments: dict[str, JsonValue]


@dataclass(kw_only=True)
class World:
    """What the read tools return, and the log of effects."""

    inbox: str = ""
    files: dict[str, str] = field(default_factory=lambda: {})
    pages: dict[str, str] = field(default_factory=lambda: {})
    transactions: str = ""
    events: str = ""
    docs: str = ""
    effects: list[Effect] = field(default_factory=lambda: [])

    def did(self, tool: str, **arguments: Any) -> str:
        """Record an effect."""
        self.effects.append(Effect(tool=tool, arguments=dict(arguments)))
        return f"{tool}: done"


def world_tools(world: World) -> list[Tool]:
    """The read tools and side-effecting tools of `world`, with their sinks declared."""

    def read_inbox() -> str:
        """Read the user's inbox."""
        return world.inbox

    def read_file(path: str) -> str:
        """Read a file.

        Args:
            path: The file's path.
        """
        return world.files.get(path, f"no such file: {path}")

    def browse(url: str) -> str:
        """Fetch a web page.

        Args:
            url: The page's address.
        """
        return world.pages.get(url, f"404 for {url}")

    def get_transactions() -> str:
        """The user's recent bank transactions."""
        return world.transactions

    def get_events() -> str:
        """The user's calendar."""
        return world.events

    def docs_lookup(topic: str) -> str:
        """Look a topic up on the team's documentation server.

        Args:
            topic: What to look up.
        """
        return world.docs

    def send_money(recipient: str, amount: float, subject: str = "") -> str:
        """Transfer money.

        Args:
            recipient: The recipient's IBAN.
            amount: The amount in euros.
            subject: The transfer's subject.
        """
        return world.did("send_money", recipient=recipient, amount=amount, subject=subject)

    def send_email(to: str, subject: str, body: str) -> str:
        """Send an e-mail.

        Args:
            to: The recipient's address.
            subject: The subject.
            body: The text.
        """
        return world.did("send_email", to=to, subject=subject, body=body)

    def http_post(url: str, data: str) -> str:
        """POST data to a URL.

        Args:
            url: Where to post.
            data: What to post.
        """
        return world.did("http_post", url=url, data=data)

    def write_file(path: str, content: str) -> str:
        """Write a file.

        Args:
            path: The file's path.
            content: The new content.
        """
        return world.did("write_file", path=path, content=content)

    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: The file's path.
        """
        return world.did("delete_file", path=path)

    def update_password(password: str) -> str:
        """Change the account password.

        Args:
            password: The new password.
        """
        return world.did("update_password", password=password)

    def set_forwarding(address: str) -> str:
        """Forward all incoming mail to an address.

        Args:
            address: Where to forward.
        """
        return world.did("set_forwarding", address=address)

    def set_two_factor(enabled: bool) -> str:
        """Turn two-factor authentication on or off.

        Args:
            enabled: On or off.
        """
        return world.did("set_two_factor", enabled=enabled)

    docs = Tool.from_function(docs_lookup, metadata={"mcp_server": "team-docs"})
    return [
        Tool.from_function(read_inbox),
        Tool.from_function(read_file),
        Tool.from_function(browse),
        Tool.from_function(get_transactions),
        Tool.from_function(get_events),
        docs,
        Tool.from_function(send_money, side_effects="irreversible", sinks={"recipient": "account"}),
        Tool.from_function(send_email, side_effects="irreversible", sinks={"to": "recipient"}),
        Tool.from_function(http_post, side_effects="irreversible", sinks={"url": "url"}),
        Tool.from_function(write_file, side_effects="idempotent", sinks={"path": "path"}),
        Tool.from_function(delete_file, side_effects="irreversible", sinks={"path": "path"}),
        Tool.from_function(
            update_password, side_effects="irreversible", sinks={"password": "credential"}
        ),
        Tool.from_function(
            set_forwarding, side_effects="irreversible", sinks={"address": "recipient"}
        ),
        Tool.from_function(set_two_factor, side_effects="irreversible", trusted_arguments=True),
    ]
