"""``plait run --output-schema schema.json``: the answer as JSON matching a schema file.

The file holds a JSON Schema (at most :data:`MAX_SCHEMA_BYTES`). The model is asked for it like
any structured output (natively where the provider has it, else through the ``final_result``
tool; the schema is made strict-compatible); the answer is held to the file's schema with
``jsonschema`` (the ``schema`` extra) and a failure goes back to the model as a retry. Standard
output then gets the answer's JSON, one line, and nothing else.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from plait.errors import ConfigurationError, OutputRetry
from plait.jsonfile import MAX_JSON_FILE_BYTES, JsonFileError, read_json_object

if TYPE_CHECKING:  # the runtime loads when a turn runs, not for `plait run --help`
    from plait.messages import UserMessage
    from plait.middleware.context import Event
    from plait.runtime.agent import Agent
    from plait.runtime.output import OutputValidator
    from plait.runtime.output_schema import OutputSpec

__all__ = ["MAX_SCHEMA_BYTES", "OutputSchemaOption", "load_output_schema", "stream_structured"]

MAX_SCHEMA_BYTES = MAX_JSON_FILE_BYTES
"""The largest schema file ``--output-schema`` reads (1 MiB)."""


def load_output_schema(path: Path) -> tuple[OutputSpec[Any], OutputValidator]:
    """The output spec for the schema in ``path`` and the validator that holds answers to it.
    Raises :class:`~plait.errors.ConfigurationError` (a missing, huge or invalid file, or no
    ``jsonschema`` installed) saying what to fix."""
    try:
        import jsonschema
    except ImportError as exc:
        raise ConfigurationError(
            "--output-schema checks answers with jsonschema: pip install 'plait[schema]'."
        ) from exc
    try:
        schema = read_json_object(
            path, max_bytes=MAX_SCHEMA_BYTES, shape='a JSON Schema, {"type": "object", ...}'
        )
    except JsonFileError as exc:
        raise ConfigurationError(f"--output-schema: {exc}") from None
    try:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ConfigurationError(
            f"--output-schema: {path} is not a JSON Schema: {str(exc).splitlines()[0]}."
        ) from exc
    from plait.runtime.output_schema import OutputSpec

    check = validator_class(schema)
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", str(schema.get("title") or path.stem))[:64]
    spec: OutputSpec[Any] = OutputSpec(Any, schema=schema, name=name or "output")

    def holds_to_schema(value: Any) -> Any:
        problems = [
            f"{'/'.join(str(p) for p in e.absolute_path) or 'the answer'}: {e.message}"
            for e in check.iter_errors(value)
        ]
        if problems:
            raise OutputRetry("; ".join(problems[:10]))
        return value

    return spec, holds_to_schema


OutputSchemaOption = Annotated[
    Path | None,
    typer.Option(
        "--output-schema",
        help="Answer with JSON matching this JSON Schema file; standard output gets the JSON.",
    ),
]


async def stream_structured(
    agent: Agent[Any],
    text: str | UserMessage,
    thread_id: str,
    state: dict[str, Any],
    printer: Callable[[Event], None],
    output: tuple[OutputSpec[Any], OutputValidator],
) -> None:
    """Run the turn for ``--output-schema``: events to ``printer`` except the answer's raw text
    (it is JSON, printed once validated), then the answer's JSON on standard output."""
    from plait.runtime.events import TextDeltaReceived

    spec, holds_to_schema = output
    agent.output_validator(holds_to_schema)
    stream = agent.stream(text, thread_id=thread_id, state=state, output_type=spec)
    async for event in stream:
        if not isinstance(event, TextDeltaReceived):
            printer(event)
    if stream.result is not None:
        sys.stdout.write(json.dumps(stream.result.output, ensure_ascii=False) + "\n")
        sys.stdout.flush()
