"""Large tool catalogs: schema tokens per request with and without `ToolCatalog`, and how
often `search_tools` finds the right tool.

Generates a 500-tool catalog (25 made-up services x 20 operations, with parameters) and
400 queries that paraphrase a target tool's purpose with synonyms (not its name). Prints:

- schema tokens per request: every tool's definition vs the catalog's `search_tools`
  (with and without the name index) plus the tools a search loaded;
- retrieval: the share of queries whose target is the first hit (hit@1) and among the
  loaded tools (hit@k for the default k=5, and k=10).

Tokens are estimated as characters / 4 of the JSON definitions (no tokenizer download).

    python bench/catalog.py
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

from legato.tools import Tool, ToolCatalog

SERVICES = {
    "calendar": ("Calendar", ["event", "invite", "reminder", "room"], ["schedule", "agenda"]),
    "mail": ("Mail", ["message", "draft", "label", "filter"], ["email", "inbox"]),
    "crm": ("CRM", ["contact", "deal", "lead", "account"], ["sales", "customer"]),
    "billing": ("Billing", ["invoice", "payment", "refund", "subscription"], ["finance", "charge"]),
    "inventory": ("Inventory", ["item", "warehouse", "stock", "supplier"], ["goods", "storage"]),
    "repo": ("Code hosting", ["repository", "branch", "pull_request", "issue"], ["git", "code"]),
    "tracker": ("Issue tracker", ["ticket", "sprint", "epic", "comment"], ["jira", "backlog"]),
    "chat": ("Team chat", ["channel", "thread", "reaction", "user"], ["slack", "conversation"]),
    "drive": ("File storage", ["file", "folder", "permission", "revision"], ["documents", "cloud"]),
    "weather": ("Weather", ["forecast", "alert", "station", "observation"], ["climate", "rain"]),
    "maps": ("Maps", ["route", "place", "geocode", "traffic"], ["navigation", "directions"]),
    "hr": ("HR", ["employee", "leave_request", "payslip", "review"], ["staff", "personnel"]),
    "analytics": ("Analytics", ["report", "dashboard", "metric", "segment"], ["statistics", "kpi"]),
    "database": ("Database", ["table", "query", "index", "backup"], ["sql", "records"]),
    "dns": ("DNS", ["zone", "record", "domain", "certificate"], ["hostname", "nameserver"]),
    "cluster": ("Kubernetes", ["pod", "deployment", "service", "node"], ["container", "k8s"]),
    "ci": ("CI", ["pipeline", "job", "artifact", "runner"], ["build", "continuous"]),
    "wiki": ("Wiki", ["page", "space", "attachment", "template"], ["knowledge", "docs"]),
    "shop": ("Web shop", ["order", "product", "cart", "coupon"], ["ecommerce", "store"]),
    "support": (
        "Help desk",
        ["case", "macro", "satisfaction_survey", "agent"],
        ["helpdesk", "service"],
    ),
    "social": ("Social media", ["post", "follower", "mention", "schedule"], ["twitter", "feed"]),
    "travel": ("Travel", ["flight", "hotel", "booking", "itinerary"], ["trip", "journey"]),
    "iot": ("IoT", ["device", "sensor", "firmware", "telemetry"], ["smart home", "hardware"]),
    "security": (
        "Security",
        ["vulnerability", "secret", "policy", "audit_log"],
        ["infosec", "risk"],
    ),
    "video": ("Video", ["meeting", "recording", "transcript", "webinar"], ["conference", "call"]),
}
ACTIONS = {
    "create": (["create", "add a new"], ["make", "set up", "open a new", "start a new"]),
    "get": (["get", "fetch the details of"], ["show me", "look at", "read", "what is in"]),
    "update": (["update", "change"], ["edit", "modify", "rename", "adjust"]),
    "delete": (["delete", "remove"], ["get rid of", "erase", "drop", "throw away"]),
    "list": (["list", "enumerate all"], ["show every", "see all", "give me all", "browse"]),
}
SYNONYMS = {
    "event": "appointment",
    "invite": "invitation",
    "reminder": "alarm",
    "room": "meeting space",
    "message": "mail",
    "draft": "unsent email",
    "label": "tag",
    "filter": "rule",
    "contact": "person",
    "deal": "opportunity",
    "lead": "prospect",
    "account": "company",
    "invoice": "bill",
    "payment": "transaction",
    "refund": "money back",
    "subscription": "plan",
    "item": "article",
    "warehouse": "depot",
    "stock": "quantity on hand",
    "supplier": "vendor",
    "repository": "repo",
    "branch": "fork line",
    "pull_request": "merge request",
    "issue": "bug",
    "ticket": "task",
    "sprint": "iteration",
    "epic": "initiative",
    "comment": "note",
    "channel": "room",
    "thread": "reply chain",
    "reaction": "emoji",
    "user": "member",
    "file": "document",
    "folder": "directory",
    "permission": "access right",
    "revision": "version",
    "forecast": "prediction",
    "alert": "warning",
    "station": "sensor site",
    "observation": "reading",
    "route": "path",
    "place": "location",
    "geocode": "coordinates",
    "traffic": "congestion",
    "employee": "worker",
    "leave_request": "vacation request",
    "payslip": "salary slip",
    "review": "appraisal",
    "report": "summary",
    "dashboard": "board",
    "metric": "measure",
    "segment": "cohort",
    "table": "relation",
    "query": "statement",
    "index": "lookup structure",
    "backup": "snapshot",
    "zone": "dns zone",
    "record": "entry",
    "domain": "site name",
    "certificate": "tls cert",
    "pod": "container group",
    "deployment": "rollout",
    "service": "endpoint",
    "node": "machine",
    "pipeline": "workflow",
    "job": "step",
    "artifact": "build output",
    "runner": "build agent",
    "page": "article",
    "space": "area",
    "attachment": "uploaded file",
    "template": "blueprint",
    "order": "purchase",
    "product": "catalog entry",
    "cart": "basket",
    "coupon": "discount code",
    "case": "request",
    "macro": "canned response",
    "satisfaction_survey": "feedback form",
    "agent": "support rep",
    "post": "update",
    "follower": "fan",
    "mention": "tag",
    "schedule": "timetable",
    "flight": "plane ticket",
    "hotel": "lodging",
    "booking": "reservation",
    "itinerary": "plan",
    "device": "gadget",
    "sensor": "detector",
    "firmware": "device software",
    "telemetry": "device data",
    "vulnerability": "weakness",
    "secret": "credential",
    "policy": "rule set",
    "audit_log": "activity trail",
    "meeting": "video call",
    "recording": "capture",
    "transcript": "written record",
    "webinar": "online seminar",
}


def _parameters(action: str, obj: str) -> dict[str, Any]:
    key = {"type": "string", "description": f"The {obj.replace('_', ' ')} id."}
    fields = {
        "title": {"type": "string", "description": "A short title."},
        "notes": {"type": "string", "description": "Free text details."},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels."},
        "visibility": {"type": "string", "enum": ["private", "team", "public"]},
    }
    if action == "create":
        return {"type": "object", "properties": fields, "required": ["title"]}
    if action == "list":
        page = {"type": "integer", "minimum": 1, "description": "Page number."}
        query = {"type": "string", "description": "Filter text."}
        return {"type": "object", "properties": {"query": query, "page": page, "limit": page}}
    if action == "update":
        return {"type": "object", "properties": {"id": key, **fields}, "required": ["id"]}
    return {"type": "object", "properties": {"id": key}, "required": ["id"]}


async def _noop(**_: Any) -> str:
    return "ok"


def build_catalog() -> list[Tool]:
    """25 services x 4 objects x 5 actions = 500 tools."""
    tools: list[Tool] = []
    for service, (product, objects, _) in SERVICES.items():
        for obj in objects:
            for action, (verbs, _) in ACTIONS.items():
                noun = obj.replace("_", " ")
                plural = "" if action != "list" else "s"
                tools.append(
                    Tool.from_schema(
                        name=f"{service}_{action}_{obj}",
                        description=(
                            f"{verbs[0].capitalize()} {'a' if action == 'create' else 'the'} "
                            f"{noun}{plural} in {product}. {verbs[1].capitalize()} {noun}{plural} "
                            f"by id or title; returns the {noun} as JSON."
                        ),
                        parameters=_parameters(action, obj),
                        function=_noop,
                    )
                )
    return tools


def build_queries(rng: random.Random, count: int) -> list[tuple[str, str, bool]]:
    """(query, target, literal noun?): paraphrases with synonyms, never the tool's name."""
    queries: list[tuple[str, str, bool]] = []
    services = list(SERVICES.items())
    for _ in range(count):
        service, (product, objects, aliases) = rng.choice(services)
        obj = rng.choice(objects)
        action = rng.choice(list(ACTIONS))
        verb = rng.choice(ACTIONS[action][1])
        literal = rng.random() >= 0.5
        noun = obj.replace("_", " ") if literal else SYNONYMS[obj]
        where = rng.choice([product, *aliases])
        template = rng.choice(
            [
                "{verb} the {noun} in {where}",
                "please {verb} a {noun} ({where})",
                "I want to {verb} my {where} {noun}",
                "{where}: {verb} {noun}",
            ]
        )
        query = template.format(verb=verb, noun=noun, where=where)
        queries.append((query, f"{service}_{action}_{obj}", literal))
    return queries


def tokens(tools: list[Tool]) -> int:
    """Estimated tokens of the definitions sent to a model (JSON characters / 4)."""
    payload = [
        {"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools
    ]
    return len(json.dumps(payload)) // 4


async def main() -> None:
    tools = build_catalog()
    queries = build_queries(random.Random(7), 400)
    print(f"catalog: {len(tools)} tools; {len(queries)} generated queries")
    full = tokens(tools)
    print(f"schema tokens per request, every tool sent:        {full:>7}")
    for mode in ("names", "none"):
        catalog = ToolCatalog(*tools, threshold=40, index=mode)
        listed = list(await catalog.list_tools())
        start = tokens(listed)
        catalog.load(t.name for t in catalog.search(queries[0][0]))
        after = tokens(list(await catalog.list_tools()))
        print(
            f"schema tokens per request, catalog index={mode:<5}:  {start:>7} before a search, "
            f"{after} with 5 tools loaded ({100 * (1 - after / full):.1f}% fewer)"
        )
    catalog = ToolCatalog(*tools, threshold=40)
    await catalog.list_tools()
    began = time.perf_counter()
    ranks: list[tuple[int | None, bool]] = []
    for query, target, literal in queries:
        found = [t.name for t in catalog.search(query, 10)]
        ranks.append((found.index(target) + 1 if target in found else None, literal))
    elapsed = (time.perf_counter() - began) / len(queries)
    for k in (1, 5, 10):
        hits = sum(1 for r, _ in ranks if r is not None and r <= k)
        share = 100 * hits / len(queries)
        print(f"right tool in the top {k:>2}: {hits}/{len(queries)} = {share:.1f}%")
    for literal, label in ((True, "the object's own word"), (False, "a synonym of the object")):
        subset = [r for r, lit in ranks if lit is literal]
        hits = sum(1 for r in subset if r is not None and r <= 5)
        share = 100 * hits / len(subset)
        print(f"  top 5, queries naming {label}: {hits}/{len(subset)} = {share:.1f}%")
    print(f"search time: {elapsed * 1e3:.2f} ms per query")


if __name__ == "__main__":
    asyncio.run(main())
