"""Skills: strict front matter, progressive loading, confinement, inheritance by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from legato import Agent
from legato.events import SpawnStarted, ToolCallFinished
from legato.exceptions import SkillError, ToolError
from legato.spawn import SkillSet, load_skill, load_skills, parse_front_matter, spawn_tools
from legato.testing import ScriptedModel, call, reply


def write_skill(root: Path, name: str, description: str, body: str = "Do it well.") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n{body}\n", encoding="utf-8"
    )
    return folder


def test_front_matter_values_quotes_blocks_and_nested_maps() -> None:
    text = (
        "---\n"
        "name: pdf-forms\n"
        'description: "Fill PDF forms: fields, checkboxes"\n'
        "license: MIT\n"
        "long: >\n"
        "  folded over\n"
        "  two lines\n"
        "metadata:\n"
        "  author: someone\n"
        "  version: '1.2'\n"
        "---\n"
        "# Instructions\n"
        "Step one.\n"
    )
    data, body = parse_front_matter(text)
    assert data == {
        "name": "pdf-forms",
        "description": "Fill PDF forms: fields, checkboxes",
        "license": "MIT",
        "long": "folded over two lines",
        "metadata": {"author": "someone", "version": "1.2"},
    }
    assert body == "# Instructions\nStep one."


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("name: x\n", "must start with a '---'"),
        ("---\nname: x\n", "not closed"),
        ("---\nname x\n---\n", "SKILL.md:2: expected 'key: value'"),
        ("---\nname: a\nname: b\n---\n", "SKILL.md:3: duplicate key 'name'"),
        ('---\ndescription: "open\n---\n', "SKILL.md:2: unbalanced quotes"),
        ("---\nmetadata:\n  - item\n---\n", "SKILL.md:3: expected an indented"),
    ],
)
def test_malformed_front_matter_names_the_file_and_line(text: str, problem: str) -> None:
    with pytest.raises(SkillError, match=problem.replace("(", r"\(")):
        parse_front_matter(text, source="SKILL.md")


def test_loading_checks_names_and_folders(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "csv-report", "Build CSV reports.")
    (folder / "template.csv").write_text("a,b\n", encoding="utf-8")
    skill = load_skill(folder)
    assert skill.name == "csv-report"
    assert skill.files() == ["template.csv"]
    wrong = write_skill(tmp_path / "other", "Bad_Name", "x")
    with pytest.raises(SkillError, match="invalid skill name"):
        load_skill(wrong)
    mismatch = tmp_path / "elsewhere"
    mismatch.mkdir()
    (mismatch / "SKILL.md").write_text(
        "---\nname: csv-report\ndescription: d\n---\n", encoding="utf-8"
    )
    with pytest.raises(SkillError, match="its folder is 'elsewhere'"):
        load_skill(mismatch)
    with pytest.raises(SkillError, match="needs a SKILL.md"):
        load_skill(tmp_path / "missing")


def test_skill_files_are_confined_to_the_skill_folder(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "s", "A skill.")
    (tmp_path / "secret.txt").write_text("top secret", encoding="utf-8")
    (folder / "ref.md").write_text("reference", encoding="utf-8")
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    skill = load_skill(folder)
    assert skill.read_file("ref.md") == "reference"
    for escape in ("../secret.txt", "link.txt", "/etc/passwd"):
        with pytest.raises(ToolError, match="has no file"):
            skill.read_file(escape)


async def test_skills_load_progressively_and_children_inherit_only_named_ones(
    tmp_path: Path,
) -> None:
    write_skill(tmp_path, "release-notes", "Write release notes.", "Group changes by area.")
    write_skill(tmp_path, "db-migrations", "Write database migrations.", "Never drop columns.")
    skills = load_skills(tmp_path)
    assert skills.names == ["db-migrations", "release-notes"]
    child = ScriptedModel([reply(call("open_skill", {"name": "release-notes"})), "notes written"])
    parent = ScriptedModel(
        [reply(call("spawn", {"task": "write notes", "skills": ["release-notes"]})), "ok"]
    )
    agent = Agent(
        parent,
        instructions="Lead.\n\n" + skills.index(),
        tools=[spawn_tools([], model=child, skills=skills)],
    )
    result = await agent.run("go")
    # the parent's context holds names and descriptions only, not the instructions
    parent_instructions = parent.requests[0].instructions or ""
    assert "release-notes: Write release notes." in parent_instructions
    assert "Group changes by area." not in parent_instructions
    # the child knows only the skill it was given
    child_instructions = child.requests[0].instructions or ""
    assert "release-notes" in child_instructions
    assert "db-migrations" not in child_instructions
    opened = child.requests[1].messages[-1].tool_results[0].text
    assert "Group changes by area." in opened
    started = next(e for e in result.journal if isinstance(e, SpawnStarted))
    assert started.skills == ("release-notes",)
    assert (
        next(e for e in result.journal if isinstance(e, ToolCallFinished)).result.text
        == "notes written"
    )


def test_a_skill_set_without_skills_offers_no_tools() -> None:
    assert SkillSet().tools() == []
    assert SkillSet().index() == ""


async def test_a_child_cannot_open_a_skill_it_was_not_given(tmp_path: Path) -> None:
    from legato import RunContext

    write_skill(tmp_path, "alpha", "First.")
    write_skill(tmp_path, "beta", "Second.")
    granted = load_skills(tmp_path).subset(["alpha"])
    open_skill = granted.tools()[0]
    ctx: RunContext[None] = RunContext(deps=None, run_id="child")
    assert "First." not in await open_skill.invoke({"name": "alpha"}, ctx)
    with pytest.raises(ToolError, match="no skill named 'beta'"):
        await open_skill.invoke({"name": "beta"}, ctx)
