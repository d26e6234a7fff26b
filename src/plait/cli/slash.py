"""``plait chat``'s slash commands: ``/help``, ``/model``, ``/clear``, ``/thread``, ``/skills``,
``/pin``, ``/usage``, ``/exit``.

A line the person types is a message unless it starts with ``/``: then it is a command (its name
up to the first space, any letter case, then its argument). ``//`` at the start sends the line as
a message with one ``/`` less (``//etc/hosts is odd`` sends ``/etc/hosts is odd``). An unknown
command prints one line naming ``/help`` and nothing is sent.

The functions here are pure: :func:`read_line` tells a message from a command, :func:`run_slash`
runs one against a :class:`ChatHost` (what the chat session can do: switch the model, start or
find a thread, list skills) and returns the lines to print. :mod:`plait.cli.chat` provides the
host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from plait.cli.thread_choice import shown_id
from plait.errors import PlaitError
from plait.messages import Usage
from plait.models.registry import MODEL_SPEC_FORMS
from plait.pricing import Price

__all__ = [
    "COMMANDS",
    "ChatHost",
    "ChatSession",
    "SkillState",
    "Slash",
    "model_spec_for",
    "read_line",
    "run_slash",
]

HELP_HINT = "type /help for the commands"


@dataclass(frozen=True, slots=True)
class Slash:
    """A command line: its name (lowercase, without the ``/``) and its argument (stripped)."""

    name: str
    argument: str = ""


@dataclass(slots=True)
class ChatSession:
    """What a chat session knows between turns: the thread, the model, the skills pinned for
    the next turn, and the usage of every turn so far (``turns`` of them)."""

    thread_id: str
    spec: str
    price: Price | None = None
    new_thread: bool = True
    pins: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    done: bool = False
    can_pin: bool = True
    """Whether ``/pin`` works: disclosure mode's ``pinned_skills`` (managed mode loads skills
    through its own tools)."""


@dataclass(frozen=True, slots=True)
class SkillState:
    """One skill as ``/skills`` lists it: ``loaded`` when the thread holds its SKILL.md (read or
    pinned), ``pinned`` when ``/pin`` queued it for the next turn."""

    name: str
    description: str
    loaded: bool = False
    pinned: bool = False


class ChatHost(Protocol):
    """What the commands act on; :mod:`plait.cli.chat` implements it over the running agent.
    A method that cannot do what is asked raises a :class:`~plait.errors.PlaitError` whose
    message is printed as the command's answer."""

    session: ChatSession

    def switch_model(self, spec: str) -> tuple[str, Price | None]:
        """Build the model ``spec`` names and use it for the next turns; its spec and price."""
        ...

    def find_thread(self, given: str) -> tuple[str, int]:
        """The stored thread ``given`` (a whole id or a unique prefix) names, and its turns."""
        ...

    def skills(self) -> list[SkillState]:
        """The session's skills (``pinned`` left false), in catalog order."""
        ...


def read_line(text: str) -> Slash | str | None:
    """What a typed (or pasted) ``text`` is: ``None`` when blank, a :class:`Slash` when it starts
    with ``/`` (not ``//``), else the message to send (``//`` turned into ``/``)."""
    stripped = text.strip()
    if not stripped:
        return None
    if stripped.startswith("//"):
        return stripped[1:]
    if stripped.startswith("/"):
        words = stripped[1:].split(None, 1)  # the name ends at the first space or newline
        name = words[0].lower() if words else ""
        return Slash(name, words[1].strip() if len(words) > 1 else "")
    return stripped


_PROVIDERS = tuple(form.split(":", 1)[0] for form in MODEL_SPEC_FORMS)


def model_spec_for(current: str, name: str) -> str:
    """The spec ``/model NAME`` means: ``name`` itself when it is a whole spec (it starts with a
    provider of :data:`~plait.models.registry.MODEL_SPEC_FORMS` and a colon), else the current
    spec's provider (and ``@base_url``) with ``name`` as the model: ``openai:gpt-4.1`` then
    ``/model gpt-4.1-mini`` means ``openai:gpt-4.1-mini``."""
    name = name.strip()
    provider, colon, rest = current.partition(":")
    whole = ":" in name and name.split(":", 1)[0] in _PROVIDERS
    if whole or not colon:
        return name
    _, at, base_url = rest.partition("@")
    return f"{provider}:{name}{at}{base_url}" if at and "@" not in name else f"{provider}:{name}"


def _help(host: ChatHost, argument: str) -> list[str]:
    width = max(len(c.usage) for c in COMMANDS.values())
    lines = [f"{c.usage:<{width}}  {c.summary}" for c in COMMANDS.values()]
    return [*lines, f"{'//TEXT':<{width}}  send TEXT starting with one /"]


def _model(host: ChatHost, argument: str) -> list[str]:
    session = host.session
    if not argument:
        return [f"model: {session.spec}"]
    spec, price = host.switch_model(model_spec_for(session.spec, argument))
    session.spec, session.price = spec, price
    return [f"model: {spec} (for the next turns)"]


def _clear(host: ChatHost, argument: str) -> list[str]:
    from plait.messages import new_id

    session = host.session
    session.thread_id, session.new_thread = new_id(), True
    dropped = f"; pins dropped: {', '.join(session.pins)}" if session.pins else ""
    session.pins = []
    return [f"new thread: {shown_id(session.thread_id)}{dropped}"]


def _thread(host: ChatHost, argument: str) -> list[str]:
    session = host.session
    if not argument:
        return [f"thread: {shown_id(session.thread_id)}"]
    thread_id, turns = host.find_thread(argument)
    session.thread_id, session.new_thread = thread_id, False
    return [f"thread: {shown_id(thread_id)} ({turns} turn{'s' if turns != 1 else ''})"]


def _skills(host: ChatHost, argument: str) -> list[str]:
    found = host.skills()
    if not found:
        return ["no skills (add a folder with --skills, or skills = [...] in plait.toml)"]
    pins = set(host.session.pins)
    width = max(len(s.name) for s in found)
    lines = []
    for skill in found:
        marks = [m for m, on in (("loaded", skill.loaded), ("pinned", skill.name in pins)) if on]
        state = f"[{', '.join(marks)}]" if marks else ""
        lines.append(f"{skill.name:<{width}}  {state:<17} {_clip(skill.description, 70)}".rstrip())
    return lines


def _pin(host: ChatHost, argument: str) -> list[str]:
    if not argument:
        return ["usage: /pin NAME (see /skills)"]
    if not host.session.can_pin:
        return ["/pin works in disclosure mode (--mode disclosure); here, ask for the skill"]
    names = [s.name for s in host.skills()]
    if argument not in names:
        known = ", ".join(names) if names else "none"
        return [f"no skill {argument!r} to pin; skills: {known}"]
    pins = host.session.pins
    if argument not in pins:
        pins.append(argument)
    return [f"pinned {argument} for the next turn (its SKILL.md joins the thread)"]


def _usage(host: ChatHost, argument: str) -> list[str]:
    from plait.cli.display import usage_line  # the display loads with a turn, not with --help

    session = host.session
    turns = f"{session.turns} turn{'s' if session.turns != 1 else ''}"
    line = f"this session: {turns} · {usage_line(session.usage, session.price)}"
    if session.price is None:
        line += f" (no price known for {session.spec}: cost not shown)"
    return [line]


def _exit(host: ChatHost, argument: str) -> list[str]:
    host.session.done = True
    return []


@dataclass(frozen=True, slots=True)
class Command:
    usage: str
    summary: str
    run: Callable[[ChatHost, str], list[str]]


COMMANDS: dict[str, Command] = {
    "help": Command("/help", "these commands", _help),
    "model": Command("/model [NAME]", "show the model, or use NAME for the next turns", _model),
    "clear": Command("/clear", "start a new thread", _clear),
    "thread": Command("/thread [ID]", "show the thread id, or switch to ID (a prefix)", _thread),
    "skills": Command("/skills", "the skills, loaded or pinned", _skills),
    "pin": Command("/pin NAME", "pin the skill NAME for the next turn", _pin),
    "usage": Command("/usage", "tokens and cost of this session so far", _usage),
    "exit": Command("/exit", "end the session (also /quit, Ctrl-D)", _exit),
}
"""The commands, in the order ``/help`` lists them."""

_ALIASES = {"quit": "exit", "?": "help"}


def run_slash(host: ChatHost, slash: Slash) -> list[str]:
    """Run ``slash`` against ``host``; the lines to print. An unknown name, or a host error
    (a model spec that does not resolve, a thread prefix two threads share), is one line."""
    command = COMMANDS.get(_ALIASES.get(slash.name, slash.name))
    if command is None:
        return [f"unknown command /{slash.name}: {HELP_HINT}"]
    try:
        return command.run(host, slash.argument)
    except PlaitError as exc:
        return [str(exc)]


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
