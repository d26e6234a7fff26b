"""resolve_model: spec strings to provider adapters, instances through, clear errors otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from wire_server import WireServer

from plait.errors import ConfigurationError
from plait.messages import UserMessage
from plait.models.anthropic import AnthropicModel
from plait.models.base import ModelRequest
from plait.models.openai import OpenAIChatModel
from plait.models.openai_responses import OpenAIResponsesModel
from plait.models.registry import MODEL_SPEC_FORMS, resolve_model
from plait.models.scripted import ScriptedModel

FIXTURES = Path(__file__).parent / "fixtures" / "openai"
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_COMPATIBLE_API_KEY")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)


def test_openai_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    model = resolve_model("openai:gpt-4.1-mini")

    assert isinstance(model, OpenAIChatModel)
    assert model.name == "openai:gpt-4.1-mini"


def test_anthropic_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")

    model = resolve_model("anthropic:claude-sonnet-4-5")

    assert isinstance(model, AnthropicModel)
    assert model.name == "anthropic:claude-sonnet-4-5"


def test_model_instances_pass_through() -> None:
    scripted = ScriptedModel(["hi"])

    assert resolve_model(scripted) is scripted


@pytest.mark.parametrize(
    ("spec", "env_var"),
    [
        ("openai:gpt-4.1-mini", "OPENAI_API_KEY"),
        ("openai-responses:gpt-5-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ],
)
def test_missing_api_key_names_the_env_var_and_the_model_forms(spec: str, env_var: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        resolve_model(spec)

    message = str(caught.value)
    assert env_var in message
    assert "--model" in message
    assert all(form in message for form in MODEL_SPEC_FORMS)


@pytest.mark.parametrize(
    "spec",
    [
        "gpt-4.1-mini",
        "openai:",
        "anthropic:  ",
        "mistral:large",
        "openai-compatible:llama3.1",
        "openai-compatible:@http://localhost:8000/v1",
        "openai-compatible:llama3.1@localhost:8000",
        "",
    ],
)
def test_bad_specs_list_the_accepted_forms(spec: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        resolve_model(spec)

    assert all(form in str(caught.value) for form in MODEL_SPEC_FORMS)


def test_a_non_model_object_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="Expected a model spec string or a Model"):
        resolve_model(42)  # type: ignore[arg-type]


def test_a_model_without_aclose_is_told_to_add_it() -> None:
    class NoClose:
        name = "no-close"

        async def generate(self, request: ModelRequest) -> object: ...

        def stream(self, request: ModelRequest) -> object: ...

    with pytest.raises(ConfigurationError, match=r"lacks aclose\. Add them"):
        resolve_model(NoClose())  # type: ignore[arg-type]


async def send_one(spec: str, server: WireServer) -> OpenAIChatModel:
    server.reply("text.json")
    model = resolve_model(spec)
    assert isinstance(model, OpenAIChatModel)
    await model.generate(ModelRequest([UserMessage("hi")]))
    await model.aclose()
    return model


async def test_openai_compatible_spec_talks_to_its_base_url() -> None:
    with WireServer(FIXTURES) as server:
        model = await send_one(f"openai-compatible:qwen2.5:7b@{server.url}/v1", server)

    assert model.name == "openai-compatible:qwen2.5:7b"
    [sent] = server.received
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "qwen2.5:7b"
    assert sent.headers["authorization"] == "Bearer not-needed"


@pytest.mark.parametrize(
    ("env", "expected_key"),
    [
        ({"OPENAI_COMPATIBLE_API_KEY": "compat-key", "OPENAI_API_KEY": "sk-openai"}, "compat-key"),
        ({"OPENAI_API_KEY": "sk-openai"}, "sk-openai"),
    ],
)
async def test_openai_compatible_key_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected_key: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    with WireServer(FIXTURES) as server:
        await send_one(f"openai-compatible:llama3.1@{server.url}/v1", server)

    assert server.received[0].headers["authorization"] == f"Bearer {expected_key}"


async def test_the_openai_responses_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")

    model = resolve_model("openai-responses:gpt-5-mini")

    assert isinstance(model, OpenAIResponsesModel) and model.name == "openai-responses:gpt-5-mini"
    await model.aclose()
