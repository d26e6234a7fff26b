"""``@tool`` (schema from the signature, docstring description, validation) and ToolRegistry."""

from __future__ import annotations

import functools
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from plait import (
    ConfigurationError,
    ToolArgumentsError,
    ToolContext,
    ToolRegistry,
    ToolResolutionError,
    tool,
)
from plait.tools import FunctionTool


class Point(BaseModel):
    x: float
    y: float


@tool
async def locate(city: str, units: Literal["metric", "imperial"] = "metric") -> str:
    """Find a city.

    Returns its coordinates.
    """
    return city


@tool(name="dist", description="Distance between points.")
def distance(a: Point, b: Point, ctx: ToolContext) -> float:
    return float(((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5)


def test_tool_name_description_and_schema_come_from_the_function() -> None:
    d = locate.definition
    assert d.name == "locate"
    assert d.description == "Find a city.\n\nReturns its coordinates."
    assert d.parameters["required"] == ["city"]
    assert d.parameters["properties"]["units"]["enum"] == ["metric", "imperial"]
    assert d.parameters["additionalProperties"] is False
    assert "title" not in d.parameters


def test_tool_context_parameter_is_injected_not_advertised() -> None:
    d = distance.definition
    assert (d.name, d.description) == ("dist", "Distance between points.")
    assert set(d.parameters["properties"]) == {"a", "b"}
    assert "Point" in str(d.parameters["$defs"])


def test_validate_reports_each_failing_field() -> None:
    with pytest.raises(ToolArgumentsError) as info:
        locate.validate({"units": "kelvin", "extra": 1})
    problems = info.value.problems
    assert any(p.startswith("city: Field required") for p in problems)
    assert any(p.startswith("units: Input should be 'metric' or 'imperial'") for p in problems)
    assert any(p.startswith("extra: Extra inputs are not permitted") for p in problems)
    assert "Call the tool again" in str(info.value)


def test_validate_coerces_to_the_declared_types() -> None:
    args = distance.validate({"a": {"x": 0, "y": 0}, "b": {"x": 3, "y": 4}})
    assert isinstance(args["a"], Point)


def test_var_args_are_refused_with_a_clear_error() -> None:
    def bad(*items: str) -> str:
        return ""

    with pytest.raises(ConfigurationError, match="named, typed parameters"):
        FunctionTool(bad)


def scale(value: int, factor: int) -> int:
    """Multiply."""
    return value * factor


class Doubler:
    async def __call__(self, value: int) -> int:
        return 2 * value


async def test_a_partial_or_a_callable_object_becomes_a_tool_given_a_name() -> None:
    triple = tool(name="triple")(functools.partial(scale, factor=3))
    double = tool(name="double")(Doubler())

    assert set(triple.definition.parameters["properties"]) == {"value"}
    assert triple.validate({"value": "4"}) == {"value": 4}
    assert await triple.invoke({"value": 4}, None) == 12  # type: ignore[arg-type]
    assert set(double.definition.parameters["properties"]) == {"value"}
    assert await double.invoke({"value": 4}, None) == 8  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("target", "options", "match"),
    [
        (functools.partial(scale, factor=3), {}, "has no __name__; pass name="),
        (5, {"name": "five"}, "needs a function"),
        (lambda value: value, {}, "'<lambda>' is not a valid tool name"),
        (scale, {"name": "my tool"}, "'my tool' is not a valid tool name"),
        (scale, {"name": "x" * 65}, "at most 64"),
    ],
    ids=["partial-unnamed", "not-callable", "lambda", "space", "too-long"],
)
def test_what_cannot_become_a_tool_is_a_configuration_error(
    target: Any, options: dict[str, Any], match: str
) -> None:
    # A name the providers reject would otherwise fail every request with a 400.
    with pytest.raises(ConfigurationError, match=match):
        tool(**options)(target)


def test_an_annotation_that_cannot_be_resolved_is_a_configuration_error() -> None:
    def lookup(key: Undefined) -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""

    with pytest.raises(ConfigurationError, match=r"type hints of lookup.*Undefined"):
        tool(lookup)


def test_deferred_and_blocking_flags() -> None:
    @tool(deferred=True, blocking=True)
    def slow() -> str:
        """Slow."""
        return "x"

    assert slow.deferred and slow.definition.metadata["defer_loading"] is True
    assert ToolRegistry([slow]).definitions() == []


def test_idempotent_flag_defaults_true_and_is_kept_when_false() -> None:
    @tool(idempotent=False)
    def pay() -> str:
        """Pay."""
        return "paid"

    assert locate.idempotent is True and pay.idempotent is False
    assert pay.definition.metadata == {}  # a runtime property, never advertised to the model


def test_registry_register_resolve_and_duplicate_names() -> None:
    reg = ToolRegistry([locate])
    assert reg.resolve("locate") is locate
    with pytest.raises(ConfigurationError, match="already registered"):
        reg.register(FunctionTool(lambda: "", name="locate"))
    reg.register(locate)  # the same object again is a no-op
    assert len(reg) == 1


def test_registry_unregister_is_by_identity() -> None:
    reg = ToolRegistry([locate])
    impostor = FunctionTool(lambda city: city, name="locate")
    assert reg.unregister(impostor) is False
    assert reg.resolve("locate") is locate
    assert reg.unregister(locate) is True
    with pytest.raises(ToolResolutionError, match="Unknown tool 'locate'"):
        reg.resolve("locate")


def test_definitions_are_a_snapshot() -> None:
    reg = ToolRegistry([locate])
    snapshot = reg.definitions()
    reg.register(distance)
    assert [d.name for d in snapshot] == ["locate"]
    assert [d.name for d in reg.definitions()] == ["locate", "dist"]
    assert reg.version == 2


async def test_blocking_tool_runs_in_a_worker_thread_and_leaves_the_function_untouched() -> None:
    import threading

    from plait import Agent, ScriptedModel, ToolCall, ToolMessage

    def where() -> str:
        return threading.current_thread().name

    blocking, inline = tool(blocking=True, name="b")(where), tool(name="i")(where)
    assert blocking.blocking and not inline.blocking and not hasattr(where, "__plait_blocking__")
    model = ScriptedModel([[ToolCall("1", "b", {}), ToolCall("2", "i", {})], "ok"])
    result = await Agent(model, tools=[blocking, inline]).run("go")
    ran = {m.tool_call_id: m.data for m in result.new_messages if isinstance(m, ToolMessage)}
    assert ran["2"] == threading.current_thread().name and ran["1"] != ran["2"]
