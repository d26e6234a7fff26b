"""An output type as a JSON schema a provider enforces, and back: :class:`OutputSpec`.

``OutputSpec(Ticket)`` holds a pydantic ``TypeAdapter`` for the type (a pydantic model, a
dataclass, a ``TypedDict``, a union of those, a list or a scalar) and the schema sent to the
model, made *strict-compatible* the way OpenAI's strict mode requires (:func:`strict_schema`):

- every object has ``additionalProperties: false`` and lists every property in ``required``;
  a property that was optional becomes a nullable union (``anyOf: [..., {"type": "null"}]``),
  and a ``null`` the model sends for it is dropped before validation, so its default applies;
- ``oneOf`` becomes ``anyOf``; a lone ``allOf`` is inlined; ``$ref``/``$defs`` stay (strict
  mode takes them);
- keywords strict mode refuses (``default``, ``minLength``, ``maxLength``, ``uniqueItems``,
  ``discriminator`` …) are dropped from what the model sees; their constraint is still checked
  when the answer is validated;
- a type whose schema is not an object (a union, a list, a scalar) is wrapped as
  ``{"response": ...}`` and unwrapped after validation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from plait.errors import ConfigurationError

if TYPE_CHECKING:  # pydantic loads with the first output type, not with the agent
    from pydantic import TypeAdapter, ValidationError

__all__ = ["OutputSpec", "strict_schema"]

T = TypeVar("T")

WRAPPER_KEY = "response"

_UNSUPPORTED = frozenset(
    {
        "default",
        "minLength",
        "maxLength",
        "uniqueItems",
        "discriminator",
        "examples",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedProperties",
        "contains",
        "if",
        "then",
        "else",
        "not",
        "dependentRequired",
        "dependentSchemas",
    }
)

_Optional = dict[int, frozenset[str]]  # id of a strict object schema -> its optional keys


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` that OpenAI's strict mode accepts (see the module docstring)."""
    return _Strict().convert(schema)


class _Strict:
    def __init__(self) -> None:
        self.optional: _Optional = {}

    def convert(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _UNSUPPORTED:
                continue
            if (key == "$defs" and isinstance(value, Mapping)) or (
                key == "properties" and isinstance(value, Mapping)
            ):
                out[key] = {name: self.convert(sub) for name, sub in value.items()}
            elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
                out[key] = self.convert(value)
            elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
                target = "anyOf" if key == "oneOf" else key
                out[target] = [self.convert(sub) for sub in value]
            else:
                out[key] = value
        if list(out.get("allOf", [])) and len(out["allOf"]) == 1:
            only = out.pop("allOf")[0]
            out = {**only, **out}
        if out.get("type") == "object" or "properties" in out:
            properties: dict[str, Any] = out.get("properties", {})
            required = set(out.get("required", []))
            optional = frozenset(name for name in properties if name not in required)
            for name in optional:
                properties[name] = {"anyOf": [properties[name], {"type": "null"}]}
            out["properties"] = properties
            out["required"] = list(properties)
            out["additionalProperties"] = False
            out.setdefault("type", "object")
            if optional:
                self.optional[id(out)] = optional
        return out


class OutputSpec(Generic[T]):
    """How answers of type ``output_type`` are asked for and validated.

    ``name`` names the schema (``response_format.json_schema.name``; the type's name, made
    ``[a-zA-Z0-9_-]{1,64}``). ``schema`` is the strict-compatible schema the model is given;
    ``wrapped`` says whether it is the type's own or ``{"response": ...}`` around it.
    Raises :class:`~plait.errors.ConfigurationError` for a type pydantic cannot describe.

    ``OutputSpec(Any, schema={...}, name="...")`` asks for a JSON schema given as it is (``plait
    run --output-schema``): it is made strict-compatible the same way, and the answer validates
    as any JSON value (add an ``output_validator`` to hold it to the schema).
    """

    def __init__(
        self, output_type: Any, *, schema: Mapping[str, Any] | None = None, name: str = ""
    ) -> None:
        from pydantic import TypeAdapter

        self.output_type = output_type
        try:
            self.adapter: TypeAdapter[T] = TypeAdapter(output_type)
            raw = dict(schema) if schema is not None else self.adapter.json_schema()
        except Exception as exc:
            raise ConfigurationError(
                f"output_type {output_type!r} cannot be used as a structured output: {exc}. "
                "Use a pydantic model, a dataclass, a TypedDict, a union of those, a list or "
                "a scalar type."
            ) from exc
        self.wrapped = raw.get("type") != "object"
        if self.wrapped:
            defs = raw.pop("$defs", None)
            raw = {
                "type": "object",
                "properties": {WRAPPER_KEY: raw},
                "required": [WRAPPER_KEY],
                **({"$defs": defs} if defs else {}),
            }
        converter = _Strict()
        self.schema: dict[str, Any] = converter.convert(raw)
        self._optional = converter.optional
        title = name or getattr(output_type, "__name__", None) or str(raw.get("title") or "output")
        self.name = re.sub(r"[^a-zA-Z0-9_-]", "_", title)[:64] or "output"

    def validate_json(self, text: str) -> T:
        """The answer ``text`` (JSON) as an instance; raises ``ValueError`` with the problems."""
        import pydantic_core

        try:
            data = pydantic_core.from_json(text)
        except ValueError as exc:
            raise ValueError(f"the answer is not valid JSON ({exc})") from exc
        return self.validate_args(data)

    def validate_args(self, data: Any) -> T:
        """Validate the decoded JSON ``data`` (a ``final_result`` call's arguments, say)."""
        from pydantic import ValidationError

        data = self._drop_nulls(data, self.schema)
        if self.wrapped:
            if not isinstance(data, dict) or WRAPPER_KEY not in data:
                raise ValueError(f"the answer must be an object with the key {WRAPPER_KEY!r}")
            data = data[WRAPPER_KEY]
        try:
            return self.adapter.validate_python(data)
        except ValidationError as exc:
            raise ValueError("; ".join(_describe(exc))) from exc

    def partial(self, text: str) -> Any:
        """The JSON parsed so far from a prefix ``text`` (dicts, lists, scalars; not
        validated), unwrapped; ``None`` when nothing parses yet."""
        import pydantic_core

        try:
            data = pydantic_core.from_json(text, allow_partial=True)
        except ValueError:
            return None
        if self.wrapped:
            return data.get(WRAPPER_KEY) if isinstance(data, dict) else None
        return data

    def dump_json(self, value: T) -> str:
        """``value`` as JSON text (what the CLI prints, what the trace shows)."""
        return self.adapter.dump_json(value).decode()

    def _drop_nulls(self, data: Any, schema: Mapping[str, Any], depth: int = 0) -> Any:
        """``data`` with the ``null`` of every property that was optional removed (so its
        default applies), following ``schema`` through ``$ref``, ``anyOf`` and arrays."""
        if depth > 64:
            return data
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = self.schema.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
            return data if target is None else self._drop_nulls(data, target, depth + 1)
        for branch in schema.get("anyOf", ()):
            data = self._drop_nulls(data, branch, depth + 1)
        if isinstance(data, dict) and isinstance(schema.get("properties"), Mapping):
            optional = self._optional.get(id(schema), frozenset())
            data = {k: v for k, v in data.items() if not (v is None and k in optional)}
            for key, sub in schema["properties"].items():
                if key in data:
                    data[key] = self._drop_nulls(data[key], sub, depth + 1)
        elif isinstance(data, list) and isinstance(schema.get("items"), Mapping):
            data = [self._drop_nulls(item, schema["items"], depth + 1) for item in data]
        return data


def _describe(error: ValidationError) -> list[str]:
    problems = []
    for item in error.errors(include_url=False)[:10]:
        where = ".".join(str(p) for p in item["loc"]) or "the answer"
        problems.append(f"{where}: {item['msg']}")
    return problems


def schema_text(spec: OutputSpec[Any]) -> str:
    """The schema as compact JSON (for a prompt or a trace)."""
    return json.dumps(spec.schema, separators=(",", ":"))
