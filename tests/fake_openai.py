"""A real OpenAI-compatible chat-completions server for the evaluation tests and the benchmark.

``FakeOpenAI`` runs ``http.server.ThreadingHTTPServer`` on 127.0.0.1 (ephemeral port) in a
daemon thread and answers ``POST /v1/chat/completions`` in the chat-completions JSON format
(id, object, created, model, choices[{index, message{role, content}, finish_reason}], usage).
It is a context manager; ``.base_url`` is ``http://127.0.0.1:PORT/v1``. Every request is
recorded (``.requests``, a thread-safe list of ``Request``): its number (1-based arrival order),
the parsed body, the number and pixel sizes of its images, the fault injected, if any. Every image
data URL of every request is decoded (base64 JPEG -> Pillow); a request holding an image that
does not decode is answered 400. Decoding results are cached by the base64 string, so a
conversation's history images (resent with every request) are decoded once.

Policies (what a successful reply says):

* ``"solver"``: the correct next action of the episode. The episode is identified by the first
  user turn's first image (the base64 string), registered beforehand with ``register`` /
  ``register_episodes`` (``solver_entries`` computes the plans with
  ``visgym.make(env_id, num_envs=1, autoreset="disabled", max_steps=None)``, ``reset`` with the
  episode's seed and init state, ``solve()[0]``, and encodes the frames with
  ``visgym.bridges.imaging.encode_jpeg_b64(frame, max_long_side)``, exactly as the runner does).
  The step index is the number of user turns minus one (full-history mode). Two refinements make
  the solver robust where that rule alone breaks: the frames along the plan are registered too,
  so when the current observation is one of them the plan position is read off the image (a step
  wasted on an error placeholder leaves the state, hence the image, unchanged), and a history
  window that has pruned the first turn is still recognised by its current image. Text mode is
  recognised the same way by the ASCII frames the user turns start with.
* ``"garbage"``: a reply with no action in it.
* a callable ``policy(ctx) -> str``: ``ctx`` is a ``Context`` (request number, step, plan and
  plan index when known, the messages).

``style`` wraps the action: ``plain`` ``('move', 0)``; ``prose`` (a sentence around it);
``fence`` (a python code fence); ``think`` (``<think>..</think><answer>ACTION</answer>``);
``bare`` (head identifier unquoted: ``(move, 0)``, ``(stop, 'stop')``).

Fault injection, scripted per request number (``faults={3: "500", 4: "hang"}``), by a callable
``faults(number, ctx) -> kind | None``, or at random (``fault_rate`` with ``fault_seed`` over
``fault_kinds``). Kinds: ``429`` (with ``Retry-After: 1``), ``500``, ``503``, ``hang`` (no
answer for ``hang_s`` seconds, then the connection is closed), ``drop`` (the socket is closed
without a response), ``malformed`` (200 with a body that is not JSON), ``null``
(``content: null``), ``empty`` (``content: ""``), ``length`` (the normal reply with
``finish_reason: "length"``), ``context`` (400, "maximum context length is 8192 tokens"), and
(``FAULT_KINDS`` lists them all):

* text the client must make encodable: ``surrogate`` (the reply plus a ``"\ud800"`` escape),
  ``nul`` (plus a NUL), ``not_utf8`` (a body with bytes that are not UTF-8);
* wrong shapes: ``choices_int`` (``"choices": 5``), ``choices_dict`` (``{"0": ...}``),
  ``message_null``, ``content_number`` (``"content": 42``), ``not_object`` (a JSON list),
  ``empty_choices`` (``[]``), ``refusal`` (null content with a refusal), ``error_200`` (200 with
  an ``{"error": ...}`` object, code 502), ``usage_text`` (the reply with usage counts that are
  not numbers), ``content_parts`` (the reply as a list of two text parts: valid);
* size: ``long_reply`` (``long_reply_chars`` of prose, then the action), ``huge_reply`` (a JSON
  reply of ``huge_bytes``), ``garbage`` (``huge_bytes`` of random bytes), ``gzip_bomb`` (a gzip
  body decoding to ``bomb_bytes``);
* bodies cut or slow: ``slow_body`` (the body dripped, a piece every ``drip_s``, for up to
  ``hang_s``), ``partial`` (half the body, then a close), ``reset_body`` (half, then a reset);
* framing: ``negative_chunk`` (chunked with a size of ``-5``), ``redirect_loop`` (307 to itself),
  ``huge_head`` (a 100 KB header arriving in one piece), ``bad_length`` (``Content-Length:
  12abc``);
* statuses: ``400``, ``401``, ``404`` (the model "does not exist"), ``echo_auth`` (a 500 whose
  message quotes the request's Authorization header and key, as careless servers do).

Endpoint set-up faults (for the pre-flight): ``api_key`` (requests without ``Bearer <key>`` get
401), ``served_models`` (``GET /models`` lists them and a chat for another model gets vLLM's
404 "The model `X` does not exist."), ``max_images`` (vLLM's 400 "At most N image(s) may be
provided in one prompt."), ``max_context`` (vLLM's 400 when the prompt plus ``max_tokens`` is
over it), ``route_prefix`` (only paths under it are served: a base URL without ``/v1`` gets
404), ``echo_auth`` (every error message quotes the Authorization header). ``GET`` requests are
counted in ``.gets`` (their paths), not in ``.requests``.

``latency_ms`` delays every answer (concurrency tests and the benchmark).

``logprobs=True`` (standalone: ``--logprobs``) answers a request whose body asks for
``"logprobs": true`` with the sampled tokens as vLLM does: ``choices[0].logprobs.content``, one
``{"token", "logprob", "bytes", "top_logprobs"}`` per token of ``fake_tokens(content)`` (the
content cut into pieces of up to 4 characters, ids and log-probabilities derived from each
piece), the token given as ``"token_id:N"`` when the body also has vLLM's
``"return_tokens_as_token_ids": true``, else as the piece's text. Off by default: the server
then answers as before, whatever the body asks.

Standalone (a subprocess for the kill -9 resume test and the benchmark)::

    python tests/fake_openai.py --port-file F --policy solver --latency-ms 50 \
        --register maze_2d/easy [--style prose] [--max-long-side 336] [--no-record]

registers the whole shipped split, binds, then writes the port to F (atomically) and serves
until killed (SIGTERM/SIGINT end it cleanly).

``--fast`` serves the same solver replies from ``FastSolverServer`` instead, for the benchmark:
one asyncio event loop, no JSON parsing of the request and no image decoding. The episode and
plan position are found in the raw body: the first and the last image data URLs (bytes.find /
rfind) are looked up in the registered frames (first frames and frames along the plan, as
above), else the position is the N of the last "This is step N." It assumes what the runner
sends in image mode: the first user turn opens with the episode's first frame and the last user
turn's image is the current observation (no --final-goal, no text mode). Requests are neither
recorded nor faulted; the reply (with usage) is built from a template after ``--latency-ms``.

``--fast --rollout-starts N [--rollout-seed S]`` is the rollout collector's benchmark server
(bench/rollouts.py): instead of the shipped split it registers the first N starts that
``visgym rollouts`` draws for each ``--register`` env id (``plan_groups``, same seed rule), and
with ``--logprobs`` every reply carries vLLM's ``choices[0].logprobs.content`` (the tokens of
``fake_tokens``, as ``"token_id:N"``), as a trainer's policy server sends them. On exit it prints
one JSON line ``{"requests", "first_s", "last_s"}`` (monotonic seconds of the first request's
arrival and the last reply's dispatch) so a benchmark can time the busy window alone.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import gzip
import hashlib
import io
import json
import os
import random
import re
import signal
import socket
import struct
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image

from visgym.core.literal import parse_literal

DATA_URL_PREFIX = "data:image/jpeg;base64,"
FAULT_KINDS = ("429", "500", "503", "hang", "drop", "malformed", "null", "empty", "length",
               "context", "surrogate", "nul", "not_utf8", "choices_int", "choices_dict",
               "message_null", "content_number", "not_object", "empty_choices", "refusal",
               "error_200", "usage_text", "content_parts", "long_reply", "huge_reply", "garbage",
               "gzip_bomb", "slow_body", "partial", "reset_body", "negative_chunk",
               "redirect_loop", "huge_head", "bad_length", "400", "401", "404", "echo_auth")
STYLES = ("plain", "prose", "fence", "think", "bare")
CONTEXT_MESSAGE = ("This model's maximum context length is 8192 tokens. However, your messages "
                   "resulted in 9123 tokens. Please reduce the length of the messages.")
GARBAGE_REPLY = "I am not sure what to do here; the picture is quite confusing."
_STEP_RE = re.compile(r"This is step (\d+)\.")


# ------------------------------------------------------------------------------ reply styles
def _bare(action: str) -> str:
    """``('move', 0)`` -> ``(move, 0)``; only the head loses its quotes (the parser's fix)."""
    ok, value = parse_literal(action)
    if not ok:
        return action
    if not isinstance(value, tuple) or not value or not isinstance(value[0], str):
        return action
    rest = "".join(", " + repr(v) for v in value[1:])
    return f"({value[0]}{rest})"


def wrap_action(action: str, style: str) -> str:
    if style == "plain":
        return action
    if style == "prose":
        return (f"Looking at the picture, I think the best move is {action} because it brings "
                "me closer to the goal (I checked the walls).")
    if style == "fence":
        return f"Here is my action:\n```python\n{action}\n```"
    if style == "think":
        return (f"<think>The target is somewhere else (probably), so I plan the next move."
                f"</think><answer>{action}</answer>")
    if style == "bare":
        return f"My answer: {_bare(action)}"
    raise ValueError(f"unknown style {style!r} (expected one of {', '.join(STYLES)})")


def fake_tokens(text: str) -> tuple[list, list, list]:
    """``(pieces, token_ids, logprobs)`` the fake server samples for ``text``: pieces of up to
    4 characters, each id and log-probability a function of the piece."""
    pieces = [text[i:i + 4] for i in range(0, len(text), 4)]
    ids, logprobs = [], []
    for piece in pieces:
        digest = int.from_bytes(
            hashlib.sha256(piece.encode("utf-8", "surrogatepass")).digest()[:4], "little")
        ids.append(digest % 151_000)
        logprobs.append(-((digest >> 8) % 4000) / 1000.0)
    return pieces, ids, logprobs


def _logprobs_block(text: str, as_ids: bool) -> dict:
    pieces, ids, logprobs = fake_tokens(text)
    return {"content": [{"token": f"token_id:{i}" if as_ids else piece, "logprob": lp,
                         "bytes": list(piece.encode("utf-8", "surrogatepass")),
                         "top_logprobs": []}
                        for piece, i, lp in zip(pieces, ids, logprobs)]}


# ------------------------------------------------------------------------------- registry
@dataclass
class EpisodeEntry:
    """What the solver policy knows about one episode."""

    plan: list
    first_image: str | None = None
    states: list = field(default_factory=list)        # b64 of the frame before plan[k]
    text_states: list = field(default_factory=list)   # ASCII frame before plan[k]


def solver_entries(episodes, max_long_side: int | None = 336, text: bool = False) -> list:
    """``EpisodeEntry`` per episode spec (visgym.bridges.splits.EpisodeSpec): the solver's plan
    from the init state and the encoded frames (or ASCII frames) along it."""
    import numpy as np

    import visgym
    from visgym.bridges.imaging import encode_jpeg_b64

    envs = {}
    entries = []
    for spec in episodes:
        key = (spec.env_id, json.dumps(spec.make_kwargs, sort_keys=True))
        env = envs.get(key)
        if env is None:
            env = envs[key] = visgym.make(spec.env_id, num_envs=1, autoreset="disabled",
                                          max_steps=None, **spec.make_kwargs)
        env.reset(seeds=[spec.episode_seed % 2**64], init_states=[spec.init_state])
        plan = list(env.solve()[0])
        states, text_states = [], []
        for action in plan:
            # The episode's own frame size (DESIGN.md "Frames"), as the runner sends it.
            states.append(encode_jpeg_b64(np.ascontiguousarray(env.frame(0)), max_long_side))
            if text:
                text_states.append(env.render_text(0))
            env.step([action])
        entries.append(EpisodeEntry(plan=plan, first_image=states[0], states=states,
                                    text_states=text_states))
    return entries


# ------------------------------------------------------------------------------- requests
@dataclass
class Request:
    number: int
    path: str
    body: dict | None
    n_images: int = 0
    image_sizes: list = field(default_factory=list)   # (width, height) per image, in order
    fault: str | None = None
    reply: str | None = None
    status: int = 200
    received: float = 0.0
    authorization: str | None = None


@dataclass
class Context:
    number: int
    messages: list
    step: int                      # user turns - 1, or the plan position read off the image
    entry: EpisodeEntry | None
    plan_index: int | None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeOpenAI/1.0"
    disable_nagle_algorithm = True  # TCP_NODELAY: no 40 ms Nagle/delayed-ACK stall per reply
    timeout = 120  # an idle keep-alive connection is closed after this

    def log_message(self, format, *args):  # quiet
        return

    def setup(self):
        super().setup()
        self.server.fake._track(self.connection, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, False)

    def do_GET(self):
        self.server.fake._handle_get(self)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.fake._handle(self, raw)

    # -- writing -------------------------------------------------------------------------
    def _send(self, status: int, payload: bytes, content_type: str = "application/json",
              headers: dict | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            # Headers and body leave in one write (end_headers would send the headers alone).
            self._headers_buffer.append(b"\r\n")
            self.wfile.write(b"".join(self._headers_buffer) + payload)
            self._headers_buffer = []
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def _json(self, status: int, obj, headers: dict | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), headers=headers)

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _raw(self, data: bytes, then: str | None = "close") -> None:
        """Write bytes as they are; then close the connection, reset it (RST) or keep it."""
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            then = "close"
        if then == "reset":
            self.close_connection = True
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
            except OSError:
                pass
        elif then == "close":
            self._drop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client that hangs up (a timeout, a response cut at its size limit) is expected in
        # the fault tests; only other errors are printed.
        error = sys.exc_info()[1]
        if not isinstance(error, (ConnectionError, TimeoutError, OSError)):
            super().handle_error(request, client_address)


class FakeOpenAI:
    """See the module docstring."""

    def __init__(self, policy="solver", style: str = "plain", latency_ms: float = 0.0,
                 faults=None, fault_rate: float = 0.0, fault_seed: int = 0,
                 fault_kinds=("429", "500", "503", "drop", "malformed"), hang_s: float = 3.0,
                 retry_after: str = "1", port: int = 0, record: bool = True,
                 decode_images: bool = True, api_key: str | None = None,
                 echo_auth: bool = False, served_models=None, max_images: int | None = None,
                 max_context: int | None = None, route_prefix: str | None = None,
                 huge_bytes: int = 50 << 20, bomb_bytes: int = 300 << 20,
                 long_reply_chars: int = 100_000, drip_s: float = 0.2, logprobs: bool = False):
        if style not in STYLES:
            raise ValueError(f"unknown style {style!r}")
        self.policy = policy
        self.style = style
        self.latency_ms = latency_ms
        self.faults = faults if faults is not None else {}
        self.fault_rate = fault_rate
        self.fault_kinds = tuple(fault_kinds)
        self._fault_rng = random.Random(fault_seed)
        self.hang_s = hang_s
        self.retry_after = retry_after
        self.record = record
        self.decode_images = decode_images
        self.api_key = api_key
        self.echo_auth = echo_auth
        self.served_models = None if served_models is None else list(served_models)
        self.max_images = max_images
        self.max_context = max_context
        self.route_prefix = route_prefix.rstrip("/") if route_prefix else None
        self.huge_bytes = huge_bytes
        self.bomb_bytes = bomb_bytes
        self.long_reply_chars = long_reply_chars
        self.drip_s = drip_s
        self.logprobs = logprobs
        self._bomb: bytes | None = None
        self.gets: list[str] = []
        self.requests: list[Request] = []
        self.count = 0            # requests received (also when not recording)
        self.answered = 0         # successful (200 with a reply) answers
        self._lock = threading.Lock()
        self._by_first: dict[str, EpisodeEntry] = {}
        self._by_state: dict[str, tuple[EpisodeEntry, int]] = {}
        self._text_entries: list[EpisodeEntry] = []
        self._decoded: dict[str, tuple | None] = {}
        self._connections: set = set()
        self._stop = threading.Event()
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.fake = self
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> "FakeOpenAI":
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever,
                                            kwargs={"poll_interval": 0.05},
                                            name=f"fake-openai-{self.port}", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _track(self, conn, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(conn)

    # -- registry ----------------------------------------------------------------------------
    def register(self, first_image_b64: str, plan: list) -> None:
        """The solver policy's plan for the episode whose first observation is this image."""
        self.register_entry(EpisodeEntry(plan=list(plan), first_image=first_image_b64))

    def register_entry(self, entry: EpisodeEntry) -> None:
        with self._lock:
            if entry.first_image is not None:
                self._by_first[entry.first_image] = entry
            for k, b64 in enumerate(entry.states):
                self._by_state[b64] = (entry, k)
            if entry.text_states:
                self._text_entries.append(entry)

    def register_episodes(self, episodes, max_long_side: int | None = 336,
                          text: bool = False) -> list:
        entries = solver_entries(episodes, max_long_side, text)
        for entry in entries:
            self.register_entry(entry)
        return entries

    def requests_snapshot(self) -> list:
        with self._lock:
            return list(self.requests)

    # -- request handling -----------------------------------------------------------------------
    def _decode(self, url) -> tuple | None:
        """(width, height) of an image data URL, None if it does not decode."""
        if not isinstance(url, str):
            return None
        cached = self._decoded.get(url, False)
        if cached is not False:
            return cached
        size = None
        if url.startswith("data:") and ";base64," in url[:64]:
            try:
                raw = base64.b64decode(url.split(",", 1)[1], validate=True)
                with Image.open(io.BytesIO(raw)) as image:
                    image.load()
                    size = image.size
            except (binascii.Error, ValueError, OSError, SyntaxError):
                size = None
        with self._lock:
            if len(self._decoded) > 20000:
                self._decoded.clear()
            self._decoded[url] = size
        return size

    @staticmethod
    def _image_urls(messages) -> list:
        urls = []
        for message in messages if isinstance(messages, list) else []:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                for part in content:
                    if isinstance(part, dict) and part.get("type") == "image_url":
                        image_url = part.get("image_url")
                        urls.append(image_url.get("url") if isinstance(image_url, dict) else None)
        return urls

    def _context(self, number: int, messages: list) -> Context:
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        step = max(len(users) - 1, 0)
        entry = index = None

        def images(message):
            content = message.get("content")
            if not isinstance(content, list):
                return []
            return [p["image_url"]["url"][len(DATA_URL_PREFIX):] for p in content
                    if isinstance(p, dict) and p.get("type") == "image_url"
                    and isinstance(p.get("image_url"), dict)
                    and str(p["image_url"].get("url", "")).startswith(DATA_URL_PREFIX)]

        def text_of(message):
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                for p in content:
                    if isinstance(p, dict) and p.get("type") == "text":
                        return p.get("text", "")
            return ""

        if users:
            first_images = images(users[0])
            if first_images:
                entry = self._by_first.get(first_images[0])
            last_images = images(users[-1])
            if last_images:
                hit = self._by_state.get(last_images[0])
                if hit is not None and (entry is None or hit[0] is entry):
                    entry, index = hit
            if index is None and self._text_entries:
                last_text = text_of(users[-1])
                for candidate in self._text_entries:
                    if entry is not None and candidate is not entry:
                        continue
                    for k, s in enumerate(candidate.text_states):
                        if last_text.startswith(s + "\n"):
                            entry, index = candidate, k
                            break
                    if index is not None:
                        break
            match = _STEP_RE.search(text_of(users[-1]))
            if match:
                step = int(match.group(1)) - 1   # equals user turns - 1 with the full history
        if index is None and entry is not None:
            index = step
        return Context(number, messages, step, entry, index)

    def answer_text(self, ctx: Context) -> str:
        if callable(self.policy):
            return str(self.policy(ctx))
        if self.policy == "garbage":
            return GARBAGE_REPLY
        if self.policy == "solver":
            if ctx.entry is None:
                return "I cannot recognise this episode, so I will stop. ('stop', 'stop')"
            plan = ctx.entry.plan
            action = plan[ctx.plan_index] if ctx.plan_index < len(plan) else plan[-1]
            return wrap_action(action, self.style)
        raise ValueError(f"unknown policy {self.policy!r}")

    def _pick_fault(self, number: int, ctx: Context | None) -> str | None:
        if callable(self.faults):
            return self.faults(number, ctx)
        kind = self.faults.get(number)
        if kind is None and self.fault_rate > 0:
            with self._lock:
                if self._fault_rng.random() < self.fault_rate:
                    kind = self._fault_rng.choice(self.fault_kinds)
        return kind

    # -- endpoint set-up faults ---------------------------------------------------------
    def _error(self, handler: _Handler, status: int, message: str, kind: str,
               headers: dict | None = None, **extra) -> None:
        if self.echo_auth:
            auth = handler.headers.get("Authorization") or ""
            message += (f" (request had Authorization: {auth}; key "
                        f"{auth.split(' ', 1)[-1]}; retry at https://user:hunter22@"
                        "proxy.example/v1)")
        handler._json(status, {"error": {"message": message, "type": kind, **extra}},
                      headers=headers)

    def _refused_key(self, handler: _Handler) -> bool:
        """401 for a request without the right key (when ``api_key`` is set)."""
        if self.api_key is None:
            return False
        auth = handler.headers.get("Authorization") or ""
        if auth == f"Bearer {self.api_key}":
            return False
        self._error(handler, 401, f"Incorrect API key provided: {auth.split(' ', 1)[-1]}.",
                    "invalid_request_error", code="invalid_api_key")
        return True

    def _routed(self, path: str) -> str | None:
        """The route of a path ("/chat/completions", "/models"), or None where there is none."""
        if self.route_prefix is not None:
            if not path.startswith(self.route_prefix + "/"):
                return None
            path = path[len(self.route_prefix):]
        for route in ("/chat/completions", "/models"):
            if path.endswith(route):
                return route
        return None

    def _handle_get(self, handler: _Handler) -> None:
        path = handler.path.split("?", 1)[0].rstrip("/")
        with self._lock:
            self.gets.append(path)
        if self._refused_key(handler):
            return
        if self._routed(path) != "/models":
            self._error(handler, 404, f"no route {path}", "not_found")
            return
        models = self.served_models if self.served_models is not None else ["fake"]
        handler._json(200, {"object": "list", "data": [{"id": m, "object": "model"}
                                                       for m in models]})

    def _setup_fault(self, handler: _Handler, body: dict, n_images: int) -> bool:
        """Answer a chat the endpoint's set-up refuses (model, images, context); True if so."""
        model = body.get("model")
        if self.served_models is not None and model not in self.served_models:
            self._error(handler, 404, f"The model `{model}` does not exist.", "NotFoundError")
            return True
        if self.max_images is not None and n_images > self.max_images:
            self._error(handler, 400, f"At most {self.max_images} image(s) may be provided in "
                        "one prompt.", "BadRequestError")
            return True
        if self.max_context is not None:
            prompt = 100 + 85 * n_images
            wanted = body.get("max_completion_tokens") or body.get("max_tokens") or 0
            if isinstance(wanted, int) and prompt + wanted > self.max_context:
                self._error(handler, 400, f"This model's maximum context length is "
                            f"{self.max_context} tokens. However, you requested "
                            f"{prompt + wanted} tokens ({prompt} in the messages, {wanted} in "
                            "the completion). Please reduce the length of the messages or "
                            "completion.", "BadRequestError")
                return True
        return False

    # -- per-request faults -------------------------------------------------------------
    def _bomb_body(self) -> bytes:
        with self._lock:
            if self._bomb is None:
                out = io.BytesIO()
                with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as f:
                    block = b"\0" * (1 << 20)
                    for _ in range(self.bomb_bytes >> 20):
                        f.write(block)
                self._bomb = out.getvalue()
            return self._bomb

    def _body_fault(self, handler: _Handler, fault: str, payload: bytes) -> bool:
        """Send ``payload`` (a 200 JSON reply) broken as ``fault`` says; True if it did."""
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(payload))
        half = payload[:len(payload) // 2]
        if fault == "partial":
            handler._raw(head + half, "close")
        elif fault == "reset_body":
            handler._raw(head + half, "reset")
        elif fault == "slow_body":
            handler._raw(head, None)
            deadline = time.monotonic() + self.hang_s
            for i in range(len(payload)):
                if self._stop.wait(self.drip_s) or time.monotonic() > deadline:
                    break
                try:
                    handler.wfile.write(payload[i:i + 1])
                    handler.wfile.flush()
                except OSError:
                    break
            handler._drop()
        elif fault == "negative_chunk":
            handler._raw(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n-5\r\n" + payload[:64] +
                         b"\r\n0\r\n\r\n", None)
            handler.close_connection = True
        elif fault == "huge_head":
            handler._raw(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: "
                         + b"p" * 100_000 + b"\r\nContent-Length: %d\r\n\r\n" % len(payload)
                         + payload, "close")
        elif fault == "bad_length":
            handler._raw(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 12abc\r\n\r\n" + payload, "close")
        elif fault == "redirect_loop":
            handler._raw(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: %s\r\n"
                         b"Content-Length: 0\r\n\r\n" % handler.path.encode("latin-1"), None)
        elif fault == "garbage":
            rng = random.Random(len(payload))
            handler._send(200, rng.randbytes(self.huge_bytes))
        elif fault == "gzip_bomb":
            handler._send(200, self._bomb_body(), headers={"Content-Encoding": "gzip"})
        elif fault == "not_utf8":
            handler._send(200, payload.replace(b'"content": "', b'"content": "\xff\xfe\xc3(', 1))
        else:
            return False
        return True

    def _shape_fault(self, fault: str, reply: dict) -> object:
        """The reply object reshaped as ``fault`` says (or as it is)."""
        choice = reply["choices"][0]
        if fault == "choices_int":
            reply["choices"] = 5
        elif fault == "choices_dict":
            reply["choices"] = {"0": choice}
        elif fault == "message_null":
            choice["message"] = None
        elif fault == "content_number":
            choice["message"]["content"] = 42
        elif fault == "empty_choices":
            reply["choices"] = []
        elif fault == "refusal":
            choice["message"]["content"] = None
            choice["message"]["refusal"] = "I can't help with that."
        elif fault == "error_200":
            return {"error": {"message": "upstream provider failed", "code": 502}}
        elif fault == "not_object":
            return [1, 2, 3]
        elif fault == "usage_text":
            reply["usage"] = {"prompt_tokens": "many", "completion_tokens": [1],
                              "total_tokens": None}
        elif fault == "content_parts":
            text = choice["message"]["content"]
            cut = len(text) // 2
            choice["message"]["content"] = [{"type": "text", "text": text[:cut]},
                                             {"type": "text", "text": text[cut:]}]
        return reply

    def _handle(self, handler: _Handler, raw: bytes) -> None:
        received = time.perf_counter()
        with self._lock:
            self.count += 1
            number = self.count
        path = handler.path.split("?", 1)[0].rstrip("/")
        try:
            body = json.loads(raw) if raw else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        req = Request(number=number, path=path, body=body, received=received,
                      authorization=handler.headers.get("Authorization"))
        if self.record:
            with self._lock:
                self.requests.append(req)
        if self._refused_key(handler):
            req.status = 401
            return
        if self._routed(path) != "/chat/completions":
            req.status = 404
            self._error(handler, 404, f"no route {path}", "not_found")
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            req.status = 400
            handler._json(400, {"error": {"message": "the body must be a JSON object with "
                                          "messages", "type": "invalid_request_error"}})
            return
        messages = body["messages"]
        urls = self._image_urls(messages)
        req.n_images = len(urls)
        if self.decode_images:
            for n, url in enumerate(urls):
                size = self._decode(url)
                if size is None:
                    req.status = 400
                    handler._json(400, {"error": {
                        "message": f"image {n} of the request does not decode as an image",
                        "type": "invalid_request_error"}})
                    return
                req.image_sizes.append(size)
        if self._setup_fault(handler, body, len(urls)):
            req.status = 400
            return
        ctx = self._context(number, messages)
        fault = self._pick_fault(number, ctx)
        req.fault = fault
        if self.latency_ms:
            if self._stop.wait(self.latency_ms / 1000.0):
                handler._drop()
                return
        if fault == "hang":
            self._stop.wait(self.hang_s)
            handler._drop()
            return
        if fault == "drop":
            handler._drop()
            return
        if fault in ("429", "500", "503", "400", "401", "404", "echo_auth"):
            status = 500 if fault == "echo_auth" else int(fault)
            req.status = status
            headers = {"Retry-After": self.retry_after} if status == 429 else None
            message = {429: "Rate limit reached, please retry later.",
                       500: "The server had an error while processing your request.",
                       503: "The engine is currently overloaded.",
                       400: "Invalid value for 'temperature': the request is malformed.",
                       401: "Incorrect API key provided.",
                       404: f"The model `{body.get('model')}` does not exist."}[status]
            if fault == "echo_auth":
                auth = handler.headers.get("Authorization") or ""
                message += f" Request headers: Authorization: {auth}; api_key={auth[7:]}"
            self._error(handler, status, message, "server_error" if status >= 500
                        else "rate_limit_error" if status == 429 else "invalid_request_error",
                        headers=headers)
            return
        if fault == "context":
            req.status = 400
            handler._json(400, {"error": {"message": CONTEXT_MESSAGE,
                                          "type": "invalid_request_error",
                                          "param": "messages",
                                          "code": "context_length_exceeded"}})
            return
        if fault == "malformed":
            handler._send(200, b'{"id": "chatcmpl-broken", "choices": [{"index": 0, "mess')
            return
        text = self.answer_text(ctx)
        finish = "stop"
        content = text
        if fault == "null":
            content = None
        elif fault == "empty":
            content = ""
        elif fault == "length":
            finish = "length"
        elif fault == "surrogate":
            content = text + " \ud800"
        elif fault == "nul":
            content = text + " \x00"
        elif fault == "long_reply":
            words = "I keep thinking about the picture in front of me. "
            content = (words * (self.long_reply_chars // len(words) + 1))[:self.long_reply_chars]
            content += " " + text
        elif fault == "huge_reply":
            content = ("A" * self.huge_bytes) + " " + text
        req.reply = content
        prompt_tokens = 100 + 85 * len(urls)
        completion_tokens = max(1, len(content or "") // 4)
        with self._lock:
            self.answered += 1
        reply = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0,
                         "message": {"role": "assistant", "content": content},
                         "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        if self.logprobs and body.get("logprobs") is True and isinstance(content, str):
            reply["choices"][0]["logprobs"] = _logprobs_block(
                content, body.get("return_tokens_as_token_ids") is True)
        if fault is not None and self._body_fault(handler, fault,
                                                  json.dumps(reply).encode()):
            return
        handler._json(200, self._shape_fault(fault, reply) if fault else reply)


# ------------------------------------------------------------------------------ fast server
class _FastConnection(asyncio.Protocol):
    """One keep-alive connection of ``FastSolverServer``: requests are answered in order."""

    def __init__(self, server: "FastSolverServer"):
        self.server = server
        self.buffer = bytearray()
        self.transport = None
        self.body_at = self.need = 0   # where the body of the pending request starts and ends
        self.busy = False              # a reply is waiting out the latency

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._next()

    def _next(self) -> None:
        buffer = self.buffer
        if not self.need:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buffer[:end]).lower()
            at = head.find(b"\r\ncontent-length:")
            length = 0
            if at >= 0:
                line_end = head.find(b"\r\n", at + 2)
                length = int(head[at + 17:line_end if line_end >= 0 else len(head)])
            self.body_at, self.need = end + 4, end + 4 + length
            self.path = head[head.find(b" ") + 1:head.find(b" http/")]
        if len(buffer) < self.need:
            return
        reply = self.server.reply(self.path, buffer, self.body_at, self.need)
        del buffer[:self.need]
        self.need = 0
        self.busy = True
        self.server.loop.call_later(self.server.latency_s, self._send, reply)

    def _send(self, reply: bytes) -> None:
        self.busy = False
        if not self.transport.is_closing():
            self.transport.write(reply)
            self._next()


class FastSolverServer:
    """The solver policy at benchmark speed (see the module docstring, ``--fast``)."""

    PREFIX = DATA_URL_PREFIX.encode()
    STEP = b"This is step "

    def __init__(self, entries, latency_ms: float = 0.0, style: str = "plain"):
        self.latency_s = latency_ms / 1000.0
        self.style = style
        self.by_first = {e.first_image.encode(): e for e in entries if e.first_image}
        self.by_state = {b64.encode(): (e, k) for e in entries for k, b64 in enumerate(e.states)}
        self.count = self.answered = 0
        self.loop = None

    def _image_at(self, buffer, at: int, stop: int) -> bytes:
        start = at + len(self.PREFIX)
        return bytes(buffer[start:buffer.find(b'"', start, stop)])

    def _action(self, buffer, start: int, stop: int) -> str:
        first = buffer.find(self.PREFIX, start, stop)
        if first < 0:
            return "I cannot recognise this episode, so I will stop. ('stop', 'stop')"
        entry = self.by_first.get(self._image_at(buffer, first, stop))
        hit = self.by_state.get(self._image_at(buffer, buffer.rfind(self.PREFIX, start, stop),
                                               stop))
        if hit is not None and (entry is None or hit[0] is entry):
            entry, index = hit
        elif entry is None:
            return "I cannot recognise this episode, so I will stop. ('stop', 'stop')"
        else:   # a frame off the plan: the position is the step number of the last turn
            index = self._step_number(buffer, start, stop) - 1
        plan = entry.plan
        return wrap_action(plan[index] if index < len(plan) else plan[-1], self.style)

    def _step_number(self, buffer, start: int, stop: int) -> int:
        at = buffer.rfind(self.STEP, start, stop)
        if at < 0:
            return 1
        at = end = at + len(self.STEP)
        while end < stop and 48 <= buffer[end] <= 57:   # ASCII digits
            end += 1
        return int(buffer[at:end]) if end > at else 1

    def reply(self, path: bytes, buffer, start: int, stop: int) -> bytes:
        self.count += 1
        if not path.rstrip(b"/").endswith(b"/chat/completions"):
            return _http_response(404, b'{"error": {"message": "no route", "type": "not_found"}}')
        content = self._action(buffer, start, stop)
        images = buffer.count(self.PREFIX, start, stop)
        prompt_tokens = 100 + 85 * images
        completion_tokens = max(1, len(content) // 4)
        self.answered += 1
        payload = ('{"id": "chatcmpl-fast%d", "object": "chat.completion", "created": %d, '
                   '"model": "fake", "choices": [{"index": 0, "message": {"role": "assistant", '
                   '"content": %s}, "finish_reason": "stop"}], "usage": {"prompt_tokens": %d, '
                   '"completion_tokens": %d, "total_tokens": %d}}' % (
                       self.count, int(time.time()), json.dumps(content), prompt_tokens,
                       completion_tokens, prompt_tokens + completion_tokens))
        return _http_response(200, payload.encode())

    async def serve(self, port: int, port_file: str, stop: asyncio.Event) -> None:
        self.loop = asyncio.get_running_loop()
        server = await self.loop.create_server(lambda: _FastConnection(self), "127.0.0.1", port,
                                               backlog=256)
        _write_port(port_file, server.sockets[0].getsockname()[1])
        await stop.wait()
        server.close()


class FastTokenSolverServer(FastSolverServer):
    """``FastSolverServer`` for the rollout benchmark: the same solver replies, with vLLM's
    token ids and log-probabilities, and the busy window timed (see the module docstring)."""

    def __init__(self, entries, latency_ms: float = 0.0, style: str = "plain",
                 logprobs: bool = True):
        super().__init__(entries, latency_ms, style)
        self.logprobs = logprobs
        self.first_s = self.last_s = None

    def reply(self, path: bytes, buffer, start: int, stop: int) -> bytes:
        now = time.monotonic()
        self.first_s = now if self.first_s is None else self.first_s
        # The reply leaves after the latency; that is the end of the window it keeps busy.
        self.last_s = now + self.latency_s
        self.count += 1
        if not path.rstrip(b"/").endswith(b"/chat/completions"):
            return _http_response(404, b'{"error": {"message": "no route", "type": "not_found"}}')
        content = self._action(buffer, start, stop)
        prompt_tokens = 100 + 85 * buffer.count(self.PREFIX, start, stop)
        _, ids, logprobs = fake_tokens(content)
        self.answered += 1
        choice = {"index": 0, "message": {"role": "assistant", "content": content},
                  "finish_reason": "stop"}
        if self.logprobs:
            choice["logprobs"] = {"content": [{"token": f"token_id:{i}", "logprob": lp,
                                               "top_logprobs": []}
                                              for i, lp in zip(ids, logprobs)]}
        payload = {"id": f"chatcmpl-fast{self.count}", "object": "chat.completion",
                   "created": int(time.time()), "model": "fake", "choices": [choice],
                   "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(ids),
                             "total_tokens": prompt_tokens + len(ids)}}
        return _http_response(200, json.dumps(payload).encode())


def _serve_fast_rollouts(args) -> int:
    """``--fast --rollout-starts N``: the rollout benchmark's server (module docstring)."""
    from visgym.bridges.rollouts import plan_groups

    starts = plan_groups(args.register, args.rollout_starts, args.rollout_seed)
    entries = solver_entries(starts, None if args.max_long_side <= 0 else args.max_long_side)
    server = FastTokenSolverServer(entries, latency_ms=args.latency_ms, style=args.style,
                                   logprobs=args.logprobs)

    async def run():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await server.serve(args.port, args.port_file, stop)

    asyncio.run(run())
    print(json.dumps({"requests": server.count, "first_s": server.first_s,
                      "last_s": server.last_s}), file=sys.stderr)
    return 0


def _http_response(status: int, payload: bytes) -> bytes:
    reason = {200: b"OK", 404: b"Not Found"}[status]
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (status, reason, len(payload)) + payload)


def _write_port(port_file: str, port: int) -> None:
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, port_file)


def _serve_fast(args, entries) -> int:
    server = FastSolverServer(entries, latency_ms=args.latency_ms, style=args.style)

    async def run():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await server.serve(args.port, args.port_file, stop)

    asyncio.run(run())
    print(f"fake_openai --fast: {server.count} requests, {server.answered} answered",
          file=sys.stderr)
    return 0


# ------------------------------------------------------------------------------- standalone
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="fake OpenAI-compatible chat server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", required=True, help="the bound port is written here")
    parser.add_argument("--policy", choices=["solver", "garbage"], default="solver")
    parser.add_argument("--style", choices=STYLES, default="plain")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--register", action="append", default=[],
                        help="env id (task/split) whose shipped split the solver learns")
    parser.add_argument("--max-long-side", type=int, default=336, help="0: no resizing")
    parser.add_argument("--text", action="store_true", help="also register ASCII frames")
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--fault-seed", type=int, default=0)
    parser.add_argument("--fault-kinds", default="429,500,503,drop,malformed")
    parser.add_argument("--no-record", action="store_true", help="keep no request bodies")
    parser.add_argument("--logprobs", action="store_true",
                        help="answer requests asking for logprobs with vLLM's token format")
    parser.add_argument("--fast", action="store_true",
                        help="benchmark server: solver policy from the raw body, asyncio, no "
                        "JSON parsing, no image decoding, no recording, no faults")
    parser.add_argument("--rollout-starts", type=int, default=0, metavar="N",
                        help="with --fast: register the first N rollout starts of each "
                        "--register env id (visgym rollouts' seed rule) instead of its split")
    parser.add_argument("--rollout-seed", type=int, default=0,
                        help="the base seed of --rollout-starts")
    args = parser.parse_args(argv)
    if args.fast and (args.policy != "solver" or args.text or args.fault_rate):
        parser.error("--fast serves the solver policy only (no --text, no --fault-rate)")
    if args.rollout_starts:
        if not args.fast or args.rollout_starts < 0:
            parser.error("--rollout-starts: needs --fast and a positive count")
        return _serve_fast_rollouts(args)
    if args.fast:
        from visgym.bridges.splits import load_split

        entries = []
        for env_id in args.register:
            task, split = env_id.split("/")
            entries += solver_entries(load_split(task, split),
                                      None if args.max_long_side <= 0 else args.max_long_side)
        return _serve_fast(args, entries)

    server = FakeOpenAI(policy=args.policy, style=args.style, latency_ms=args.latency_ms,
                        fault_rate=args.fault_rate, fault_seed=args.fault_seed,
                        fault_kinds=args.fault_kinds.split(","), port=args.port,
                        record=not args.no_record, retry_after="1", logprobs=args.logprobs)
    if args.register:
        from visgym.bridges.splits import load_split

        for env_id in args.register:
            task, split = env_id.split("/")
            server.register_episodes(load_split(task, split),
                                     None if args.max_long_side <= 0 else args.max_long_side,
                                     text=args.text)
    done = threading.Event()

    def stop(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.start()
    _write_port(args.port_file, server.port)
    while not done.wait(0.2):
        pass
    server.stop()
    print(f"fake_openai: {server.count} requests, {server.answered} answered", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
