"""The structural prompt-injection defence: provenance, sinks, capabilities, quarantine.

```python
from legato import Agent, tool
from legato.injection import Grant, InjectionDefence

@tool(side_effects="irreversible", sinks={"to": "recipient"})
def send_email(to: str, subject: str, body: str) -> str: ...

defence = InjectionDefence(grant=Grant.of(["send_email"]), tools=[send_email, read_inbox])
agent = Agent(model, tools=[send_email, read_inbox], hooks=[defence])
```

A side-effecting call whose sink value (recipient, account, URL, path, command,
credential, id, day) came only from untrusted content is blocked; one whose value appears
nowhere is asked. `Trust` and `Endorse` policies vouch for values from data; a `Secret`
policy labels values that must not leave without a question. See docs/injection.md for what this guarantees and what it does not.
"""

from legato.injection._defence import InjectionDefence, Layers, Rule, SinkDecision
from legato.injection._extract import ExtractKind, extract_values, extraction_tool
from legato.injection._grants import SYNONYMS, Grant, grant_from_prompt
from legato.injection._match import ValueIndex, clean_text, normalise_email, normalise_url
from legato.injection._policy import Endorse, Policy, Secret, Trust
from legato.injection._provenance import Labelled, Source, SourceKind, label_journal, sources_of

__all__ = [
    "SYNONYMS",
    "Endorse",
    "ExtractKind",
    "Grant",
    "InjectionDefence",
    "Labelled",
    "Layers",
    "Policy",
    "Rule",
    "Secret",
    "SinkDecision",
    "Source",
    "SourceKind",
    "Trust",
    "ValueIndex",
    "clean_text",
    "extract_values",
    "extraction_tool",
    "grant_from_prompt",
    "label_journal",
    "normalise_email",
    "normalise_url",
    "sources_of",
]
