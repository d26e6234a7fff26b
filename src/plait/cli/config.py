"""The CLI's configuration: config files, environment variables and flags, merged.

Where each value comes from, lowest precedence first (a later source overrides an earlier one,
key by key):

=========================  ===================================================================
source                     where
=========================  ===================================================================
default                    the values documented on :class:`ConfigFile`
``.mcp.json``              the current folder's (only: Claude Code reads no parent's either), as
                           Claude Code and Cursor write it (``mcpServers``, see
                           :mod:`plait.mcp.dotmcp`); a server a config file names too is the
                           config file's (with a note); ``mcp_json = false`` leaves it unread
user file                  ``$PLAIT_HOME/config.toml``, else ``$XDG_CONFIG_HOME/plait/config.toml``
                           (``~/.config/plait/config.toml``)
project file               the nearest ``plait.toml`` from the current folder up, or, in the same
                           folder, ``pyproject.toml``'s ``[tool.plait]`` (``plait.toml`` wins)
environment                ``PLAIT_MODEL``, ``PLAIT_STORE``, ``PLAIT_MODEL_TIMEOUT`` (``timeout``)
command line               the flags of ``plait run`` / ``plait chat``
=========================  ===================================================================

``[limits]``, ``[workspace]``, ``[mcp.<name>]``, ``[prices.<model>]`` and
``[providers.<name>]`` merge key by key too;
``skills`` folders add up (project first, then user: earlier folders win name clashes). Relative
paths in a file are relative to that file's folder; ``~`` is expanded. Unknown keys and wrong
types are a :class:`ConfigFileError` naming the file and the key, and so is a file tomllib cannot
parse for any reason (arrays nested thousands deep included: a cloned repository cannot break
the CLI). Timeouts (``timeout``, ``limits.tool_timeout``, ``$PLAIT_MODEL_TIMEOUT``,
``--timeout``) follow one rule, :func:`~plait.models.timeouts.parse_timeout`: seconds > 0,
``inf`` for no deadline. A file is read only up to :data:`MAX_CONFIG_BYTES`; the walk up for the
project file stops at the filesystem root or after :data:`MAX_PARENT_LEVELS` folders. The keys a
file may hold are the models of :mod:`plait.cli.config_schema` (re-exported here).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from plait.cli.config_schema import (
    ConfigFile,
    LimitsConfig,
    McpServerConfig,
    PriceConfig,
    ProviderConfig,
    SubagentConfig,
    WorkspaceConfig,
    known_keys,
)
from plait.errors import ConfigurationError
from plait.models.timeouts import parse_timeout

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_PARENT_LEVELS",
    "ConfigFile",
    "ConfigFileError",
    "LimitsConfig",
    "McpServerConfig",
    "PriceConfig",
    "ProviderConfig",
    "Settings",
    "SubagentConfig",
    "WorkspaceConfig",
    "config_home",
    "load_settings",
]

MAX_CONFIG_BYTES = 1_048_576
"""A config file larger than this (1 MiB) is refused: no real config is that large."""

MAX_PARENT_LEVELS = 64
"""How many folders up from the current one the project file is looked for."""


class ConfigFileError(ConfigurationError):
    """A config file cannot be read or holds a bad value; the message names file and key."""

    def __init__(self, path: Path | str, message: str) -> None:
        self.path = str(path)
        super().__init__(f"{path}: {message}")


_PATH_KEYS = frozenset({"store"})


@dataclass(slots=True)
class Settings:
    """The merged configuration: ``values`` by dotted key (``limits.tool_timeout``,
    ``mcp.files``) and, for each, where it came from (a file path, ``$VAR``, ``--flag`` or
    ``default``)."""

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Things worth telling the user that did not stop loading (a project file skipped)."""

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any, origin: str) -> None:
        """Set ``key`` from ``origin``; ``None`` leaves the current value in place."""
        if value is None:
            return
        self.values[key] = value
        self.origins[key] = origin

    def section(self, prefix: str) -> dict[str, Any]:
        """Values under ``prefix.`` (``mcp``, ``prices``), keyed by the rest of the key."""
        start = prefix + "."
        return {k[len(start) :]: v for k, v in self.values.items() if k.startswith(start)}


def config_home() -> Path:
    """``$PLAIT_HOME``, else ``$XDG_CONFIG_HOME/plait`` (``~/.config/plait``)."""
    if home := os.environ.get("PLAIT_HOME"):
        return Path(home).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "plait"


def project_file(start: Path, notes: list[str] | None = None) -> tuple[Path, bool] | None:
    """The nearest project config from ``start`` up: ``(path, is_pyproject)``.

    A ``pyproject.toml`` counts only when it mentions ``[tool.plait``; at most its first
    :data:`MAX_CONFIG_BYTES` (+1) bytes are read to tell. One that cannot be read, or is larger
    than that without the table in those bytes, is skipped (a note saying so is appended to
    ``notes``) and the search goes on up: an unrelated project file never breaks the CLI.
    """
    folder = start.resolve()
    for _ in range(MAX_PARENT_LEVELS):
        candidate = folder / "plait.toml"
        if candidate.is_file():
            return candidate, False
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and _mentions_plait(pyproject, notes):
            return pyproject, True
        if folder.parent == folder:
            return None
        folder = folder.parent
    return None


def _mentions_plait(pyproject: Path, notes: list[str] | None) -> bool:
    """Whether ``pyproject`` holds ``[tool.plait`` in its first bytes (see :func:`project_file`)."""
    try:
        with pyproject.open("rb") as handle:
            head = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        why = f"it cannot be read ({exc.strerror or exc})"
    else:
        if b"[tool.plait" in head:
            return True
        if len(head) <= MAX_CONFIG_BYTES:
            return False
        why = f"it is larger than {MAX_CONFIG_BYTES:,} bytes with no [tool.plait] in them"
    if notes is not None:
        notes.append(f"{pyproject} skipped: {why}; move plait settings to a plait.toml.")
    return False


def _read_bytes(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigFileError(path, f"cannot be read ({exc.strerror or exc}).") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigFileError(path, f"is larger than {MAX_CONFIG_BYTES:,} bytes; trim it.")
    return data


def read_config_file(path: Path, *, pyproject: bool = False) -> ConfigFile:
    """Parse and validate one file (``[tool.plait]`` of a ``pyproject.toml``).

    Raises :class:`ConfigFileError` naming the file, and the key for a bad value.
    """
    data = _read_bytes(path)
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigFileError(path, "is not UTF-8 text.") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(path, f"is not valid TOML: {exc}.") from None
    except RecursionError:
        raise ConfigFileError(
            path, "nests arrays or inline tables too deeply to be read; flatten it."
        ) from None
    except Exception as exc:  # hostile input (a cloned repository) must not break the CLI
        raise ConfigFileError(
            path, f"cannot be parsed as TOML ({type(exc).__name__}: {exc}); fix or remove it."
        ) from None
    if pyproject:
        tool = document.get("tool", {})
        table = tool.get("plait", {}) if isinstance(tool, dict) else None
        if not isinstance(table, dict):
            raise ConfigFileError(path, "[tool.plait] must be a table.")
        document = table
    try:
        return ConfigFile.model_validate(document)
    except ValidationError as exc:
        raise ConfigFileError(path, _validation_message(exc, pyproject)) from None


def _validation_message(exc: ValidationError, pyproject: bool) -> str:
    prefix = "tool.plait." if pyproject else ""
    problems = []
    for error in exc.errors()[:5]:
        key = prefix + ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            known = ", ".join(known_keys(error["loc"][:-1]))
            problems.append(f"unknown key {key!r} (known here: {known})")
        else:
            message = error["msg"].removeprefix("Value error, ").rstrip(".")
            problems.append(f"key {key!r}: {message}")
    more = len(exc.errors()) - len(problems)
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "") + "."


def _apply_file(settings: Settings, config: ConfigFile, path: Path) -> None:
    origin = str(path)
    base = path.parent
    data = config.model_dump(
        exclude_none=True,
        exclude={"skills", "limits", "workspace", "mcp", "prices", "subagents", "providers"},
    )
    for key, value in data.items():
        if key in _PATH_KEYS and "://" not in value:
            value = str(base / Path(value).expanduser())
        settings.set(key, value, origin)
    if config.limits is not None:
        for key, value in config.limits.model_dump(exclude_none=True).items():
            settings.set(f"limits.{key}", value, origin)
    if config.workspace is not None:
        for key, value in config.workspace.model_dump(exclude_none=True).items():
            settings.set(f"workspace.{key}", value, origin)
    for name, server in (config.mcp or {}).items():
        settings.set(f"mcp.{name}", server, origin)
    for name, price in (config.prices or {}).items():
        settings.set(f"prices.{name}", price, origin)
    for name, sub in (config.subagents or {}).items():
        skills = [str(base / Path(p).expanduser()) for p in sub.skills or []]
        settings.set(
            f"subagents.{name}", {**sub.model_dump(exclude_none=True), "skills": skills}, origin
        )
    for name, provider in (config.providers or {}).items():
        for key, value in provider.model_dump(exclude_none=True).items():
            settings.set(f"providers.{name}.{key}", value, origin)
        if provider.api_key is not None:
            settings.notes.append(
                f"{path}: providers.{name}.api_key holds an API key in a file, which is easily "
                'committed or shared; prefer api_key_env = "VARIABLE" (the key in its variable).'
            )


def load_settings(cwd: Path | None = None) -> Settings:
    """Defaults, then the user file, the project file and the environment, merged (see the
    module table). Command-line flags go on top with :meth:`Settings.set`.

    ``skills`` holds the files' folders as resolved paths, project folders first.
    Raises :class:`ConfigFileError` for an unreadable or invalid file.
    """
    settings = Settings()
    for key, value in _DEFAULTS.items():
        settings.set(key, value, "default")
    skills: list[tuple[str, str]] = []
    layers: list[tuple[Path, bool]] = []
    user = config_home() / "config.toml"
    if user.is_file():
        layers.append((user, False))
    if (found := project_file(cwd or Path.cwd(), settings.notes)) is not None:
        layers.append(found)
    for path, pyproject in layers:
        config = read_config_file(path, pyproject=pyproject)
        settings.files.append(path)
        _apply_file(settings, config, path)
        folders = [str(path.parent / Path(p).expanduser()) for p in config.skills or ()]
        skills[:0] = [(folder, str(path)) for folder in folders]  # later file = higher
    if skills:
        settings.values["skills"] = [folder for folder, _ in skills]
        settings.origins["skills"] = ", ".join(dict.fromkeys(origin for _, origin in skills))
    if settings.get("mcp_json"):
        _apply_mcp_json(settings, (cwd or Path.cwd()) / ".mcp.json")
    for key, variable in _ENVIRONMENT.items():
        settings.set(key, os.environ.get(variable) or None, f"${variable}")
    if settings.origins.get("timeout", "").startswith("$"):
        settings.values["timeout"] = parse_timeout(
            settings.values["timeout"], "$PLAIT_MODEL_TIMEOUT"
        )
    return settings


def _apply_mcp_json(settings: Settings, path: Path) -> None:
    """The servers of ``path`` (a ``.mcp.json``), under the config files' own: a name they
    already give keeps their settings, with a note. Raises :class:`ConfigFileError` naming the
    file and the key of a bad entry."""
    if not path.is_file():
        return
    from plait.mcp.dotmcp import read_mcp_json  # plait.mcp loads only when there is one
    from plait.mcp.errors import McpConfigError

    try:
        found = read_mcp_json(path)
    except McpConfigError as exc:
        raise ConfigFileError(path, str(exc).removeprefix(f"{path}: ")) from None
    settings.notes.extend(found.notes)
    for name, values in found.servers.items():
        key = f"mcp.{name}"
        if key in settings.values:
            settings.notes.append(
                f"MCP server {name!r}: the one in {settings.origins[key]} is used, not the one "
                f"in {path} (a config file wins over .mcp.json)."
            )
            continue
        try:
            server = McpServerConfig.model_validate(values)
        except ValidationError as exc:
            detail = _validation_message(exc, False)
            raise ConfigFileError(path, f"mcpServers.{name}: {detail}") from None
        settings.set(key, server, str(path))


_DEFAULTS: dict[str, Any] = {
    "mode": "disclosure",
    "mcp_json": True,
    "default_skills": True,
    "sandbox": "bwrap",
    "allow_scripts": False,
    "plain": False,
    "limits.max_input_tokens": 100_000,
    "workspace.enabled": True,
    "workspace.allow": [],
    "workspace.network": False,
}

_ENVIRONMENT = {"model": "PLAIT_MODEL", "store": "PLAIT_STORE", "timeout": "PLAIT_MODEL_TIMEOUT"}
