r"""Skills: folders with a `SKILL.md`, loaded progressively (the Agent Skills convention).

```
pdf-forms/
  SKILL.md        front matter (name, description) between --- lines, then instructions
  reference.md    optional files the instructions point to
```

Only each skill's name and description sit in the context (`SkillSet.index()`); the model
reads the instructions with `open_skill` and the other files with `read_skill_file` when it
needs them. A child receives only the skills its parent names for it (`SkillSet.subset`).

The front matter is parsed by a small strict parser (no YAML dependency): `key: value`
lines, values optionally quoted, one level of indented `key: value` lines under a key with
no value (e.g. `metadata:`), and `>` / `|` block values. Anything else is a `SkillError`
naming the file and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from legato.exceptions import SkillError, ToolError
from legato.tools import Tool

__all__ = ["Skill", "SkillSet", "load_skill", "load_skills", "parse_front_matter"]

_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*):(?:\s+(.*))?$")
_MAX_FILE_BYTES = 256_000


def _unquote(value: str, where: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    if value[:1] in "\"'" or value[-1:] in "\"'":
        msg = f"{where}: unbalanced quotes in {value!r}"
        raise SkillError(msg)
    return value


def parse_front_matter(text: str, *, source: str = "SKILL.md") -> tuple[dict[str, object], str]:
    """Split a `SKILL.md` into its front matter (a dict) and the instructions after it."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        msg = f"{source}: must start with a '---' front matter line"
        raise SkillError(msg)
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        msg = f"{source}: the front matter is not closed by a '---' line"
        raise SkillError(msg) from None
    data: dict[str, object] = {}
    i = 1
    while i < end:
        line = lines[i]
        where = f"{source}:{i + 1}"
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        match = _KEY.match(line)
        if match is None:
            msg = f"{where}: expected 'key: value', got {line!r}"
            raise SkillError(msg)
        key, value = match.group(1), (match.group(2) or "").strip()
        if key in data:
            msg = f"{where}: duplicate key {key!r}"
            raise SkillError(msg)
        block: list[str] = []
        j = i + 1
        while j < end and (lines[j].startswith((" ", "\t")) or not lines[j].strip()):
            block.append(lines[j])
            j += 1
        while block and not block[-1].strip():
            block.pop()
        if value in (">", "|"):
            parts = [b.strip() for b in block]
            data[key] = (" " if value == ">" else "\n").join(parts).strip()
        elif value:
            if block:
                msg = f"{source}:{i + 2}: unexpected indented line after {key!r}"
                raise SkillError(msg)
            data[key] = _unquote(value, where)
        else:
            nested: dict[str, str] = {}
            for offset, sub in enumerate(block, start=i + 2):
                if not sub.strip():
                    continue
                sub_match = _KEY.match(sub.strip())
                if sub_match is None or not sub_match.group(2):
                    msg = f"{source}:{offset}: expected an indented 'key: value', got {sub!r}"
                    raise SkillError(msg)
                nested[sub_match.group(1)] = _unquote(sub_match.group(2), f"{source}:{offset}")
            data[key] = nested
        i = j
    body = "\n".join(lines[end + 1 :]).strip()
    return data, body


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """One skill: its name, description, instructions and folder."""

    name: str
    description: str
    instructions: str
    path: Path | None = None
    """The skill's folder (None for a skill built in code)."""
    metadata: Mapping[str, object] = field(default_factory=lambda: {})
    """Other front matter fields (license, allowed-tools, metadata, ...)."""

    def __post_init__(self) -> None:
        where = str(self.path / "SKILL.md") if self.path else f"skill {self.name!r}"
        if not _NAME.match(self.name) or len(self.name) > 64:
            msg = f"{where}: invalid skill name {self.name!r} (lowercase letters, digits and '-', at most 64)"
            raise SkillError(msg)
        if not self.description.strip() or len(self.description) > 1024:
            msg = f"{where}: the description must be 1 to 1024 characters"
            raise SkillError(msg)

    def files(self) -> list[str]:
        """The skill's other files, as paths relative to its folder."""
        if self.path is None:
            return []
        return sorted(
            str(p.relative_to(self.path))
            for p in self.path.rglob("*")
            if p.is_file() and p.name != "SKILL.md" and not p.is_symlink()
        )

    def read_file(self, relative: str) -> str:
        """A file of the skill, confined to its folder."""
        if self.path is None:
            msg = f"skill {self.name!r} has no files"
            raise ToolError(msg)
        root = self.path.resolve()
        target = (root / relative).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            msg = f"skill {self.name!r} has no file {relative!r}; its files are: {', '.join(self.files()) or 'none'}"
            raise ToolError(msg)
        data = target.read_bytes()[:_MAX_FILE_BYTES]
        return data.decode("utf-8", errors="replace")


def load_skill(folder: str | Path) -> Skill:
    """Load the skill in `folder` (its `SKILL.md` must name it after the folder)."""
    root = Path(folder)
    manifest = root / "SKILL.md"
    if not manifest.is_file():
        msg = f"{manifest}: not found (a skill folder needs a SKILL.md)"
        raise SkillError(msg)
    data, body = parse_front_matter(manifest.read_text(encoding="utf-8"), source=str(manifest))
    name, description = data.pop("name", None), data.pop("description", None)
    if not isinstance(name, str) or not isinstance(description, str):
        msg = f"{manifest}: the front matter needs 'name' and 'description' values"
        raise SkillError(msg)
    if name != root.name:
        msg = f"{manifest}: the skill is named {name!r} but its folder is {root.name!r}"
        raise SkillError(msg)
    return Skill(name=name, description=description, instructions=body, path=root, metadata=data)


def load_skills(directory: str | Path) -> SkillSet:
    """Every skill in the sub-folders of `directory` that has a `SKILL.md`."""
    root = Path(directory)
    if not root.is_dir():
        msg = f"{root}: not a directory of skills"
        raise SkillError(msg)
    return SkillSet(load_skill(p) for p in sorted(root.iterdir()) if (p / "SKILL.md").is_file())


class SkillSet:
    """A set of skills, the index shown to the model, and the tools that open them."""

    __slots__ = ("_skills",)

    def __init__(self, skills: Iterable[Skill] = ()) -> None:
        self._skills: dict[str, Skill] = {}
        for s in skills:
            if s.name in self._skills:
                msg = f"two skills are named {s.name!r}"
                raise SkillError(msg)
            self._skills[s.name] = s

    @property
    def names(self) -> list[str]:
        """The skills' names."""
        return list(self._skills)

    def get(self, name: str) -> Skill | None:
        """The skill of that name."""
        return self._skills.get(name)

    def __iter__(self) -> Iterator[Skill]:
        return iter(self._skills.values())

    def __len__(self) -> int:
        return len(self._skills)

    def subset(self, names: Iterable[str]) -> SkillSet:
        """Only the named skills; a name this set lacks raises `ToolError` listing those it has."""
        wanted = list(dict.fromkeys(names))
        unknown = [n for n in wanted if n not in self._skills]
        if unknown:
            msg = f"unknown skills {unknown}; the skills you can grant are: {', '.join(self._skills) or 'none'}"
            raise ToolError(msg)
        return SkillSet(self._skills[n] for n in wanted)

    def index(self) -> str:
        """Names and descriptions, for the instructions (the instructions stay unloaded)."""
        if not self._skills:
            return ""
        lines = ["Skills you can open with the open_skill tool when a task calls for one:"]
        lines += [f"- {s.name}: {s.description}" for s in self._skills.values()]
        return "\n".join(lines)

    def tools(self) -> list[Tool]:
        """`open_skill` and `read_skill_file`, bound to these skills."""
        if not self._skills:
            return []

        def open_skill(name: str) -> str:
            """Load a skill's instructions and the list of its files.

            Args:
                name: The skill's name, from the skills list.
            """
            skill = self._lookup(name)
            files = skill.files()
            listing = (
                "\n\nFiles (read them with read_skill_file): " + ", ".join(files) if files else ""
            )
            return f"# Skill: {skill.name}\n\n{skill.instructions}{listing}"

        def read_skill_file(name: str, path: str) -> str:
            """Read one of a skill's files.

            Args:
                name: The skill's name.
                path: The file's path inside the skill folder, as open_skill lists it.
            """
            return self._lookup(name).read_file(path)

        index = ", ".join(self._skills)
        return [
            Tool.from_function(
                open_skill, description=f"Open a skill ({index}): its instructions and files."
            ),
            Tool.from_function(read_skill_file),
        ]

    def _lookup(self, name: str) -> Skill:
        skill = self._skills.get(name)
        if skill is None:
            msg = f"no skill named {name!r}; available: {', '.join(self._skills) or 'none'}"
            raise ToolError(msg)
        return skill

    def __repr__(self) -> str:
        return f"SkillSet({self.names})"
