"""A local OpenAI Responses API server on 127.0.0.1, as strict as the real one on the rules
that bite, for the official SDK to talk to through ``base_url``.

Tests queue the model's turns (:meth:`ResponsesServer.turn`: a reasoning summary, then tool
calls or text); each ``POST /v1/responses`` is validated first and answered 400 (the API's error
shape) when it breaks a rule:

- a reasoning item must come back verbatim: its ``encrypted_content`` carries an HMAC the
  server checks (an edited one is ``invalid_encrypted_content``), and with ``store: false``
  an item without ``encrypted_content`` is "not persisted";
- a ``function_call`` the server issued must be preceded, in the same turn, by the reasoning
  item that led to it ("provided without its required 'reasoning' item");
- a reasoning item (or a run of them) must be followed by the item it led to, an assistant
  ``message`` or a ``function_call`` ("provided without its required following item");
- an item id appears once ("Duplicate item found with id");
- a ``function_call_output`` needs a matching ``function_call`` before it, and every
  ``function_call`` needs its output;
- ``input_image`` data URLs must be base64 of a PNG, JPEG, GIF or WebP whose bytes match the
  stated media type; at most 500 images and 50 MB of image bytes per request; ``input_file``
  data must be a PDF when it says so;
- a strict ``text.format`` JSON schema must follow OpenAI's strict rules (:mod:`strict_schema`).

Answers, whole or streamed, follow the real event sequence: ``response.created``,
``response.in_progress``, per item ``response.output_item.added`` ... ``.done`` (reasoning:
``reasoning_summary_part.added``, ``reasoning_summary_text.delta``/``.done``,
``reasoning_summary_part.done``; text: ``content_part.added``, ``output_text.delta``/``.done``;
calls: ``function_call_arguments.delta``/``.done``), then ``response.completed`` with usage
(cached and reasoning tokens included). Every request body is recorded.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from openai_cache_rule import OpenAIPrefixCache
from strict_schema import openai_schema_problem

MAX_IMAGES = 500
MAX_IMAGE_BYTES = 50 * 1024 * 1024
_SIGNATURES = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "application/pdf": (b"%PDF-",),
}


@dataclass
class Turn:
    """One answer of the model: reasoning (its summary text), then calls or text."""

    reasoning: str | None = "Thinking about the next step."
    calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    """``(name, arguments)``: a dict is sent as JSON, a string as it is."""
    text: str = ""
    input_tokens: int = 120
    cached_tokens: int = 64
    output_tokens: int = 40
    reasoning_tokens: int = 24
    fail: str | None = None
    """Stream only: send ``response.failed`` with this message instead of an answer."""
    incomplete: str | None = None
    """Answer with status ``incomplete`` and this reason (``max_output_tokens``)."""
    cut_short: bool = False
    """Stream only: end the body before ``response.completed``."""


class BadRequest(Exception):
    def __init__(self, message: str, code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": param,
                "code": code,
            }
        }


class ResponsesServer:
    """Serve queued turns to ``POST /v1/responses``; use as a context manager."""

    def __init__(self, *, prompt_cache: bool = False) -> None:
        self.prompt_cache = OpenAIPrefixCache() if prompt_cache else None
        """With ``prompt_cache=True`` usage counts the prompt and its cached prefix by
        OpenAI's rule (:mod:`openai_cache_rule`) instead of the turn's figures."""
        self.received: list[dict[str, Any]] = []
        self.rejected: list[dict[str, Any]] = []
        """The 400 bodies sent, in order."""
        self._turns: deque[Turn] = deque()
        self._secret = os.urandom(32)
        self._issued_calls: dict[str, str] = {}  # call_id -> id of the reasoning item before it
        self._count = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> ResponsesServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def turn(self, turn: Turn | None = None, /, **fields: Any) -> None:
        self._turns.append(turn or Turn(**fields))

    # --- handling ---------------------------------------------------------------------------

    def handle(self, body: Any) -> tuple[int, list[bytes], str]:
        with self._lock:
            self.received.append(body)
            try:
                self._validate(body)
                if not self._turns:
                    raise BadRequest("responses server: no turn queued", "test_error")
                turn = self._turns.popleft()
                response = self._respond(body, turn)
            except BadRequest as exc:
                self.rejected.append(exc.body)
                return 400, [json.dumps(exc.body).encode()], "application/json"
        if body.get("stream"):
            return 200, _sse(response, turn), "text/event-stream"
        return 200, [json.dumps(response).encode()], "application/json"

    def _next_id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count:04d}"

    def _seal(self, claims: dict[str, Any]) -> str:
        data = base64.urlsafe_b64encode(json.dumps(claims, sort_keys=True).encode()).decode()
        tag = hmac.new(self._secret, data.encode(), hashlib.sha256).hexdigest()
        return f"{data}.{tag}"

    def _open(self, token: object) -> dict[str, Any] | None:
        if not isinstance(token, str) or token.count(".") != 1:
            return None
        data, tag = token.split(".")
        expected = hmac.new(self._secret, data.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(tag, expected):
            return None
        claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(data))
        return claims

    def _respond(self, body: dict[str, Any], turn: Turn) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        calls = [
            (self._next_id("fc"), self._next_id("call"), name, args) for name, args in turn.calls
        ]
        if turn.reasoning is not None:
            rs_id = self._next_id("rs")
            wants_summary = bool((body.get("reasoning") or {}).get("summary"))
            summary = [{"type": "summary_text", "text": turn.reasoning}] if wants_summary else []
            item: dict[str, Any] = {"id": rs_id, "type": "reasoning", "summary": summary}
            if "reasoning.encrypted_content" in (body.get("include") or []):
                item["encrypted_content"] = self._seal(
                    {"id": rs_id, "calls": [c[1] for c in calls], "n": os.urandom(8).hex()}
                )
                # Only an item that can come back (encrypted) is required back.
                for _, call_id, _, _ in calls:
                    self._issued_calls[call_id] = rs_id
            output.append(item)
        if turn.text:
            output.append(
                {
                    "id": self._next_id("msg"),
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
                }
            )
        for fc_id, call_id, name, args in calls:
            output.append(
                {
                    "id": fc_id,
                    "type": "function_call",
                    "status": "completed",
                    "call_id": call_id,
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                }
            )
        prompt, cached = turn.input_tokens, turn.cached_tokens
        if self.prompt_cache is not None:
            prompt, cached = self.prompt_cache.tokens_and_cached(body)
        usage = {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": turn.output_tokens,
            "output_tokens_details": {"reasoning_tokens": turn.reasoning_tokens},
            "total_tokens": prompt + turn.output_tokens,
        }
        return {
            "id": self._next_id("resp"),
            "object": "response",
            "created_at": 1764633600,
            "status": "incomplete" if turn.incomplete else "completed",
            "model": body["model"],
            "output": output,
            "usage": usage,
            "error": None,
            "incomplete_details": {"reason": turn.incomplete} if turn.incomplete else None,
            "instructions": body.get("instructions"),
            "parallel_tool_calls": True,
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools", []),
            "store": body.get("store", True),
        }

    # --- validation -------------------------------------------------------------------------

    def _validate(self, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            raise BadRequest("Missing required parameter: 'model'.", "missing_required_parameter")
        items = body.get("input")
        if not isinstance(items, list):
            raise BadRequest("Invalid type for 'input': expected an array.", param="input")
        store = body.get("store", True)
        fmt = (body.get("text") or {}).get("format") or {}
        if fmt.get("type") == "json_schema" and fmt.get("strict"):
            problem = openai_schema_problem(str(fmt.get("name")), fmt.get("schema"))
            if problem is not None:
                raise BadRequest(problem, "invalid_json_schema", "text.format.schema")
        for tool in body.get("tools") or []:
            if tool.get("type") != "function" or not isinstance(tool.get("parameters"), dict):
                raise BadRequest("Invalid tool: a function tool needs parameters.", param="tools")
        images = [0, 0]  # count, bytes
        turn_reasoning: set[str] = set()
        calls: set[str] = set()
        answered: set[str] = set()
        dangling: str | None = None  # the reasoning item still waiting for its following item
        seen: set[str] = set()
        for index, item in enumerate(items):
            kind = item.get("type", "message")
            where = f"input[{index}]"
            item_id = item.get("id")
            if isinstance(item_id, str):
                if item_id in seen:
                    raise BadRequest(
                        f"Duplicate item found with id {item_id}. Remove duplicate items from "
                        "your input and try again.",
                        param="input",
                    )
                seen.add(item_id)
            follows = kind == "function_call" or (
                kind == "message" and item.get("role") == "assistant"
            )
            if dangling is not None and kind != "reasoning" and not follows:
                raise _without_following_item(dangling)
            if kind != "reasoning":
                dangling = None
            if kind == "message":
                if item.get("role") != "assistant":
                    turn_reasoning = set()
                self._check_message(item, where, images)
            elif kind == "reasoning":
                dangling = self._check_reasoning(item, where, store)
                turn_reasoning.add(dangling)
            elif kind == "function_call":
                call_id = item.get("call_id")
                if not isinstance(call_id, str) or not isinstance(item.get("arguments"), str):
                    raise BadRequest(f"Invalid '{where}': function_call needs call_id, arguments.")
                required = self._issued_calls.get(call_id)
                if required is not None and required not in turn_reasoning:
                    raise BadRequest(
                        f"Item '{call_id}' of type 'function_call' was provided without its "
                        f"required 'reasoning' item: '{required}'.",
                        param="input",
                    )
                calls.add(call_id)
            elif kind == "function_call_output":
                turn_reasoning = set()
                call_id = item.get("call_id")
                if call_id not in calls:
                    raise BadRequest(
                        f"No tool call found for function call output with call_id {call_id}.",
                        param="input",
                    )
                answered.add(call_id)
                output = item.get("output")
                if isinstance(output, list):
                    self._check_content(output, f"{where}.output", images, "user")
                elif not isinstance(output, str):
                    raise BadRequest(f"Invalid '{where}.output': expected a string or an array.")
            else:
                raise BadRequest(f"Invalid '{where}.type': {kind!r} is not supported here.")
        if dangling is not None:
            raise _without_following_item(dangling)
        missing = calls - answered
        if missing:
            raise BadRequest(f"No tool output found for function call {sorted(missing)[0]}.")

    def _check_reasoning(self, item: dict[str, Any], where: str, store: object) -> str:
        rs_id = item.get("id")
        if not isinstance(rs_id, str) or not isinstance(item.get("summary"), list):
            raise BadRequest(f"Invalid '{where}': a reasoning item needs id and summary.")
        token = item.get("encrypted_content")
        if token is None:
            if store is False:
                raise BadRequest(
                    f"Item with id '{rs_id}' not found. Items are not persisted when `store` is "
                    "set to false. Try again with `store` set to true, or remove this item from "
                    "your input.",
                    param="input",
                )
            return rs_id
        claims = self._open(token)
        if claims is None or claims.get("id") != rs_id:
            raise BadRequest(
                f"The encrypted content for item {rs_id} could not be verified.",
                "invalid_encrypted_content",
            )
        return rs_id

    def _check_message(self, item: dict[str, Any], where: str, images: list[int]) -> None:
        role = item.get("role")
        if role not in ("user", "system", "developer", "assistant"):
            raise BadRequest(f"Invalid '{where}.role': {role!r}.")
        content = item.get("content")
        if isinstance(content, str):
            return
        if not isinstance(content, list):
            raise BadRequest(f"Invalid '{where}.content': expected a string or an array.")
        self._check_content(content, f"{where}.content", images, role)

    def _check_content(self, content: list[Any], where: str, images: list[int], role: str) -> None:
        allowed = (
            {"output_text", "refusal"}
            if role == "assistant"
            else {"input_text", "input_image", "input_file"}
        )
        for index, part in enumerate(content):
            kind = part.get("type")
            at = f"{where}[{index}]"
            if kind not in allowed:
                raise BadRequest(
                    f"Invalid value: '{kind}'. Supported values are: {sorted(allowed)}.", param=at
                )
            if kind == "input_image":
                images[0] += 1
                images[1] += self._check_image(part, at)
                if images[0] > MAX_IMAGES:
                    raise BadRequest(f"Too many images: at most {MAX_IMAGES} per request.")
                if images[1] > MAX_IMAGE_BYTES:
                    raise BadRequest("Image bytes exceed 50 MB for this request.")
            elif kind == "input_file":
                self._check_file(part, at)

    def _check_image(self, part: dict[str, Any], where: str) -> int:
        url = part.get("image_url")
        if part.get("detail") not in (None, "auto", "low", "high", "original"):
            raise BadRequest(f"Invalid '{where}.detail'.")
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            return 0
        media_type, data = _decode_data_url(url, where)
        if media_type not in ("image/png", "image/jpeg", "image/gif", "image/webp"):
            raise BadRequest(
                f"Invalid '{where}.image_url': unsupported image type {media_type}.",
                "invalid_image_format",
            )
        if not _has_signature(media_type, data):
            raise BadRequest(
                f"Invalid '{where}.image_url': the image data is not a valid {media_type}.",
                "invalid_image",
            )
        return len(data)

    def _check_file(self, part: dict[str, Any], where: str) -> None:
        if isinstance(part.get("file_url"), str):
            return
        if not isinstance(part.get("filename"), str):
            raise BadRequest(f"Missing required parameter: '{where}.filename'.")
        media_type, data = _decode_data_url(part.get("file_data"), where)
        if media_type == "application/pdf" and not _has_signature(media_type, data):
            raise BadRequest(f"Invalid '{where}.file_data': the file is not a valid PDF.")


def _without_following_item(rs_id: str) -> BadRequest:
    return BadRequest(
        f"Item '{rs_id}' of type 'reasoning' was provided without its required following item.",
        param="input",
    )


def _has_signature(media_type: str, data: bytes) -> bool:
    if media_type == "image/webp":
        return data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    return any(data.startswith(s) for s in _SIGNATURES.get(media_type, ()))


def _decode_data_url(url: object, where: str) -> tuple[str, bytes]:
    if not isinstance(url, str) or not url.startswith("data:"):
        raise BadRequest(f"Invalid '{where}': expected a URL or a base64 data URL.")
    header, _, payload = url.partition(",")
    if not header.endswith(";base64"):
        raise BadRequest(f"Invalid '{where}': the data URL must be base64.")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest(f"Invalid '{where}': invalid base64 data.") from None
    return header[5 : -len(";base64")], data


def decode_data_url(url: str) -> bytes:
    """The bytes of a base64 data URL (for assertions)."""
    return _decode_data_url(url, "url")[1]


def _sse(response: dict[str, Any], turn: Turn) -> list[bytes]:
    sequence = iter(range(1_000_000))
    chunks: list[bytes] = []

    def emit(kind: str, **data: Any) -> None:
        body = {"type": kind, "sequence_number": next(sequence), **data}
        chunks.append(f"event: {kind}\ndata: {json.dumps(body)}\n\n".encode())

    started = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    if turn.fail is not None:
        failed = {**started, "status": "failed"}
        failed["error"] = {"code": "server_error", "message": turn.fail}
        emit("response.failed", response=failed)
        return chunks
    for index, item in enumerate(response["output"]):
        _emit_item(emit, index, item)
    if not turn.cut_short:
        done = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        emit(done, response=response)
    return chunks


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _emit_item(emit: Any, index: int, item: dict[str, Any]) -> None:
    kind = item["type"]
    item_id = item["id"]
    at = {"output_index": index, "item_id": item_id}
    if kind == "reasoning":
        emit("response.output_item.added", output_index=index, item={**item, "summary": []})
        for s_index, summary in enumerate(item["summary"]):
            part: dict[str, Any] = {"type": "summary_text", "text": ""}
            emit("response.reasoning_summary_part.added", **at, summary_index=s_index, part=part)
            for piece in _pieces(summary["text"]):
                emit(
                    "response.reasoning_summary_text.delta",
                    **at,
                    summary_index=s_index,
                    delta=piece,
                )
            emit(
                "response.reasoning_summary_text.done",
                **at,
                summary_index=s_index,
                text=summary["text"],
            )
            emit("response.reasoning_summary_part.done", **at, summary_index=s_index, part=summary)
    elif kind == "message":
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "content": [], "status": "in_progress"},
        )
        text = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        emit("response.content_part.added", **at, content_index=0, part=part)
        for piece in _pieces(text):
            emit("response.output_text.delta", **at, content_index=0, delta=piece, logprobs=[])
        emit("response.output_text.done", **at, content_index=0, text=text, logprobs=[])
        emit("response.content_part.done", **at, content_index=0, part=item["content"][0])
    else:
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "arguments": "", "status": "in_progress"},
        )
        for piece in _pieces(item["arguments"]):
            emit("response.function_call_arguments.delta", **at, delta=piece)
        emit("response.function_call_arguments.done", **at, arguments=item["arguments"])
    emit("response.output_item.done", output_index=index, item=item)


def _handler_for(server: ResponsesServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            if self.path != "/v1/responses":
                status, chunks, content_type = (
                    404,
                    [b'{"error": {"message": "not found"}}'],
                    "application/json",
                )
            else:
                status, chunks, content_type = server.handle(json.loads(raw) if raw else None)
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(sum(len(c) for c in chunks)))
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
