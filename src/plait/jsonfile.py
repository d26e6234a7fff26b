"""One bounded reader for a small JSON file a person wrote: a ``.mcp.json``, an
``--output-schema`` file.

:func:`read_json_object` reads at most ``max_bytes`` (default :data:`MAX_JSON_FILE_BYTES`, 1 MiB)
and returns the file's top-level object. Everything that can be wrong with the file is one
:class:`JsonFileError` (a :class:`~plait.errors.ConfigurationError`) whose message starts with
the path and says what to do:

=================================  =====================================================
the file                           the message, after ``{path}: ``
=================================  =====================================================
cannot be opened or read           ``cannot read it (No such file or directory); check ...``
is over ``max_bytes``              ``is larger than 1,048,576 bytes, ...; trim it.``
is not UTF-8                       ``is not UTF-8 text; save it as UTF-8.``
is not JSON                        ``is not valid JSON: Expecting ... line 1 column 2 ...``
nests too deeply for the parser    ``nests too deeply to be read; flatten it.``
holds an array, a string, a number ``must hold a JSON object ({...}), not an array.``
=================================  =====================================================
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from plait.errors import ConfigurationError

__all__ = ["MAX_JSON_FILE_BYTES", "JsonFileError", "read_json_object"]

MAX_JSON_FILE_BYTES = 1_048_576
"""The most bytes :func:`read_json_object` reads by default (1 MiB): no hand-written
configuration file is that large, and a larger one is refused before it is parsed."""

_KINDS = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}


class JsonFileError(ConfigurationError):
    """A JSON file could not be read as one object: ``path`` is the file, ``max_bytes`` the bound
    it was read with, ``problem`` what is wrong and what to do about it."""

    def __init__(self, path: Path, problem: str, *, max_bytes: int) -> None:
        self.path = path
        self.problem = problem
        self.max_bytes = max_bytes
        super().__init__(f"{path}: {problem}")


def read_json_object(
    path: Path, *, max_bytes: int = MAX_JSON_FILE_BYTES, shape: str = "{...}"
) -> dict[str, Any]:
    """The JSON object in the file at ``path``, read with at most ``max_bytes + 1`` bytes.

    ``shape`` is how the object should look, shown when the file holds something else
    (``'{"mcpServers": {...}}'``). Raises :class:`JsonFileError` (see the module docstring).
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise JsonFileError(
            path,
            f"cannot read it ({exc.strerror or exc}); check the path and its permissions.",
            max_bytes=max_bytes,
        ) from None
    if len(data) > max_bytes:
        raise JsonFileError(
            path,
            f"is larger than {max_bytes:,} bytes, the most read from this file; trim it.",
            max_bytes=max_bytes,
        )
    try:
        document = json.loads(data.decode("utf-8-sig"))  # an editor's BOM is not an error
    except UnicodeDecodeError:
        raise JsonFileError(
            path, "is not UTF-8 text; save it as UTF-8.", max_bytes=max_bytes
        ) from None
    except json.JSONDecodeError as exc:
        raise JsonFileError(
            path, f"is not valid JSON: {exc}; fix it there.", max_bytes=max_bytes
        ) from None
    except RecursionError:
        raise JsonFileError(
            path, "nests too deeply to be read; flatten it.", max_bytes=max_bytes
        ) from None
    if not isinstance(document, dict):
        kind = "null" if document is None else _KINDS.get(type(document), type(document).__name__)
        raise JsonFileError(
            path, f"must hold a JSON object ({shape}), not {kind}.", max_bytes=max_bytes
        )
    return document
