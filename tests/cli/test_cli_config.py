"""plait.toml, [tool.plait] and $PLAIT_HOME/config.toml: merged, validated, shown with origins."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from cli_inprocess import empty_home, run_plait
from typer.testing import CliRunner

from plait.cli.agents import Mode, SandboxChoice
from plait.cli.app import app
from plait.cli.config import MAX_CONFIG_BYTES, ConfigFileError, load_settings
from plait.cli.options import Flags, agent_options, merged_settings
from plait.models.openai import OpenAIChatModel
from plait.models.registry import resolve_model
from plait.models.scripted import ScriptedModel


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty $HOME and $PLAIT_HOME, a project folder as the current folder, no model env."""
    return empty_home(tmp_path, monkeypatch)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_project_file_overrides_user_file_key_by_key(home: Path) -> None:
    user = write(
        home / "plait-home" / "config.toml",
        'model = "openai:gpt-4o"\nmode = "managed"\n[limits]\ntool_timeout = 5\n',
    )
    project = write(
        home / "project" / "plait.toml",
        'model = "anthropic:claude-haiku-4-5"\n[limits]\nmodel_calls_per_turn = 9\n',
    )
    settings = load_settings()
    assert settings.get("model") == "anthropic:claude-haiku-4-5"
    assert settings.origins["model"] == str(project)
    assert (settings.get("mode"), settings.origins["mode"]) == ("managed", str(user))
    assert settings.get("limits.tool_timeout") == 5
    assert settings.get("limits.model_calls_per_turn") == 9
    assert settings.origins["limits.max_input_tokens"] == "default"
    assert settings.files == [user, project]


def test_environment_overrides_files_and_flags_override_everything(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(home / "project" / "plait.toml", 'model = "openai:gpt-4o"\ntimeout = 30\n')
    monkeypatch.setenv("PLAIT_MODEL", "openai:gpt-4.1")
    monkeypatch.setenv("PLAIT_MODEL_TIMEOUT", "45")
    settings = load_settings()
    assert (settings.get("model"), settings.origins["model"]) == ("openai:gpt-4.1", "$PLAIT_MODEL")
    assert settings.get("timeout") == 45.0
    settings = merged_settings(Flags(model="openai:o3", timeout=7, mode=Mode.MANAGED))
    assert (settings.get("model"), settings.origins["model"]) == ("openai:o3", "--model")
    assert (settings.get("timeout"), settings.origins["timeout"]) == (7, "--timeout")
    assert settings.origins["mode"] == "--mode"


def test_pyproject_tool_plait_is_read_from_a_parent_folder(home: Path) -> None:
    pyproject = write(
        home / "project" / "pyproject.toml",
        '[project]\nname = "x"\n[tool.plait]\nmode = "managed"\n',
    )
    (home / "project" / "src" / "deep").mkdir(parents=True)
    settings = load_settings(home / "project" / "src" / "deep")
    assert (settings.get("mode"), settings.origins["mode"]) == ("managed", str(pyproject))


def test_plait_toml_wins_over_pyproject_in_the_same_folder(home: Path) -> None:
    write(home / "project" / "pyproject.toml", '[tool.plait]\nmode = "managed"\n')
    toml = write(home / "project" / "plait.toml", 'mode = "disclosure"\n')
    settings = load_settings()
    assert settings.origins["mode"] == str(toml)
    assert settings.files == [toml]


def test_relative_paths_are_relative_to_their_file_and_skills_add_up(home: Path) -> None:
    write(home / "plait-home" / "config.toml", 'skills = ["~/my-skills"]\nstore = "t.db"\n')
    write(home / "project" / "plait.toml", 'skills = ["skills", "/abs/skills"]\n')
    settings = merged_settings(Flags(skills=[Path("cli-skills")]))
    assert settings.get("skills") == [
        "cli-skills",
        str(home / "project" / "skills"),
        "/abs/skills",
        str(home / "home" / "my-skills"),
    ]
    assert settings.get("store") == str(home / "plait-home" / "t.db")
    assert settings.origins["skills"].startswith("--skills, ")


def test_store_url_is_kept_as_written(home: Path) -> None:
    write(home / "project" / "plait.toml", 'store = "postgresql://u@localhost/db"\n')
    assert load_settings().get("store") == "postgresql://u@localhost/db"


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ('modle = "openai:gpt-4o"\n', ["unknown key 'modle' (known here: model, mode,"]),
        ("[limits]\nturns = 1\n", ["known here: model_calls_per_turn, tool_timeout"]),
        ("[limits]\ntool_timeout = -1\n", ["key 'limits.tool_timeout'", "seconds > 0"]),
        ('mode = "fast"\n', ["key 'mode'", "disclosure", "managed"]),
        ("[mcp.files]\nenv = {}\n", ["key 'mcp.files'", "exactly one of 'command'"]),
        ('[mcp.files]\ncommand = "x"\nmax_tools = 0\n', ["key 'mcp.files.max_tools'"]),
        ('[mcp.web]\nurl = "http://x"\ncommand = "srv"\n', ["exactly one of"]),
        ("[prices.m]\ninput = 1\n", ["key 'prices.m.output'"]),
        ("model = \n", ["not valid TOML"]),
    ],
)
def test_bad_config_names_the_file_and_the_key(home: Path, text: str, needles: list[str]) -> None:
    path = write(home / "project" / "plait.toml", text)
    with pytest.raises(ConfigFileError) as caught:
        load_settings()
    assert str(caught.value).startswith(f"{path}: ")
    for needle in needles:
        assert needle in str(caught.value)


def test_pyproject_errors_name_the_tool_plait_key(home: Path) -> None:
    write(home / "project" / "pyproject.toml", "[tool.plait]\ntimeout = 0\n")
    with pytest.raises(ConfigFileError, match=r"key 'tool\.plait\.timeout'"):
        load_settings()


def test_oversized_and_non_utf8_files_are_refused(home: Path) -> None:
    path = home / "project" / "plait.toml"
    path.write_bytes(b"# " + b"x" * MAX_CONFIG_BYTES)
    with pytest.raises(ConfigFileError, match="larger than"):
        load_settings()
    path.write_bytes(b'model = "\xff"\n')
    with pytest.raises(ConfigFileError, match="not UTF-8"):
        load_settings()


def test_bad_timeout_in_the_environment_is_a_configuration_error(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIT_MODEL_TIMEOUT", "soon")
    with pytest.raises(ConfigFileError.__mro__[1], match="PLAIT_MODEL_TIMEOUT='soon'"):
        load_settings()


def test_agent_options_follow_the_merged_settings(home: Path) -> None:
    write(
        home / "project" / "plait.toml",
        'mode = "managed"\nsystem_prompt = "Be brief."\nplain = true\nsandbox = "none"\n'
        "[limits]\nmax_input_tokens = 5000\nmodel_calls_per_turn = 3\ntool_timeout = 9\n"
        "[prices.scripted]\ninput = 1\noutput = 2\n"
        '[mcp.files]\ncommand = ["mcp-files", "--root", "."]\ndefer = true\n',
    )
    resolved = agent_options(load_settings(), model=ScriptedModel([]))
    assert resolved.options.mode is Mode.MANAGED
    assert resolved.options.sandbox is SandboxChoice.NONE
    assert resolved.options.system_prompt == "Be brief."
    assert resolved.options.max_input_tokens == 5000
    assert resolved.options.limits is not None
    assert resolved.options.limits.model_calls_per_turn == 3
    assert resolved.options.limits.tool_timeout == 9
    assert resolved.plain is True
    assert resolved.spec == "scripted"
    assert resolved.price is not None and resolved.price.output == 2
    assert resolved.mcp == {"files": {"command": ["mcp-files", "--root", "."], "defer": True}}


def test_config_show_prints_each_value_with_where_it_came_from(home: Path) -> None:
    toml = write(
        home / "project" / "plait.toml", 'model = "openai:gpt-4o"\n[limits]\ntool_timeout = 5\n'
    )
    result = CliRunner().invoke(app, ["config", "show", "--mode", "managed"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"config files: {toml}" in lines
    assert f'model = "openai:gpt-4o"  # {toml}' in lines
    assert f"limits.tool_timeout = 5.0  # {toml}" in lines
    assert 'mode = "managed"  # --mode' in lines
    assert "limits.max_input_tokens = 100000  # default" in lines


def test_config_show_json_and_the_model_a_provider_key_chooses(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    result = CliRunner().invoke(app, ["config", "show", "--format", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["files"] == []
    assert document["settings"]["model"] == {
        "value": "anthropic:claude-sonnet-4-5",
        "from": "a provider key in the environment",
    }


def test_config_show_takes_every_flag_run_shares_with_the_config(home: Path) -> None:
    # Before: --allow-scripts, --sandbox, --max-input-tokens, --system-prompt and --plain were
    # "no such option" here, though the help says flags override as they would for plait run.
    result = CliRunner().invoke(
        app,
        [
            "config",
            "show",
            "--allow-scripts",
            "--sandbox",
            "none",
            "--max-input-tokens",
            "5000",
            "--system-prompt",
            "Be brief.",
            "--plain",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    settings = json.loads(result.output)["settings"]
    assert settings["allow_scripts"] == {"value": True, "from": "--allow-scripts"}
    assert settings["sandbox"] == {"value": "none", "from": "--sandbox"}
    assert settings["limits.max_input_tokens"] == {"value": 5000, "from": "--max-input-tokens"}
    assert settings["system_prompt"] == {"value": "Be brief.", "from": "--system-prompt"}
    assert settings["plain"] == {"value": True, "from": "--plain"}


@pytest.mark.parametrize("command", [["run"], ["chat"], ["config", "show"]])
def test_run_chat_and_config_show_take_every_flag_of_flags(command: list[str]) -> None:
    found = typer.main.get_command(app)
    for name in command:
        assert isinstance(found, typer.core.TyperGroup)
        found = found.commands[name]
    assert {field.name for field in dataclasses.fields(Flags)} <= {p.name for p in found.params}


def test_config_show_with_a_bad_file_exits_2_naming_it(home: Path) -> None:
    path = write(home / "project" / "plait.toml", "[limits]\nturns = 3\n")
    result = CliRunner().invoke(app, ["config", "show"])
    assert result.exit_code == 2
    assert str(path) in " ".join(result.output.split())
    assert "unknown key 'limits.turns' (known here: model_calls_per_turn" in " ".join(
        result.output.split()
    )


def test_a_negative_flag_overrides_a_config_true(home: Path) -> None:
    write(home / "project" / "plait.toml", "allow_scripts = true\nplain = true\n")
    settings = merged_settings(Flags(allow_scripts=False, plain=False))
    assert (settings.get("allow_scripts"), settings.origins["allow_scripts"]) == (
        False,
        "--no-allow-scripts",
    )
    assert (settings.get("plain"), settings.origins["plain"]) == (False, "--markdown")
    assert load_settings().get("allow_scripts") is True


def test_an_unrelated_oversized_or_unreadable_pyproject_is_skipped_with_a_note(
    home: Path,
) -> None:
    # Before: every command failed on a parent's pyproject.toml over 1 MiB that had nothing
    # to do with plait.
    write(home / "pyproject.toml", "# " + "x" * MAX_CONFIG_BYTES + "\n[project]\n")
    (home / "project" / "locked").mkdir(parents=True)
    unreadable = home / "project" / "locked" / "pyproject.toml"
    unreadable.mkdir()  # not a file: passed over on the way up
    write(home / "project" / "plait.toml", 'mode = "managed"\n')
    inner = home / "project" / "locked" / "deep"
    inner.mkdir()
    settings = load_settings(inner)
    assert settings.get("mode") == "managed"  # the plait.toml further up still counts
    big = load_settings(home)
    assert big.get("mode") == "disclosure" and any(
        "pyproject.toml" in note and "skipped" in note for note in big.notes
    )


def test_an_oversized_pyproject_with_tool_plait_is_still_an_error(home: Path) -> None:
    write(home / "pyproject.toml", "[tool.plait]\n# " + "x" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(ConfigFileError, match="larger than"):
        load_settings(home)


def _plait(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The console script in a fresh interpreter (its own recursion limit and stack)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "OPENAI_"))}
    clean.update({"COLUMNS": "200", "NO_COLOR": "1", **env})
    return subprocess.run(
        [sys.executable, "-c", "from plait.cli import main; main()", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=clean,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("depth", [500, 5000])
@pytest.mark.parametrize(
    ("where", "nested"),
    [
        ("plait.toml", "skills = {a}"),
        ("plait-home/config.toml", "model = {a}"),
        ("pyproject.toml", "[tool.plait]\nmodel = {a}"),
        ("plait.toml", "[mcp.x]\nenv = {t}"),
    ],
)
def test_a_config_nested_hundreds_deep_is_a_diagnostic_naming_the_file(
    tmp_path: Path, where: str, nested: str, depth: int
) -> None:
    # Before: tomllib's RecursionError was a traceback in every command run in that folder.
    arrays, tables = "[" * depth + "]" * depth, "{a = " * depth + "1" + "}" * depth
    path = write(tmp_path / where, nested.format(a=arrays, t=tables) + "\n")
    (tmp_path / "plait-home").mkdir(exist_ok=True)
    commands = [["config", "show"], ["run", "hi", "--model", "openai-compatible:m@http://x/v1"]]
    for command in commands:
        result = _plait(*command, cwd=tmp_path, PLAIT_HOME=str(tmp_path / "plait-home"))
        output = " ".join((result.stdout + result.stderr).split())
        assert result.returncode == 2, output
        assert f"{path}: nests arrays or inline tables too deeply" in output
        assert "Traceback" not in output


@pytest.mark.parametrize(
    ("source", "key"),
    [("flag", "timeout"), ("file", "timeout"), ("env", "timeout"), ("limits", "tool_timeout")],
)
def test_a_timeout_follows_one_rule_wherever_it_is_set(
    home: Path, source: str, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: --timeout 1e400 and timeout = inf meant no deadline, $PLAIT_MODEL_TIMEOUT=inf was
    # refused, --timeout nan was accepted, and each source had its own message.
    def show(value: str) -> Any:
        args, env = ["config", "show", "--format", "json"], {}
        if source == "flag":
            args += ["--timeout", value]
        elif source == "env":
            env["PLAIT_MODEL_TIMEOUT"] = value
        else:
            section = "[limits]\n" if source == "limits" else ""
            write(home / "project" / "plait.toml", f"{section}{key} = {value}\n")
        result = run_plait(*args, home=home / "plait-home", env=env)
        if result.returncode == 0:
            return json.loads(result.stdout)["settings"]
        assert result.returncode == 2
        return " ".join((result.stdout + result.stderr).split())

    name = "limits.tool_timeout" if source == "limits" else "timeout"
    for endless in ("inf", "1e400"):
        assert show(endless)[name]["value"] == math.inf
    assert show("90")[name]["value"] == 90
    for bad in ("nan", "-1", "0"):
        refused = show(bad)
        assert isinstance(refused, str), refused
        assert "is not a number of seconds > 0; give e.g. 120, or inf for no deadline" in refused


def test_an_endless_timeout_reaches_the_model_as_no_deadline(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIT_MODEL_TIMEOUT", "inf")
    settings = merged_settings(Flags(model="openai-compatible:m@http://127.0.0.1:9/v1"))
    model = agent_options(settings).options.model
    direct = resolve_model("openai-compatible:m@http://127.0.0.1:9/v1")
    for built in (model, direct):
        assert isinstance(built, OpenAIChatModel) and built.timeouts.total == math.inf


def test_mcp_json_servers_join_and_plait_toml_wins_a_name_clash_with_a_note(home: Path) -> None:
    project = home / "project"
    write(project / "plait.toml", '[mcp.files]\ncommand = "from-toml"\n')
    dotmcp = write(
        project / ".mcp.json",
        json.dumps(
            {
                "mcpServers": {
                    "files": {"command": "from-json"},
                    "docs": {"type": "http", "url": "${DOCS_URL:-http://127.0.0.1:1}/mcp"},
                }
            }
        ),
    )
    settings = load_settings()
    assert settings.get("mcp.files").settings() == {"command": "from-toml"}
    assert settings.get("mcp.docs").settings() == {"url": "http://127.0.0.1:1/mcp"}
    assert settings.origins["mcp.docs"] == str(dotmcp)
    assert any("'files'" in n and "a config file wins over .mcp.json" in n for n in settings.notes)


def test_mcp_json_is_read_from_the_current_folder_only_and_can_be_turned_off(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = home / "project"
    write(project / ".mcp.json", json.dumps({"mcpServers": {"up": {"command": "srv"}}}))
    (project / "sub").mkdir()
    monkeypatch.chdir(project / "sub")
    assert load_settings().section("mcp") == {}  # as Claude Code: no parent's .mcp.json
    monkeypatch.chdir(project)
    assert list(load_settings().section("mcp")) == ["up"]
    write(project / "plait.toml", "mcp_json = false\n")
    assert load_settings().section("mcp") == {}


def test_a_bad_mcp_json_entry_stops_run_with_the_file_and_key_and_no_traceback(
    home: Path,
) -> None:
    dotmcp = write(
        home / "project" / ".mcp.json",
        json.dumps({"mcpServers": {"gh": {"command": "srv", "env": {"T": "${NO_SUCH_VAR}"}}}}),
    )
    result = run_plait("run", "hi", "--model", "openai-compatible:m@http://127.0.0.1:1/v1",
                       home=home / "plait-home")  # fmt: skip
    assert result.returncode == 2
    shown = " ".join(result.stderr.split())
    assert f"{dotmcp}: mcpServers.gh.env.T: ${{NO_SUCH_VAR}} is not set" in shown
    assert "Traceback" not in result.stderr + result.stdout


def test_run_uses_a_providers_base_url_and_names_it_when_it_cannot_be_reached(
    home: Path,
) -> None:
    from plait.trace.server import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    write(home / "project" / "plait.toml", f'[providers.openai]\nbase_url = "{url}"\n')
    result = run_plait(
        "run", "hi", "--model", "openai:gpt-x", "--no-trace", home=home / "plait-home",
        env={"OPENAI_API_KEY": "sk-test", "PLAIT_MODEL_TIMEOUT": "20"},
    )  # fmt: skip
    assert result.returncode == 1
    assert f"Could not reach the server at {url}" in " ".join(result.stderr.split())


def test_config_show_names_the_new_sources_and_hides_their_secrets(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = home / "project"
    write(project / "plait.toml", '[providers.openai]\napi_key = "sk-secret-in-file"\n')
    monkeypatch.setenv("GH_TOKEN", "ghp-secret-token")
    entry = {"type": "http", "url": "https://x.example/mcp",
             "headers": {"Authorization": "Bearer ${GH_TOKEN}"}}  # fmt: skip
    write(project / ".mcp.json", json.dumps({"mcpServers": {"gh": entry}}))
    result = run_plait("config", "show", "--format", "json", home=home / "plait-home")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)["settings"]
    assert shown["providers.openai.api_key"]["value"] == "<hidden>"
    assert shown["mcp.gh"]["value"]["headers"] == {"Authorization": "<hidden>"}
    assert shown["mcp.gh"]["from"] == str(project / ".mcp.json")
    assert "secret" not in result.stdout
