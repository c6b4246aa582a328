"""A lean HTTP/1.1 transport for the official ``openai`` client, written directly on asyncio.

At 64 requests in flight the SDK's default stack (httpx -> httpcore -> anyio -> h11) cost more
client CPU per request than the rest of the evaluation loop: httpcore scans every pooled
connection on each request, anyio wraps each socket operation, h11 validates every header.
``LeanTransport`` is an ``httpx.AsyncBaseTransport`` (httpx2 under openai >= 3) that the SDK uses
through ``httpx.AsyncClient(transport=LeanTransport())``; everything above the transport (URL
and header building, auth, status errors, content decoding, the SDK's error mapping) is
unchanged. What it does:

- One ``asyncio.Protocol`` per connection; idle keep-alive connections are kept per (scheme,
  host, port) in a LIFO list, so taking one is a pop, not a scan. Idle connections expire after
  ``keepalive_expiry_s`` (below the 5 s keep-alive timeout of uvicorn/vLLM, node and others).
- Responses framed by Content-Length, chunked transfer coding or the end of the connection;
  ``Connection: close`` and HTTP/1.0 servers (keep-alive only when they say so) close the
  connection after the response. The body is read whole before the response is returned (the
  agent never streams). Malformed framing fails at once with RemoteProtocolError: a head over
  ``MAX_HEAD_BYTES`` (however it arrives), more than ``MAX_INTERIM_RESPONSES`` 1xx heads, a
  Content-Length that is not a plain decimal, a chunk size that is not plain hex (a negative
  size was once taken as a chunk, and the read then waited out its timeout).
- Bounded bodies: at most ``max_response_bytes`` (16 MiB by default) are read; a larger
  Content-Length is refused before its body is read, a chunked or close-delimited body when
  it passes the limit (``ResponseTooLarge``). ``Content-Encoding`` is decoded above the
  transport by ``limit_response_hook``, which bounds the decoded size too (a gzip bomb of
  300 MB once took the process to 1.4 GB) and works on the SDK's httpx stack as well.
- https through asyncio's ssl with a verifying context: ``SSL_CERT_FILE``/``SSL_CERT_DIR`` when
  set (as httpx honours them), else certifi's bundle when importable, else the system default.
- The request's timeouts (``request.extensions["timeout"]``: connect, read per wait for data,
  write per wait for the send buffer to drain) raise httpx's ConnectTimeout, ReadTimeout and
  WriteTimeout; refused connections and TLS failures raise ConnectError; a server that closes the
  connection without a complete response raises RemoteProtocolError, a reset ReadError, exactly
  the classes the SDK maps to APITimeoutError / APIConnectionError.
- The keep-alive race. A server that closed an idle connection is caught before sending: the
  event loop has seen the close, or the socket is readable (a zero-timeout ``select``, the
  check httpcore makes), and the connection is dropped from the list. If a reused connection
  fails anyway, the request is sent once more on a new connection only when not a byte of the
  response arrived and the failure shows that the server did not take the request: the
  connection was reset (a closed socket answers data with a reset) or the request could not be
  written. A clean close after the request went out may mean the server received it and failed
  (a crash, or a deliberate drop): that raises RemoteProtocolError, as httpx does, and the
  agent's own retry decides; a partial response is never resent.

Not supported: proxies (``HTTP(S)_PROXY``/``ALL_PROXY``; ``proxy_applies`` below lets the agent send
such endpoints through httpx), HTTP/2, streaming response bodies, 100-continue.
"""
from __future__ import annotations

import asyncio
import collections
import os
import select
import ssl
import urllib.request
from urllib.parse import urlsplit

# The HTTP library under the installed openai SDK (httpx2 in openai 3), and the response bounds
# both stacks share; re-exported here for the agent and the tests.
from .response_limits import (ACCEPT_ENCODING, DEFAULT_MAX_RESPONSE_BYTES,  # noqa: F401
                              ResponseTooLarge, httpx, limit_response_hook)

MAX_HEAD_BYTES = 65536
MAX_INTERIM_RESPONSES = 16
DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_REDIRECTS = 5                       # httpx follows 20 by default: 21 requests for a loop
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")


def proxy_applies(url: str) -> bool:
    """Whether a proxy environment variable (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, any case; minus
    NO_PROXY) applies to this endpoint, as httpx would route it."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return not urllib.request.proxy_bypass_environment(host, proxies)


def default_ssl_context() -> ssl.SSLContext:
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if cafile or capath:
        return ssl.create_default_context(cafile=cafile or None, capath=capath or None)
    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


class _Refused(Exception):
    """The server did not take the request (reset, or never written): safe to send again."""

    def __init__(self, error: Exception):
        self.error = error


def _expire(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(False)


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: received bytes accumulate in ``buffer``; a coroutine waits for
    more with ``wait`` (False on timeout)."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 max_body: int = DEFAULT_MAX_RESPONSE_BYTES):
        self.loop = loop
        self.max_body = max_body
        self.transport = None
        self.buffer = bytearray()
        self.closed = False          # the peer closed (EOF) or the connection was lost
        self.error: Exception | None = None
        self.write_paused = False
        self.idle_since = 0.0
        self._waiter: asyncio.Future | None = None

    # -- protocol callbacks ------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        self.fd = sock.fileno() if sock is not None else -1

    def input_pending(self) -> bool:
        """Whether the socket has something to read that the event loop has not seen yet: on an
        idle connection, the server's close (or data it should not have sent)."""
        if self.fd < 0:
            return False
        try:
            return bool(select.select([self.fd], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self):
        self.closed = True
        self._wake()
        return False   # close our side too

    def connection_lost(self, exc) -> None:
        self.closed = True
        if exc is not None and self.error is None:
            self.error = exc
        self.write_paused = False
        self._wake()

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake()

    # -- waiting -----------------------------------------------------------------------------
    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    async def wait(self, timeout: float | None) -> bool:
        waiter = self._waiter = self.loop.create_future()
        timer = None if timeout is None else self.loop.call_later(timeout, _expire, waiter)
        try:
            return await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # -- one exchange ------------------------------------------------------------------------
    async def send(self, head: bytes, body: bytes, timeout: float | None, request) -> None:
        if self.closed:
            raise _Refused(httpx.WriteError("the connection was closed", request=request))
        if len(body) < 65536:
            self.transport.write(head + body)   # one segment for the usual small request
        else:
            self.transport.write(head)
            self.transport.write(body)
        while self.write_paused and not self.closed:
            if not await self.wait(timeout):
                raise httpx.WriteTimeout("timed out sending the request", request=request)

    def _lost(self, request, started: bool) -> Exception:
        """The exception for a connection that ended before the response was complete."""
        if isinstance(self.error, OSError):
            error = httpx.ReadError(f"the connection was reset ({self.error})", request=request)
            return error if started else _Refused(error)
        if started:
            return httpx.RemoteProtocolError("peer closed connection without sending complete "
                                             "message body", request=request)
        return httpx.RemoteProtocolError("Server disconnected without sending a response.",
                                         request=request)

    async def receive(self, method: bytes, timeout: float | None, request):
        """(status, reason, version, headers, body, keep_alive) of the next response."""
        buffer = self.buffer
        scanned = interim = 0
        while True:
            end = buffer.find(b"\r\n\r\n", scanned, scanned + MAX_HEAD_BYTES + 4)
            if end > MAX_HEAD_BYTES:
                end = -1   # a complete head, but too long (it arrived in one piece)
            if end >= 0:
                status, reason, version, headers = _parse_head(bytes(buffer[:end]), request)
                del buffer[:end + 4]
                if 100 <= status < 200 and status != 101:
                    # An interim response (100 Continue, 103): the real one follows.
                    interim += 1
                    if interim > MAX_INTERIM_RESPONSES:
                        raise httpx.RemoteProtocolError(
                            f"more than {MAX_INTERIM_RESPONSES} interim (1xx) responses",
                            request=request)
                    scanned = 0
                    continue
                break
            if len(buffer) > MAX_HEAD_BYTES:
                raise httpx.RemoteProtocolError("response headers too long", request=request)
            if self.closed:
                raise self._lost(request, started=bool(buffer))
            scanned = max(0, len(buffer) - 3)
            if not await self.wait(timeout):
                raise httpx.ReadTimeout("timed out waiting for the response", request=request)

        connection = b""
        length = transfer = None
        for name, value in headers:
            lname = name.lower()
            if lname == b"content-length":
                if length is not None and value.strip() != length:
                    raise httpx.RemoteProtocolError("conflicting Content-Length headers",
                                                    request=request)
                length = value.strip()
            elif lname == b"transfer-encoding":
                transfer = value.strip().lower()
            elif lname == b"connection":
                connection += value.lower() + b","
        keep_alive = (b"close" not in connection if version == b"HTTP/1.1"
                      else b"keep-alive" in connection)
        if method == b"HEAD" or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif transfer is not None:
            if not transfer.endswith(b"chunked"):   # e.g. "gzip" alone: delimited by the close
                body, keep_alive = await self._read_to_close(timeout, request), False
            else:
                body = await self._read_chunked(timeout, request)
        elif length is not None:
            if not length.isdigit() or len(length) > 19:
                raise httpx.RemoteProtocolError(f"bad Content-Length {length[:40]!r}",
                                                request=request)
            if int(length) > self.max_body:
                raise ResponseTooLarge(f"the response body of {int(length)} bytes is over the "
                                       f"limit of {self.max_body} bytes", request=request)
            body = await self._read_exactly(int(length), timeout, request)
        else:
            body, keep_alive = await self._read_to_close(timeout, request), False
        if self.buffer or self.closed:   # unexpected bytes, or the server hung up
            keep_alive = False
        return status, reason, version, headers, body, keep_alive

    async def _fill(self, needed: int, timeout: float | None, request) -> None:
        while len(self.buffer) < needed:
            if self.closed:
                raise self._lost(request, started=True)
            if not await self.wait(timeout):
                raise httpx.ReadTimeout("timed out reading the response", request=request)

    async def _read_exactly(self, n: int, timeout: float | None, request) -> bytes:
        await self._fill(n, timeout, request)
        body = bytes(self.buffer[:n])
        del self.buffer[:n]
        return body

    async def _read_line(self, timeout: float | None, request) -> bytes:
        scanned = 0
        while True:
            end = self.buffer.find(b"\r\n", scanned)
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[:end + 2]
                return line
            if len(self.buffer) > MAX_HEAD_BYTES:
                raise httpx.RemoteProtocolError("chunk header too long", request=request)
            scanned = max(0, len(self.buffer) - 1)
            await self._fill(len(self.buffer) + 1, timeout, request)

    async def _read_chunked(self, timeout: float | None, request) -> bytes:
        parts = []
        total = 0   # body and framing bytes, so that endless chunk headers or trailers end too
        while True:
            line = await self._read_line(timeout, request)
            total += len(line) + 2
            size_text = line.split(b";", 1)[0].strip(b" \t")
            # Plain hex digits only: int() would also take "-5", "+5", "0x5" and "5_0".
            if not size_text or len(size_text) > 16 or not _HEX_DIGITS.issuperset(size_text):
                raise httpx.RemoteProtocolError(f"bad chunk size {size_text[:40]!r}",
                                                request=request)
            size = int(size_text, 16)
            if size == 0:
                while True:   # trailers, up to a blank line
                    trailer = await self._read_line(timeout, request)
                    total += len(trailer) + 2
                    self._check_size(total, request)
                    if not trailer:
                        return b"".join(parts)
            total += size + 2
            self._check_size(total, request)
            parts.append(await self._read_exactly(size, timeout, request))
            if await self._read_exactly(2, timeout, request) != b"\r\n":
                raise httpx.RemoteProtocolError("chunk not followed by CRLF", request=request)

    def _check_size(self, size: int, request) -> None:
        if size > self.max_body:
            raise ResponseTooLarge(f"the response body is over the limit of {self.max_body} "
                                   "bytes", request=request)

    async def _read_to_close(self, timeout: float | None, request) -> bytes:
        while not self.closed:
            self._check_size(len(self.buffer), request)
            if not await self.wait(timeout):
                raise httpx.ReadTimeout("timed out reading the response", request=request)
        self._check_size(len(self.buffer), request)
        if isinstance(self.error, OSError):
            raise self._lost(request, started=True)
        body = bytes(self.buffer)
        self.buffer.clear()
        return body


def _parse_head(head: bytes, request):
    """(status, reason, version, [(name, value)]) of a response head."""
    lines = head.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise httpx.RemoteProtocolError(f"malformed status line {lines[0][:80]!r}",
                                        request=request)
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}",
                                            request=request)
        headers.append((name, value.strip()))
    return int(code), reason, version, headers


class LeanTransport(httpx.AsyncBaseTransport):
    """See the module docstring. ``max_idle`` caps the idle connections kept per host;
    ``max_response_bytes`` the body read per response."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None, max_idle: int = 256,
                 keepalive_expiry_s: float = 4.0,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES):
        if max_response_bytes < 1:
            raise ValueError(f"max_response_bytes: must be at least 1, got {max_response_bytes}")
        self.max_response_bytes = int(max_response_bytes)
        self._ssl_context = ssl_context
        self.max_idle = max_idle
        self.keepalive_expiry_s = keepalive_expiry_s
        self._idle: dict[tuple, collections.deque] = {}
        self._open: set[_Connection] = set()
        self.connections_opened = 0

    def _ssl(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = default_ssl_context()
        return self._ssl_context

    async def _connect(self, key: tuple, timeout: float | None, request) -> _Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        tls = self._ssl() if scheme == "https" else None
        try:
            # asyncio.timeout, not wait_for, which on Python 3.11 can drop a cancellation.
            async with asyncio.timeout(timeout):
                _, conn = await loop.create_connection(
                    lambda: _Connection(loop, self.max_response_bytes), host, port, ssl=tls,
                    server_hostname=host if tls else None)
        except asyncio.TimeoutError:
            raise httpx.ConnectTimeout(f"timed out connecting to {host}:{port}",
                                       request=request) from None
        except (OSError, ssl.SSLError) as e:   # refused, unresolvable, certificate rejected
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {e}",
                                     request=request) from None
        self._open.add(conn)
        self.connections_opened += 1
        return conn

    def _take_idle(self, key: tuple) -> _Connection | None:
        idle = self._idle.get(key)
        loop = asyncio.get_running_loop()
        now = loop.time()
        while idle:
            conn = idle.pop()
            if now - conn.idle_since > self.keepalive_expiry_s:
                # The newest has expired, so have all below it.
                self._discard(conn)
                while idle:
                    self._discard(idle.pop())
                return None
            if conn.closed or conn.buffer or conn.loop is not loop or conn.input_pending():
                self._discard(conn)
                continue
            return conn
        return None

    def _discard(self, conn: _Connection) -> None:
        self._open.discard(conn)
        if conn.loop.is_closed():   # a connection left over from an earlier asyncio.run
            conn.closed = True
            return
        conn.close()

    def _release(self, key: tuple, conn: _Connection) -> None:
        idle = self._idle.get(key)
        if idle is None:
            idle = self._idle[key] = collections.deque()
        conn.idle_since = conn.loop.time()
        idle.append(conn)
        if len(idle) > self.max_idle:
            self._discard(idle.popleft())

    async def handle_async_request(self, request):
        url = request.url
        scheme = url.scheme
        if scheme not in DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(f"the lean transport speaks http and https, not "
                                            f"{scheme!r}", request=request)
        key = (scheme, url.raw_host.decode("ascii"), url.port or DEFAULT_PORTS[scheme])
        timeouts = request.extensions.get("timeout") or {}
        head, body = await _serialize(request)
        method = request.method.encode("ascii")
        for attempt in (1, 2):
            conn = self._take_idle(key) if attempt == 1 else None
            reused = conn is not None
            if conn is None:
                conn = await self._connect(key, timeouts.get("connect"), request)
            try:
                await conn.send(head, body, timeouts.get("write"), request)
                status, reason, version, headers, content, keep_alive = await conn.receive(
                    method, timeouts.get("read"), request)
            except _Refused as e:
                self._discard(conn)
                if reused:
                    continue
                raise e.error from None
            except BaseException:   # timeouts, protocol errors, cancellation: state unknown
                self._discard(conn)
                raise
            if keep_alive and not _asks_close(request):
                self._release(key, conn)
            else:
                self._discard(conn)
            return httpx.Response(status, headers=headers, stream=httpx.ByteStream(content),
                                  extensions={"http_version": version,
                                              "reason_phrase": reason})
        raise AssertionError("unreachable")   # pragma: no cover

    async def aclose(self) -> None:
        for conn in list(self._open):
            self._discard(conn)
        self._open.clear()
        self._idle.clear()
        await asyncio.sleep(0)   # let the transports run connection_lost


def _asks_close(request) -> bool:
    value = request.headers.get("connection")
    return value is not None and "close" in value.lower()


async def _serialize(request) -> tuple[bytes, bytes]:
    """The request head and body as bytes. httpx has already set Host, Content-Length (or
    Transfer-Encoding: chunked for a streamed body) and the other headers."""
    try:
        body = request.content
    except httpx.RequestNotRead:
        body = await request.aread()
    raw = request.headers.raw
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
    lines += [name + b": " + value for name, value in raw]
    head = b"\r\n".join(lines) + b"\r\n\r\n"
    # A CR or LF inside a name or value would split the header (request smuggling).
    if head.count(b"\n") != len(lines) + 1 or head.count(b"\r") != len(lines) + 1:
        raise httpx.LocalProtocolError("a request header contains CR or LF", request=request)
    if any(name.lower() == b"transfer-encoding" for name, _ in raw) and body:
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    elif any(name.lower() == b"transfer-encoding" for name, _ in raw):
        body = b"0\r\n\r\n"
    return head, body
