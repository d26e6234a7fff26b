"""``plait models``: the models the configured provider lists, through the official SDKs against
local wire servers (OpenAI-compatible ``GET /v1/models``, Anthropic ``GET /v1/models``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from anthropic_server import AnthropicServer
from cli_inprocess import Completed, empty_home, run_plait
from wire_server import WireServer

from plait.trace.server import free_port

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$PLAIT_HOME (empty), with tmp_path/project the current folder."""
    return empty_home(tmp_path, monkeypatch) / "plait-home"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


def models(home: Path, *args: str, env: dict[str, str] | None = None) -> Completed:
    return run_plait("models", *args, home=home, env=env)


def test_lists_an_openai_compatible_servers_models_sorted(server: WireServer, home: Path) -> None:
    server.serve_models(["zeta-7b", "alpha-70b", "mid"])
    result = models(home, "--model", f"openai-compatible:any@{server.url}/v1")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "alpha-70b\nmid\nzeta-7b\n"
    assert f"3 models at {server.url}/v1/models" in result.stderr
    assert [(r.method, r.path) for r in server.received] == [("GET", "/v1/models")]


@pytest.mark.parametrize("form", ["openai-compatible:{url}/v1", "openai-compatible:@{url}/v1"])
def test_the_spec_may_leave_out_the_model(server: WireServer, home: Path, form: str) -> None:
    server.serve_models(["only"])
    result = models(home, "--model", form.format(url=server.url))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "only\n"


def test_the_provider_comes_from_the_config_as_for_run(server: WireServer, home: Path) -> None:
    server.serve_models(["configured"])
    Path("plait.toml").write_text(
        f'model = "openai-compatible:m@{server.url}/v1"\n', encoding="utf-8"
    )
    result = models(home)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "configured\n"


def test_openai_with_its_key_and_base_url_from_the_environment(
    server: WireServer, home: Path
) -> None:
    server.serve_models(["gpt-test"])
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": f"{server.url}/v1"}
    result = models(home, "--model", "openai", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert [m["id"] for m in json.loads(result.stdout)] == ["gpt-test"]
    assert server.received[0].headers["authorization"] == "Bearer sk-test"


def test_anthropic_lists_every_page_newest_first(home: Path) -> None:
    with AnthropicServer(lambda body: []) as server:
        server.models = [f"claude-test-{i:02d}" for i in range(25, 0, -1)]
        env = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.url}
        result = models(home, "--model", "anthropic", env=env)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == server.models
        assert f"25 models at {server.url}/v1/models" in result.stderr
        assert len(server.received) == 2  # two pages of at most 20
        sent = server.received[0].headers
        assert "sk-ant-test" in (sent.get("x-api-key"), sent.get("authorization", "")[7:])


def test_a_server_that_cannot_be_reached_is_named_by_the_url_tried(home: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    result = models(home, "--model", f"openai-compatible:m@{url}")
    assert result.returncode == 1
    message = " ".join(result.stderr.split())
    assert f"Could not reach {url}/models" in message and "Traceback" not in message


def test_refused_credentials_name_the_key_variable(server: WireServer, home: Path) -> None:
    server.reply("invalid_api_key.json", status=401)
    result = models(home, "--model", f"openai-compatible:m@{server.url}/v1")
    assert result.returncode == 1
    message = " ".join(result.stderr.split())
    assert f"{server.url}/v1/models refused the credentials (401" in message
    assert "OPENAI_COMPATIBLE_API_KEY" in message


def test_a_server_without_a_models_list_says_so(server: WireServer, home: Path) -> None:
    server.reply_json({"error": {"message": "no such route"}}, status=404)
    result = models(home, "--model", f"openai-compatible:m@{server.url}/v1")
    assert result.returncode == 1
    assert "answered 404: this server does not list its models" in result.stderr


@pytest.mark.parametrize(("sdk", "spec"), [("openai", "openai"), ("anthropic", "anthropic")])
def test_a_missing_sdk_is_one_line_with_the_install_command(
    home: Path, monkeypatch: pytest.MonkeyPatch, sdk: str, spec: str
) -> None:
    monkeypatch.setitem(sys.modules, sdk, None)  # what an environment without the extra sees
    env = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}
    result = models(home, "--model", spec, env=env)
    assert result.returncode == 2
    assert f"pip install 'plait[{sdk}]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_no_provider_configured_says_how_to_pick_one(home: Path) -> None:
    result = models(home)
    assert result.returncode == 2
    assert "--model" in result.stderr and "OPENAI_API_KEY" in result.stderr


def test_a_server_that_never_answers_is_given_up_on_at_the_deadline(
    server: WireServer, home: Path
) -> None:
    server.stall()
    result = models(home, "--model", f"openai-compatible:m@{server.url}/v1", "--timeout", "0.5")
    assert result.returncode == 1
    message = " ".join(result.stderr.split())
    assert f"{server.url}/v1/models sent no complete list of models within 0.5 s" in message
    assert "--timeout" in message


def test_a_providers_base_url_and_key_variable_from_plait_toml_are_used(
    server: WireServer, home: Path
) -> None:
    server.serve_models(["gw-model"])
    Path("plait.toml").write_text(
        f'[providers.openai]\nbase_url = "{server.url}/v1"\napi_key_env = "MY_GATEWAY_KEY"\n',
        encoding="utf-8",
    )
    result = models(home, "--model", "openai", env={"MY_GATEWAY_KEY": "sk-gateway"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "gw-model\n"
    assert f"1 model at {server.url}/v1/models" in result.stderr
    assert server.received[0].headers["authorization"] == "Bearer sk-gateway"


def test_a_key_variable_the_config_names_but_the_environment_lacks_is_named(
    server: WireServer, home: Path
) -> None:
    Path("plait.toml").write_text(
        f'[providers.anthropic]\nbase_url = "{server.url}"\napi_key_env = "MY_ANTHROPIC"\n',
        encoding="utf-8",
    )
    result = models(home, "--model", "anthropic")
    assert result.returncode == 2
    shown = " ".join(result.stderr.split())
    assert "set MY_ANTHROPIC" in shown and "plait.toml names it" in shown
    assert server.received == []


def test_a_key_written_in_the_file_works_with_a_warning(server: WireServer, home: Path) -> None:
    server.serve_models(["k"])
    Path("plait.toml").write_text(
        f'[providers.openai]\nbase_url = "{server.url}/v1"\napi_key = "sk-in-file"\n',
        encoding="utf-8",
    )
    result = models(home, "--model", "openai")
    assert result.returncode == 0, result.stderr
    assert server.received[0].headers["authorization"] == "Bearer sk-in-file"
    assert "providers.openai.api_key holds an API key in a file" in " ".join(result.stderr.split())


def test_a_configured_base_url_that_cannot_be_reached_is_named(home: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    Path("plait.toml").write_text(
        f'[providers.openai-compatible]\nbase_url = "{url}"\n', encoding="utf-8"
    )
    result = models(home, "--model", "openai-compatible:any")
    assert result.returncode == 1
    assert f"Could not reach {url}/models" in " ".join(result.stderr.split())


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ('[providers.openai]\nbase_url = "localhost:8080"\n', "providers.openai.base_url"),
        ('[providers.openai]\napi_key_env = "MY KEY"\n', "providers.openai.api_key_env"),
        ('[providers.openai]\nbase = "x"\n', "unknown key 'providers.openai.base'"),
        ('[providers.mistral]\nbase_url = "http://x"\n', "providers.mistral"),
    ],
)
def test_a_bad_provider_table_names_the_key(home: Path, table: str, needle: str) -> None:
    Path("plait.toml").write_text(table, encoding="utf-8")
    result = models(home, "--model", "openai")
    assert result.returncode == 2
    assert needle in " ".join(result.stderr.split())
