"""The rules the providers hold a structured-output schema to, for the wire servers.

OpenAI's strict mode (Chat Completions ``response_format``, Responses ``text.format``): the root
is an object (not ``anyOf``); every object lists every property in ``required`` and has
``additionalProperties: false``; ``$ref`` points into ``$defs`` (or ``#``); keywords strict mode
does not take (``default``, ``minLength``, ``uniqueItems`` …) are refused. Messages follow the
API's ("Invalid schema for response_format 'X': In context=(...), ...").

Anthropic's structured outputs (``output_config.format``): objects need
``additionalProperties: false``; numeric and string-length constraints are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_OPENAI_REFUSED = frozenset(
    {
        "default",
        "minLength",
        "maxLength",
        "uniqueItems",
        "discriminator",
        "oneOf",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedProperties",
        "if",
        "then",
        "else",
        "not",
    }
)
_ANTHROPIC_REFUSED = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength"}
    | {"maxLength", "oneOf", "discriminator"}
)


def openai_schema_problem(name: str, schema: Any) -> str | None:
    """Why OpenAI's strict mode refuses ``schema`` (named ``name``), or ``None``."""
    head = f"Invalid schema for response_format {name!r}: "
    if not isinstance(schema, Mapping) or schema.get("type") != "object" or "anyOf" in schema:
        return head + "schema must be a JSON Schema of 'type: \"object\"', got something else."
    problem = _walk(schema, schema, (), _OPENAI_REFUSED, strict_required=True)
    return None if problem is None else head + problem


def anthropic_schema_problem(schema: Any) -> str | None:
    """Why Anthropic's structured outputs refuse ``schema``, or ``None``."""
    if not isinstance(schema, Mapping):
        return "output_config.format.schema: Input should be a valid dictionary"
    problem = _walk(schema, schema, (), _ANTHROPIC_REFUSED, strict_required=False)
    return None if problem is None else f"output_config.format.schema: {problem}"


def _walk(
    root: Mapping[str, Any],
    node: Mapping[str, Any],
    context: tuple[str, ...],
    refused: frozenset[str],
    *,
    strict_required: bool,
) -> str | None:
    where = f"In context={context!r}, "
    for key in node:
        if key in refused:
            return where + f"{key!r} is not permitted."
    ref = node.get("$ref")
    if ref is not None and not (ref == "#" or str(ref).startswith("#/$defs/")):
        return where + f"reference {ref!r} is not supported."
    defs = root.get("$defs") or {}
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] not in defs:
        return where + f"reference {ref!r} can't be resolved."
    properties = node.get("properties")
    if node.get("type") == "object" or isinstance(properties, Mapping):
        if node.get("additionalProperties") is not False:
            return where + "'additionalProperties' is required to be supplied and to be false."
        if strict_required:
            required = node.get("required")
            missing = [k for k in properties or {} if k not in (required or [])]
            if not isinstance(required, list) or missing:
                return where + (
                    "'required' is required to be supplied and to be an array including every "
                    f"key in properties. Missing {missing[0]!r}."
                    if missing
                    else "'required' is required to be supplied."
                )
    children: list[tuple[tuple[str, ...], Any]] = []
    for name, sub in (properties or {}).items():
        children.append(((*context, "properties", name), sub))
    for name, sub in (node.get("$defs") or {}).items():
        children.append(((*context, "$defs", name), sub))
    if isinstance(node.get("items"), Mapping):
        children.append(((*context, "items"), node["items"]))
    for index, sub in enumerate(node.get("anyOf") or []):
        children.append(((*context, "anyOf", str(index)), sub))
    for index, sub in enumerate(node.get("allOf") or []):
        children.append(((*context, "allOf", str(index)), sub))
    for path, sub in children:
        if isinstance(sub, Mapping):
            problem = _walk(root, sub, path, refused, strict_required=strict_required)
            if problem is not None:
                return problem
    return None
