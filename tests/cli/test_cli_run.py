"""``plait run`` / ``plait chat`` through the console script, against a local wire server: answers,
threads, JSON events, and the usage errors a person hits (bad flags, unknown threads, empty
tasks, a file where a skills folder belongs)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_inprocess import Completed, run_plait
from wire_server import Reply, WireServer

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


def sse_text(text: str, *, prompt_tokens: int = 10) -> Reply:
    """A Chat Completions stream that answers ``text``."""

    def chunk(delta: dict[str, object], finish: str | None = None, usage: object = None) -> bytes:
        body = {
            "id": "chatcmpl-cli",
            "object": "chat.completion.chunk",
            "created": 1750000000,
            "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
            if delta or finish
            else [],
            "usage": usage,
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    words = text.split(" ")
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [
        chunk({"content": w + (" " if i < len(words) - 1 else "")}) for i, w in enumerate(words)
    ]
    chunks.append(chunk({}, "stop"))
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 3, "total_tokens": 13}
    chunks.append(chunk({}, None, usage))
    chunks.append(b"data: [DONE]\n\n")
    return Reply(200, chunks, "text/event-stream")


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


def plait(*args: str, home: Path, columns: int = 200, stdin: str | None = None) -> Completed:
    return run_plait(*args, home=home, columns=columns, stdin=stdin)


def test_run_without_a_provider_names_the_variables_and_model_forms(tmp_path: Path) -> None:
    result = plait("run", "hello", home=tmp_path)
    assert result.returncode == 2
    out = " ".join(result.stderr.split())
    for needle in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "--model",
        "openai:<model>",
        "anthropic:<model>",
        "openai-compatible:<model>@<base_url>",
        "plait demo",
    ):
        assert needle in out


def test_run_bad_model_spec_is_a_clear_error(tmp_path: Path) -> None:
    result = plait("run", "hello", "--model", "gpt4", home=tmp_path)
    assert result.returncode == 2 and "Unknown model spec 'gpt4'" in result.stderr


def test_run_streams_the_answer_and_thread_continues_across_processes(
    server: WireServer, tmp_path: Path
) -> None:
    spec = f"openai-compatible:test-model@{server.url}/v1"
    server._replies.append(sse_text("Hello from the wire."))
    first = plait("run", "first question", "--model", spec, home=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Hello from the wire." in first.stdout
    thread = first.stderr.split("thread: ")[1].split()[0]
    assert (tmp_path / "threads.sqlite3").exists()

    server._replies.append(sse_text("Second answer."))
    second = plait("run", "second question", "--model", spec, "--thread", thread, home=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    sent = server.bodies()[1]["messages"]
    contents = [(m["role"], m.get("content")) for m in sent if m["role"] != "system"]
    assert contents == [
        ("user", "first question"),
        ("assistant", "Hello from the wire."),
        ("user", "second question"),
    ]


def test_run_provider_error_exits_one_with_the_message(server: WireServer, tmp_path: Path) -> None:
    server.reply("invalid_api_key.json", status=401)
    result = plait("run", "hi", "--model", f"openai-compatible:m@{server.url}/v1", home=tmp_path)
    assert result.returncode == 1
    assert "OPENAI_COMPATIBLE_API_KEY" in " ".join(result.stderr.split())
    assert "OPENAI_COMPATIBLE_API_KEY" not in result.stdout  # reported once, as an error


def test_chat_runs_turns_until_eof(server: WireServer, tmp_path: Path) -> None:
    server._replies.extend([sse_text("One."), sse_text("Two.")])
    result = plait(
        "chat",
        "--model",
        f"openai-compatible:m@{server.url}/v1",
        home=tmp_path,
        stdin="first\nsecond\n",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "One." in result.stdout and "Two." in result.stdout
    assert [m["role"] for m in server.bodies()[1]["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
    ]


def test_threads_list_and_show_what_run_kept(server: WireServer, tmp_path: Path) -> None:
    server._replies.append(sse_text("Stored answer."))
    first = plait(
        "run", "remember this", "--model", f"openai-compatible:m@{server.url}/v1", home=tmp_path
    )
    thread = first.stderr.split("thread: ")[1].split()[0]
    listed = plait("threads", "list", home=tmp_path)
    assert listed.returncode == 0 and thread in listed.stdout and "remember this" in listed.stdout
    shown = plait("threads", "show", thread, home=tmp_path)
    assert shown.returncode == 0
    assert "remember this" in shown.stdout and "Stored answer." in shown.stdout
    missing = plait("threads", "show", "nope", home=tmp_path)
    assert missing.returncode == 2 and "No thread 'nope'" in missing.stderr


def test_threads_delete_removes_the_thread_and_its_offloaded_files(
    server: WireServer, tmp_path: Path
) -> None:
    import asyncio

    from plait.backends.sqlite import SQLiteBackend

    server._replies.append(sse_text("Doomed."))
    first = plait(
        "run", "temporary", "--model", f"openai-compatible:m@{server.url}/v1", home=tmp_path
    )
    thread = first.stderr.split("thread: ")[1].split()[0]
    blobs = SQLiteBackend(tmp_path / "threads-blobs.sqlite3")
    asyncio.run(blobs.write(f"large_tool_results/{thread}/1-abc-call", "big"))
    asyncio.run(blobs.write("large_tool_results/other/1-abc-call", "keep"))
    asyncio.run(blobs.aclose())
    deleted = plait("threads", "delete", thread, home=tmp_path)
    assert deleted.returncode == 0 and "1 offloaded file(s)" in deleted.stdout
    assert thread not in plait("threads", "list", home=tmp_path).stdout
    blobs = SQLiteBackend(tmp_path / "threads-blobs.sqlite3")
    assert asyncio.run(blobs.ls()) == ["large_tool_results/other/1-abc-call"]
    asyncio.run(blobs.aclose())
    assert plait("threads", "delete", thread, home=tmp_path).returncode == 2


def test_run_json_writes_one_event_per_line(server: WireServer, tmp_path: Path) -> None:
    server._replies.append(sse_text("JSON answer."))
    result = plait(
        "run", "hi", "--json", "--model", f"openai-compatible:m@{server.url}/v1", home=tmp_path
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "turn_started" and kinds[-2:] == ["turn_finished", "thread"]
    assert (
        "".join(e["text"] for e in events if e["type"] == "text_delta_received") == "JSON answer."
    )
    assert events[-2]["output"] == "JSON answer." and len(events[-1]["thread_id"]) == 32


def test_run_json_keeps_stdout_json_when_the_turn_fails(server: WireServer, tmp_path: Path) -> None:
    # Before: a failed turn printed a plain "thread: ..." line among the JSON lines.
    server.reply("invalid_api_key.json", status=401)
    result = plait(
        "run", "hi", "--json", "--model", f"openai-compatible:m@{server.url}/v1", home=tmp_path
    )
    assert result.returncode == 1
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[-1]["type"] == "thread" and len(events[-1]["thread_id"]) == 32
    assert "OPENAI_COMPATIBLE_API_KEY" in " ".join(result.stderr.split())


def test_run_verbose_prints_the_resolved_middleware_order(
    server: WireServer, tmp_path: Path
) -> None:
    spec = f"openai-compatible:test-model@{server.url}/v1"
    server._replies.append(sse_text("Ordered."))
    result = plait("run", "hi", "--model", spec, "-v", home=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    order = result.stderr.split("middleware, in order:")[1]
    names = [line.split(". ")[1].split(" ")[0].rstrip(":") for line in order.splitlines()[1:7]]
    assert names == [
        "RepetitionDetector",
        "ToolCallValidator",
        "OverflowRecoveryMiddleware",
        "TraceRecorder",
        "SummarizationMiddleware",
        "ResultEvictionMiddleware",
    ]
    assert "Ordered." in result.stdout


def _spec(server: WireServer) -> str:
    return f"openai-compatible:m@{server.url}/v1"


def test_run_keeps_the_thread_id_whole_on_a_narrow_terminal(
    server: WireServer, tmp_path: Path
) -> None:
    server._replies.append(sse_text("Short answer."))
    result = plait("run", "hi", "--model", _spec(server), home=tmp_path, columns=30)
    assert result.returncode == 0, result.stdout + result.stderr
    ids = re.findall(r"--thread ([0-9a-f]+)", result.stderr)
    assert ids and len(ids[0]) == 32, result.stderr


def test_run_with_an_unknown_thread_says_so_and_sends_nothing(
    server: WireServer, tmp_path: Path
) -> None:
    server._replies.append(sse_text("First."))
    first = plait("run", "hi", "--model", _spec(server), home=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    result = plait("run", "again", "--model", _spec(server), "--thread", "typo", home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    out = " ".join(result.stderr.split())
    assert "No thread 'typo'" in out and "plait threads list" in out
    assert len(server.received) == 1


def test_chat_with_an_unknown_thread_says_so(server: WireServer, tmp_path: Path) -> None:
    result = plait("chat", "--model", _spec(server), "--thread", "typo", home=tmp_path, stdin="")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "No thread 'typo'" in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


def test_run_with_an_empty_task_is_a_usage_error(server: WireServer, tmp_path: Path) -> None:
    result = plait("run", "  ", "--model", _spec(server), home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert server.received == []


def test_run_rejects_a_zero_token_budget_as_a_usage_error(
    server: WireServer, tmp_path: Path
) -> None:
    result = plait("run", "hi", "--model", _spec(server), "--max-input-tokens", "0", home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--max-input-tokens" in result.stderr
    assert server.received == []


def test_run_with_a_file_as_skills_folder_is_a_usage_error(
    server: WireServer, tmp_path: Path
) -> None:
    stray = tmp_path / "notes.txt"
    stray.write_text("not a skill")
    result = plait("run", "hi", "--model", _spec(server), "--skills", str(stray), home=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Not a skills folder" in " ".join(result.stderr.split())
    assert server.received == []


def test_run_accepts_a_skill_md_file_as_skills(server: WireServer, tmp_path: Path) -> None:
    skill = tmp_path / "greet"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: greet\ndescription: Say hello.\n---\nHello.\n")
    server._replies.append(sse_text("ok"))
    result = plait(
        "run", "hi", "--model", _spec(server), "--skills", str(skill / "SKILL.md"), home=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("spelling", ["SKILL.MD", "Skill.md"])
def test_run_accepts_a_skill_md_file_in_any_letter_case(
    server: WireServer, tmp_path: Path, spelling: str
) -> None:
    skill = tmp_path / "greet"
    skill.mkdir()
    (skill / spelling).write_text("---\nname: greet\ndescription: Say hello.\n---\nHello.\n")
    server._replies.append(sse_text("ok"))
    result = plait(
        "run", "hi", "--model", _spec(server), "--skills", str(skill / spelling), home=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Say hello." in json.dumps(server.bodies()[0])


def test_run_the_earlier_skills_folder_wins_a_name_clash(
    server: WireServer, tmp_path: Path
) -> None:
    # Before: disclosure mode let the *later* folder win (SkillsMiddleware's default), while
    # --skills' help, plait skills list and managed mode all let the earlier one win.
    for folder, says in (("first", "From the first folder."), ("second", "From the second.")):
        skill = tmp_path / folder / "greet"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(f"---\nname: greet\ndescription: {says}\n---\nHi.\n")
    server._replies.append(sse_text("ok"))
    folders = ["--skills", str(tmp_path / "first"), "--skills", str(tmp_path / "second")]
    result = plait(
        "run", "hi", "--model", _spec(server), "--no-default-skills", *folders, home=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sent = json.dumps(server.bodies()[0])
    assert "From the first folder." in sent and "From the second." not in sent


def test_run_prints_the_trace_line_once(server: WireServer, tmp_path: Path) -> None:
    server._replies.append(sse_text("ok"))
    result = plait("run", "hi", "--model", _spec(server), home=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.count("trace: plait ui") == 1, result.stderr
    assert result.stdout == "ok\n"  # piped: the answer only


def test_run_takes_a_system_prompt(server: WireServer, tmp_path: Path) -> None:
    server._replies.append(sse_text("Arr."))
    result = plait(
        "run",
        "hi",
        "--model",
        _spec(server),
        "--system-prompt",
        "Talk like a pirate.",
        home=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    system = server.bodies()[0]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Talk like a pirate.")
