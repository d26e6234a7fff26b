"""Disclosure mode's ``read_file``: whole files by default, announced pages, confined reads, and a
turn that keeps reading its skills after another thread evicted its snapshot."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import Agent, FunctionModel, Message, ScriptedModel, ToolCall, ToolMessage, tool
from plait.models.base import ModelRequest
from plait.models.scripted import ScriptEntry
from plait.paths import PathEscapeError
from plait.skills import (
    FilesystemSource,
    MemorySource,
    PromptFormat,
    SkillCatalog,
    SkillFileNotFound,
    SkillPathError,
    SkillsMiddleware,
)
from plait.skills.disclosure.read_file import read_skill_file
from plait.skills.disclosure.snapshot import SkillSnapshot, take_snapshot

HEAD = "---\nname: big\ndescription: A very long skill.\n---\n"


def tool_data(message: Message) -> Any:
    """The data of a tool result, failing the test if ``message`` is not one."""
    assert isinstance(message, ToolMessage), message
    return message.data


def write_skill(root: Path, folder: str, text: str, files: dict[str, bytes] | None = None) -> Path:
    base = root / folder
    base.mkdir(parents=True, exist_ok=True)
    (base / "SKILL.md").write_text(text)
    for rel, data in (files or {}).items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(data)
    return base


async def snapshot_of(catalog: SkillCatalog) -> SkillSnapshot:
    await catalog.load()
    return take_snapshot(catalog, format=PromptFormat.MARKDOWN, budget=None, instructions=None)


async def test_read_of_a_5000_line_skill_md_returns_all_of_it(tmp_path: Path) -> None:
    lines = [
        f"{i}. Step {i}: run the check for this case and record what it printed."
        for i in range(1, 5001)
    ]
    text = HEAD + "\n".join(lines) + "\n"
    folder = write_skill(tmp_path / "skills", "big", text)
    path = str(folder / "SKILL.md")
    model = ScriptedModel([ToolCall("c1", "read_file", {"path": path}), "done"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[tmp_path / "skills"])])
    result = await agent.run("go", thread_id="t")
    message = result.new_messages[2]
    assert isinstance(message, ToolMessage) and not message.is_error
    assert message.data == text  # every one of the 5,000 lines, frontmatter included
    assert message.data.count("\n") == 5004
    stored = await agent.store.load("t")
    assert tool_data(stored.messages[2]) == text


async def test_file_over_max_chars_is_paged_and_the_cut_is_announced() -> None:
    lines = [f"line {i:03d} " + "x" * 20 for i in range(100)]
    text = "\n".join(lines) + "\n"  # 30 characters a line
    catalog = SkillCatalog([MemorySource({"big": {"SKILL.md": HEAD, "ref.md": text}})])
    snapshot = await snapshot_of(catalog)
    first = await read_skill_file(catalog, snapshot, "/skills/big/ref.md", max_chars=1000)
    header, _, body = first.partition("\n")
    assert header == (
        "[/skills/big/ref.md: lines 1-33 of 100; next offset 33 (the file is larger than one read)]"
    )
    assert body == "".join(line + "\n" for line in lines[:33])
    second = await read_skill_file(catalog, snapshot, "/skills/big/ref.md", 33, 10)
    assert second.split("\n", 1) == [
        "[/skills/big/ref.md: lines 34-43 of 100; next offset 43]",
        "".join(line + "\n" for line in lines[33:43]),
    ]
    last = await read_skill_file(catalog, snapshot, "/skills/big/ref.md", 95)
    assert last.startswith("[/skills/big/ref.md: lines 96-100 of 100; end of file]\n")
    past = await read_skill_file(catalog, snapshot, "/skills/big/ref.md", 500)
    assert past == "[/skills/big/ref.md: offset 500 is past the end of the file (100 lines)]"
    with pytest.raises(ValueError, match="offset must be >= 0"):
        await read_skill_file(catalog, snapshot, "/skills/big/ref.md", -1)


async def test_read_folder_lists_files_binary_gets_a_note_unknown_file_lists_files() -> None:
    source = MemorySource(
        {"pdf": {"SKILL.md": HEAD, "scripts/fill.py": "print()", "assets/logo.png": b"\x89PNG\xff"}}
    )
    catalog = SkillCatalog([source])
    snapshot = await snapshot_of(catalog)
    listing = await read_skill_file(catalog, snapshot, "/skills/pdf")
    assert listing == (
        "[/skills/pdf: folder of skill 'big']\nSKILL.md\nassets/logo.png\nscripts/fill.py"
    )
    assert await read_skill_file(catalog, snapshot, "skills/pdf/scripts/fill.py") == "print()"
    binary = await read_skill_file(catalog, snapshot, "/skills/pdf/assets/logo.png")
    assert binary == "[/skills/pdf/assets/logo.png: binary file, 5 bytes; not shown]"
    with pytest.raises(SkillFileNotFound, match=r"scripts/fill\.py"):
        await read_skill_file(catalog, snapshot, "/skills/pdf/missing.md")


@pytest.mark.parametrize(
    ("path", "error", "message"),
    [
        ("{root}/pdf/../outside/secret.txt", PathEscapeError, "'..' segment"),
        ("/skills/../etc/passwd", PathEscapeError, "'..' segment"),
        ("/etc/passwd", SkillPathError, "not inside a skill folder"),
        ("{root}/pdf/link.txt", PathEscapeError, "resolves outside"),
        ("{root}/pdf/SKILL.md\x00", PathEscapeError, "NUL byte"),
        ("{root}", SkillPathError, "not inside a skill folder"),
    ],
)
async def test_reads_are_confined_to_the_skill_folders(
    tmp_path: Path, path: str, error: type[Exception], message: str
) -> None:
    root = tmp_path / "skills"
    folder = write_skill(root, "pdf", "---\nname: pdf\ndescription: PDF work.\n---\nBody.\n")
    outside = tmp_path / "skills" / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (folder / "link.txt").symlink_to(tmp_path / "elsewhere.txt")
    (tmp_path / "elsewhere.txt").write_text("secret")
    catalog = SkillCatalog([FilesystemSource(root)])
    snapshot = await snapshot_of(catalog)
    with pytest.raises(error, match=message):
        await read_skill_file(catalog, snapshot, path.format(root=root.resolve()))


async def test_confinement_errors_reach_the_model_as_tool_errors(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "pdf", "---\nname: pdf\ndescription: PDF work.\n---\nBody.\n")
    model = ScriptedModel([ToolCall("c1", "read_file", {"path": "/etc/passwd"}), "ok"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[tmp_path / "skills"])])
    result = await agent.run("go")
    message = result.new_messages[2]
    assert isinstance(message, ToolMessage) and message.is_error
    assert message.data.startswith("Tool 'read_file' failed: SkillPathError: '/etc/passwd' is not")
    assert str((tmp_path / "skills" / "pdf" / "SKILL.md").resolve()) in message.data


@tool
def read_file(file_path: str) -> str:
    """The agent's own file reader."""
    return f"agent read {file_path}"


@tool
def crm_create(title: str) -> str:
    """Create a request."""
    return title


async def test_agent_with_its_own_read_file_keeps_it_and_its_reads_disclose_tools() -> None:
    text = "---\nname: crm\ndescription: CRM.\nmetadata:\n  include_tools: crm_create\n---\nBody.\n"
    model = ScriptedModel(
        [ToolCall("c1", "read_file", {"file_path": "/skills/crm/SKILL.md"}), "done"]
    )
    skills = SkillsMiddleware(
        sources=[MemorySource({"crm": {"SKILL.md": text}})], tools=[crm_create]
    )
    result = await Agent(model, tools=[read_file], middleware=[skills]).run("go")
    assert [t.name for t in model.requests[0].tools] == ["read_file"]
    assert model.requests[0].tools[0].description == "The agent's own file reader."
    assert tool_data(result.new_messages[2]) == "agent read /skills/crm/SKILL.md"
    assert [t.name for t in model.requests[1].tools] == ["read_file", "crm_create"]


def md(name: str, body: str = "Do it.") -> str:
    return f"---\nname: {name}\ndescription: The {name} skill.\n---\n{body}\n"


async def test_a_turn_keeps_reading_its_skills_when_another_thread_evicts_its_snapshot() -> None:
    # max_threads=1: thread "b" loading drops thread "a"'s snapshot while a's read_file call is
    # pending; the read must still answer from a's turn, not fail with "No skills are loaded
    # for this thread".
    source = MemorySource({"a": {"SKILL.md": md("a", "Body of a.")}})
    skills = SkillsMiddleware(sources=[source], max_threads=1)
    a_waiting, other_done = asyncio.Event(), asyncio.Event()

    @tool(metadata={"sequential": True})
    async def wait_for_other() -> str:
        """Wait."""
        a_waiting.set()
        await other_done.wait()
        return "ok"

    script: Iterator[ScriptEntry] = iter(
        [
            [
                ToolCall("w", "wait_for_other", {}),
                ToolCall("r", "read_file", {"path": "/skills/a/SKILL.md"}),
            ],
            "done",
        ]
    )

    def answer(request: ModelRequest) -> ScriptEntry:
        return next(script)

    agent_a = Agent(FunctionModel(answer), tools=[wait_for_other], middleware=[skills])
    agent_b = Agent(ScriptedModel(["b done"]), middleware=[skills], store=agent_a.store)
    run_a = asyncio.create_task(agent_a.run("go", thread_id="a"))
    await a_waiting.wait()
    await agent_b.run("go", thread_id="b")
    assert skills.snapshot("a") is None  # evicted while a's turn is still running
    other_done.set()
    result = await run_a
    reads = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    [read] = [m for m in reads if m.name == "read_file"]
    assert not read.is_error, read.text
    assert "Body of a." in read.text


class TextOnlyModel(ScriptedModel):
    """A scripted model that says it takes text only (``input_kinds``)."""

    input_kinds = frozenset({"text"})


@pytest.mark.parametrize("text_only", [False, True])
async def test_read_file_of_an_image_or_pdf_in_a_skill_folder_is_a_part_or_a_note(
    tmp_path: Path, text_only: bool
) -> None:
    from plait.messages import Blob, FilePart, ImagePart

    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    pdf = b"%PDF-1.7\n" + b"x" * 64
    folder = write_skill(
        tmp_path / "skills",
        "charts",
        "---\nname: charts\ndescription: Chart examples.\n---\nSee example.png.\n",
        {"example.png": png, "guide.pdf": pdf, "fake.png": b"not an image"},
    )
    calls = [
        ToolCall(f"c{i}", "read_file", {"path": str(folder / name)})
        for i, name in enumerate(["example.png", "guide.pdf", "fake.png"])
    ]
    kind = TextOnlyModel if text_only else ScriptedModel
    model = kind([*calls, "done"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[tmp_path / "skills"])])
    result = await agent.run("show me", thread_id="t")
    image, document, fake = (m for m in result.new_messages if isinstance(m, ToolMessage))
    if text_only:
        assert image.parts == [] and "does not take images" in image.data
        assert document.parts == [] and "does not take documents" in document.data
    else:
        assert image.parts == [ImagePart(Blob(png))] and not image.is_error
        assert document.parts == [FilePart(Blob(pdf), "application/pdf", "guide.pdf")]
        assert "cannot be shown" in fake.data and "not image/png" in fake.data
    model.assert_complete()
