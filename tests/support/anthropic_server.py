"""A local Messages API server on 127.0.0.1, as strict as the real one on the rules that bite.

Unlike :class:`wire_server.WireServer` (which replays fixture files), it answers from a *brain*:
a function from the request body to the blocks of the answer (``thinking``, ``redacted_thinking``,
``text``, ``tool_use`` specs). The server fills in what the API would: a ``signature`` for every
thinking block (an HMAC over the thinking text, with a key only the server knows), the ``data`` of
redacted thinking, tool-use ids, stop reason and usage; with ``"stream": true`` it streams the
answer as the API does (``content_block_start`` of type thinking, ``thinking_delta``,
``signature_delta``, ``text_delta``, ``input_json_delta``, ``message_delta``, ``message_stop``).

It refuses (HTTP 400, ``invalid_request_error``, with messages modelled on the real ones):

- with thinking enabled, a ``budget_tokens`` below 1,024 or not below ``max_tokens``, a
  ``temperature`` other than 1, a ``tool_choice`` that forces a tool, and a tool-use continuation
  whose final assistant message does not start with a ``thinking``/``redacted_thinking`` block
  ("Expected `thinking` or `redacted_thinking`, but found `tool_use`...");
- a thinking block whose signature it did not issue for that exact text; redacted thinking whose
  data it did not issue; reasoning blocks after a ``text``/``tool_use`` block of their message, or
  out of the order they were issued in;
- a ``tool_result`` naming no ``tool_use`` of the assistant message before it;
- more than 4 ``cache_control`` breakpoints, a 1-hour one after a 5-minute one, one on a
  thinking block (:mod:`anthropic_cache_rule`, which also reports cache reads and writes);
- an image or document block that is not valid base64, whose media type is not allowed, whose
  bytes do not match the media type, an image over 5 MB, more than 100 images; a non-text block in
  ``system``; an ``output_config.format`` schema with an object lacking
  ``additionalProperties: false`` or a constraint structured outputs do not take (``minimum``,
  ``maxLength`` …).

``GET /v1/models`` lists :attr:`AnthropicServer.models` (newest first, as the API does), paged
as the API pages (``limit``, default 20; ``after_id``; ``has_more``, ``last_id``).

Every request is recorded (:attr:`AnthropicServer.received`), with the decoded bytes of each
image and document it carried (:attr:`Received.media`), refused ones included.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from anthropic_cache_rule import CacheRuleViolation, PromptCacheRule
from strict_schema import anthropic_schema_problem

Brain = Callable[[dict[str, Any]], list[dict[str, Any]]]
"""Request body -> the answer's block specs: ``{"type": "thinking", "thinking": text}``,
``{"type": "redacted_thinking"}``, ``{"type": "text", "text": ...}``, ``{"type": "tool_use",
"name": ..., "input": {...}}``."""

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_IMAGES = 100
MAX_PDF_BYTES = 32 * 1024 * 1024
_SIGNATURES = {
    "image/png": (b"\x89PNG\r\n\x1a\n", 0),
    "image/jpeg": (b"\xff\xd8\xff", 0),
    "image/gif": (b"GIF8", 0),
    "image/webp": (b"WEBP", 8),
}
_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


class Refused(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any
    media: list[tuple[str, bytes]] = field(default_factory=list)
    """``(media type, decoded bytes)`` of every base64 image and document, in order."""
    refused: str | None = None


class AnthropicServer:
    """Answer Messages requests from ``brain``; use as a context manager."""

    def __init__(self, brain: Brain) -> None:
        self.brain = brain
        self.received: list[Received] = []
        self.models: list[str] = []
        """The model ids ``GET /v1/models`` lists, newest first."""
        self.cache = PromptCacheRule()
        """The prompt cache (:mod:`anthropic_cache_rule`): usage reports its reads and writes."""
        self._key = secrets.token_bytes(32)
        self._issued_order: dict[str, int] = {}  # signature or redacted data -> issue number
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> AnthropicServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def sign(self, thinking: str) -> str:
        """The signature this server issues for ``thinking``."""
        return hmac.new(self._key, thinking.encode(), hashlib.sha256).hexdigest()

    # --- one request ---------------------------------------------------------------------

    def list_models(self, received: Received) -> tuple[int, str, bytes]:
        """``GET /v1/models``: one page of :attr:`models`."""
        from urllib.parse import parse_qs, urlsplit

        with self._lock:
            self.received.append(received)
        query = parse_qs(urlsplit(received.path).query)
        limit = int(query.get("limit", ["20"])[0])
        after = query.get("after_id", [None])[0]
        start = self.models.index(after) + 1 if after in self.models else 0
        page = self.models[start : start + limit]
        data = [
            {
                "type": "model",
                "id": model,
                "display_name": model.replace("-", " ").title(),
                "created_at": "2025-01-01T00:00:00Z",
            }
            for model in page
        ]
        body = {
            "data": data,
            "has_more": start + limit < len(self.models),
            "first_id": page[0] if page else None,
            "last_id": page[-1] if page else None,
        }
        return 200, "application/json", json.dumps(body).encode()

    def handle(self, received: Received) -> tuple[int, str, bytes]:
        with self._lock:
            self.received.append(received)
            try:
                self._check(received)
                try:
                    cached = self.cache.usage(received.body)
                except CacheRuleViolation as violation:
                    raise Refused(str(violation)) from None
                blocks = self._answer(received.body)
            except Refused as refusal:
                received.refused = str(refusal)
                error = {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": str(refusal)},
                }
                return refusal.status, "application/json", json.dumps(error).encode()
        message = self._message(received.body, blocks)
        message["usage"].update(cached)
        if received.body.get("stream"):
            return 200, "text/event-stream", _sse(message)
        return 200, "application/json", json.dumps(message).encode()

    def _answer(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        number = len(self.received)
        for index, spec in enumerate(self.brain(body)):
            block = dict(spec)
            if block["type"] == "thinking":
                block["signature"] = self.sign(block["thinking"])
                self._issued_order[block["signature"]] = len(self._issued_order)
            elif block["type"] == "redacted_thinking":
                block["data"] = base64.b64encode(secrets.token_bytes(24)).decode()
                self._issued_order[block["data"]] = len(self._issued_order)
            elif block["type"] == "tool_use":
                block.setdefault("id", f"toolu_{number:03d}_{index}")
            blocks.append(block)
        return blocks

    @staticmethod
    def _message(body: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, Any]:
        uses_tool = any(block["type"] == "tool_use" for block in blocks)
        return {
            "id": f"msg_{secrets.token_hex(6)}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": blocks,
            "stop_reason": "tool_use" if uses_tool else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5 + 3 * len(blocks)},
        }

    # --- the rules ---------------------------------------------------------------------

    def _check(self, received: Received) -> None:
        body = received.body
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise Refused("messages: Field required")
        output_format = (body.get("output_config") or {}).get("format")
        if output_format is not None:
            problem = anthropic_schema_problem(output_format.get("schema"))
            if problem is not None:
                raise Refused(problem)
        if not isinstance(body.get("max_tokens"), int):
            raise Refused("max_tokens: Field required")
        thinking = body.get("thinking") or {}
        enabled = thinking.get("type") == "enabled"
        if enabled:
            self._check_thinking_settings(body, thinking)
        system = body.get("system")
        if isinstance(system, list):
            for index, block in enumerate(system):
                if block.get("type") != "text":
                    raise Refused(f"system.{index}.type: Input should be 'text'")
        images = 0
        previous_uses: set[str] = set()
        for i, message in enumerate(body["messages"]):
            content = message["content"]
            if isinstance(content, str):
                previous_uses = set()
                continue
            if message["role"] == "assistant":
                self._check_assistant(i, content)
                previous_uses = {b["id"] for b in content if b["type"] == "tool_use"}
                continue
            for j, block in enumerate(content):
                where = f"messages.{i}.content.{j}"
                if block["type"] == "tool_result":
                    if block["tool_use_id"] not in previous_uses:
                        raise Refused(
                            f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
                            f"{block['tool_use_id']}. Each `tool_result` block must have a "
                            "corresponding `tool_use` block in the previous message."
                        )
                    inner = block.get("content")
                    if isinstance(inner, list):
                        for k, part in enumerate(inner):
                            images += self._check_media(f"{where}.content.{k}", part, received)
                else:
                    images += self._check_media(where, block, received)
                if images > MAX_IMAGES:
                    raise Refused(f"Too many images: {images} > {MAX_IMAGES} in one request")
            previous_uses = set()
        if enabled:
            self._check_final_assistant(body["messages"])

    @staticmethod
    def _check_thinking_settings(body: dict[str, Any], thinking: dict[str, Any]) -> None:
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            raise Refused(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            )
        if budget >= body["max_tokens"]:
            raise Refused("`max_tokens` must be greater than `thinking.budget_tokens`.")
        if "temperature" in body and body["temperature"] != 1:
            raise Refused(
                "`temperature` may only be set to 1 when thinking is enabled. Please consult "
                f"our documentation at {_DOCS}"
            )
        if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
            raise Refused("Thinking may not be enabled when tool_choice forces tool use.")

    def _check_assistant(self, i: int, content: list[dict[str, Any]]) -> None:
        seen_other = False
        last_order = -1
        for j, block in enumerate(content):
            where = f"messages.{i}.content.{j}"
            kind = block["type"]
            if kind not in ("thinking", "redacted_thinking"):
                seen_other = True
                continue
            if kind == "thinking":
                text, signature = block.get("thinking", ""), block.get("signature", "")
                if not hmac.compare_digest(self.sign(text), signature):
                    raise Refused(f"{where}: Invalid `signature` in `thinking` block")
                token = signature
            else:
                token = block.get("data", "")
                if token not in self._issued_order:
                    raise Refused(f"{where}: Invalid `data` in `redacted_thinking` block")
            if seen_other:
                raise Refused(
                    f"{where}: `{kind}` blocks must come first in an `assistant` message, "
                    "before `text` and `tool_use` blocks, in the order they were received"
                )
            order = self._issued_order.get(token, -1)
            if order <= last_order:
                raise Refused(
                    f"{where}: `{kind}` blocks were reordered; send them back in the order "
                    "they were received"
                )
            last_order = order

    @staticmethod
    def _check_final_assistant(messages: list[dict[str, Any]]) -> None:
        last = next(
            (i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "assistant"),
            None,
        )
        if last is None:
            return
        content = messages[last]["content"]
        blocks = [{"type": "text"}] if isinstance(content, str) else content
        if not any(b["type"] == "tool_use" for b in blocks):
            return
        first = blocks[0]["type"] if blocks else "nothing"
        if first not in ("thinking", "redacted_thinking"):
            raise Refused(
                f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{first}`. When `thinking` is enabled, a final `assistant` message "
                "must start with a thinking block (preceeding the lastmost set of `tool_use` and "
                "`tool_result` blocks). We recommend you include thinking blocks from previous "
                "turns. To avoid this requirement, disable `thinking`. Please consult our "
                f"documentation at {_DOCS}"
            )

    @staticmethod
    def _check_media(where: str, block: dict[str, Any], received: Received) -> int:
        """Check an image or document block; the number of images it is (0 or 1)."""
        kind = block.get("type")
        if kind not in ("image", "document"):
            return 0
        source = block.get("source") or {}
        if source.get("type") == "url":
            if not str(source.get("url", "")).startswith(("http://", "https://")):
                raise Refused(f"{where}.source.url: Only HTTP(S) URLs are supported")
            return 1 if kind == "image" else 0
        if source.get("type") == "text" and kind == "document":
            if source.get("media_type") != "text/plain" or not isinstance(source.get("data"), str):
                raise Refused(f"{where}.source.text: a text/plain string is required")
            received.media.append(("text/plain", source["data"].encode()))
            return 0
        if source.get("type") != "base64":
            raise Refused(f"{where}.source.type: Input should be 'base64', 'url' or 'text'")
        media_type = source.get("media_type")
        try:
            data = base64.b64decode(source.get("data", ""), validate=True)
        except (binascii.Error, ValueError):
            raise Refused(f"{where}.source.base64: The {kind} data is not valid base64") from None
        received.media.append((str(media_type), data))
        if kind == "document":
            if media_type != "application/pdf":
                raise Refused(
                    f"{where}.source.base64.media_type: Input should be 'application/pdf'"
                )
            if not data.startswith(b"%PDF-"):
                raise Refused(f"{where}: The PDF specified was not valid.")
            if len(data) > MAX_PDF_BYTES:
                raise Refused(f"{where}: PDF exceeds {MAX_PDF_BYTES} bytes")
            return 0
        if media_type not in IMAGE_TYPES:
            raise Refused(
                f"{where}.source.base64.media_type: Input should be 'image/jpeg', 'image/png', "
                "'image/gif' or 'image/webp'"
            )
        signature, offset = _SIGNATURES[media_type]
        if data[offset : offset + len(signature)] != signature:
            raise Refused(f"{where}: Image does not match the provided media type {media_type}")
        if len(data) > MAX_IMAGE_BYTES:
            raise Refused(
                f"{where}.source.base64: image exceeds 5 MB maximum: {len(data)} bytes > "
                f"{MAX_IMAGE_BYTES} bytes"
            )
        return 1


def _sse(message: dict[str, Any]) -> bytes:
    """``message`` as the event stream the API sends for it."""
    events: list[dict[str, Any]] = []
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    events.append({"type": "message_start", "message": start})
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        if kind == "thinking":
            first: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": c} for c in _chunks(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            first = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in _chunks(block["text"])]
        elif kind == "tool_use":
            first = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            text = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": c} for c in _chunks(text)]
        else:  # redacted_thinking arrives whole
            first = block
        events.append({"type": "content_block_start", "index": index, "content_block": first})
        for delta in deltas:
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return b"".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events
    )


def _chunks(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _handler_for(server: AnthropicServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = None
            status, content_type, data = server.handle(Received(self.path, headers, body))
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def do_GET(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            received = Received(self.path, headers, None)
            if self.path.split("?", 1)[0] == "/v1/models":
                status, content_type, data = server.list_models(received)
            else:
                missing = {"type": "not_found_error", "message": "Not found"}
                error = {"type": "error", "error": missing}
                status, content_type, data = 404, "application/json", json.dumps(error).encode()
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
