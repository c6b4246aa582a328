"""The lean HTTP/1.1 transport under the openai client (bridges/http_transport.py).

Against small raw asyncio servers scripted per test: response framing (Content-Length, chunked
with extensions and trailers, read to the close), gzip/deflate decoded by httpx, keep-alive reuse,
``Connection: close`` and HTTP/1.0 servers, the keep-alive race (a reused connection the server
had closed is resent once only when the server cannot have taken the request), timeouts and
refused connections raising the httpx exceptions the SDK maps, https with a verifying context,
and the choice of transport (auto: httpx when a proxy variable applies). Malformed framing fails
at once (negative or non-hex chunk sizes, a head over the cap however it arrives, endless 1xx
heads, bad Content-Length); bodies are bounded as received and as decoded (a gzip bomb), on the
lean transport and, through ``limit_response_hook``, on httpx's own; redirects are capped. The
fault behaviour through the whole evaluation loop is in test_eval_faults.py and
test_fault_injection.py, run over both transports.
"""
import asyncio
import gzip
import json
import shutil
import socket
import ssl
import struct
import subprocess
import time
import tracemalloc
import zlib

import pytest

from visgym.bridges.agents import Episode, OpenAIAgent, Turn
from visgym.bridges.http_transport import (ACCEPT_ENCODING, LeanTransport, ResponseTooLarge,
                                           httpx, limit_response_hook, proxy_applies)

KEY_ENV = "VISGYM_TEST_KEY"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


class RawServer:
    """A scripted HTTP server: ``respond(request_number, head, body)`` gives the raw bytes to
    answer with, ``(bytes, "close")`` (answer, then close without having said so), "close"
    (close after reading the request), "reset" (close with a TCP reset) or None (never
    answer). Counts connections and requests."""

    def __init__(self, respond, ssl_context=None):
        self.respond = respond
        self.ssl_context = ssl_context
        self.connections = 0
        self.requests = []
        self.closed_by_client = 0
        self.closed_by_server = 0

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.ssl_context)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def _handle(self, reader, writer):
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    self.closed_by_client += 1
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                self.requests.append((head, body))
                answer = self.respond(len(self.requests), head, body)
                if answer is None:
                    await asyncio.sleep(3600)
                if answer == "reset":
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                if answer == "close":
                    writer.close()
                    return
                then_close = isinstance(answer, tuple)
                if then_close:
                    answer = answer[0]
                writer.write(answer)
                await writer.drain()
                lowered = answer.lower()
                if then_close or b"connection: close" in lowered or (
                        answer.startswith(b"HTTP/1.0") and b"keep-alive" not in lowered):
                    writer.close()
                    self.closed_by_server += 1
                    return
        except (ConnectionError, asyncio.CancelledError):
            return


def ok(body: bytes = b'{"ok": true}', *headers: str, version: str = "HTTP/1.1") -> bytes:
    head = [f"{version} 200 OK", "Content-Type: application/json",
            f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(*chunks: bytes) -> bytes:
    out = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    for n, chunk in enumerate(chunks):
        out += b"%x%s\r\n%s\r\n" % (len(chunk), b";ext=1" if n == 0 else b"", chunk)
    return out + b"0\r\nX-Trailer: yes\r\n\r\n"


def run(coro):
    return asyncio.run(coro)


async def get_all(port, n=1, timeout=5.0, transport=None, scheme="http", host="127.0.0.1"):
    """``n`` POSTs in turn through one client over the lean transport."""
    transport = transport or LeanTransport()
    async with httpx.AsyncClient(transport=transport, timeout=timeout) as client:
        return [await client.post(f"{scheme}://{host}:{port}/v1/chat/completions",
                                  content=b'{"q": %d}' % i) for i in range(n)]


# ------------------------------------------------------------------------------- framing
def test_content_length_responses_reuse_one_connection():
    async def main():
        async with RawServer(lambda n, h, b: ok(b'{"n": %d}' % n)) as server:
            responses = await get_all(server.port, n=3)
        return server, responses

    server, responses = run(main())
    assert [r.json() for r in responses] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert server.connections == 1
    head, body = server.requests[1]
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"\r\nhost: 127.0.0.1:" in head.lower() and body == b'{"q": 1}'


def test_chunked_response_with_extensions_and_trailers():
    async def main():
        parts = (b'{"a": ', b'"' + b"x" * 3000 + b'", ', b'"n": 1}')
        async with RawServer(lambda n, h, b: chunked(*parts)) as server:
            responses = await get_all(server.port, n=2)
        return server, responses

    server, responses = run(main())
    assert [r.json() for r in responses] == [{"a": "x" * 3000, "n": 1}] * 2
    assert server.connections == 1   # the connection is kept after a chunked response


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_responses_are_decoded(encoding):
    payload = json.dumps({"choices": [{"message": {"content": "('move', 0)" * 50}}]}).encode()
    packed = gzip.compress(payload) if encoding == "gzip" else zlib.compress(payload)

    async def main():
        async with RawServer(lambda n, h, b: ok(packed, f"Content-Encoding: {encoding}")) as server:
            (response,) = await get_all(server.port)
        return server, response

    server, response = run(main())
    assert response.content == payload
    assert b"accept-encoding: gzip, deflate" in server.requests[0][0].lower()


def test_gzip_chunked_response_is_decoded():
    payload = b'{"text": "' + b"abc" * 5000 + b'"}'
    packed = gzip.compress(payload)
    response_bytes = chunked(packed[:100], packed[100:]).replace(
        b"Transfer-Encoding", b"Content-Encoding: gzip\r\nTransfer-Encoding")

    async def main():
        async with RawServer(lambda n, h, b: response_bytes) as server:
            (response,) = await get_all(server.port)
        return response

    assert run(main()).content == payload


def test_connection_close_opens_a_new_connection():
    async def main():
        async with RawServer(lambda n, h, b: ok(b'{"n": %d}' % n, "Connection: close")) as server:
            responses = await get_all(server.port, n=3)
        return server, responses

    server, responses = run(main())
    assert [r.json()["n"] for r in responses] == [1, 2, 3]
    assert server.connections == 3


def test_http10_server_body_read_to_the_close():
    raw = b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"old": true}'

    async def main():
        async with RawServer(lambda n, h, b: raw) as server:
            responses = await get_all(server.port, n=2)
        return server, responses

    server, responses = run(main())
    assert [r.json() for r in responses] == [{"old": True}] * 2
    assert responses[0].http_version == "HTTP/1.0"
    assert server.connections == 2


def test_http10_keep_alive_is_honoured():
    async def main():
        async with RawServer(lambda n, h, b: ok(b"{}", "Connection: keep-alive",
                                                version="HTTP/1.0")) as server:
            await get_all(server.port, n=3)
        return server

    assert run(main()).connections == 1


def test_interim_100_response_is_skipped():
    async def main():
        interim = b"HTTP/1.1 100 Continue\r\n\r\n"
        async with RawServer(lambda n, h, b: interim + ok(b"[1]")) as server:
            (response,) = await get_all(server.port)
        return response

    assert run(main()).json() == [1]


def test_status_and_headers_reach_the_client():
    raw = (b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 2\r\n"
           b"X-Multi: a\r\nX-Multi: b\r\n\r\n{}")

    async def main():
        async with RawServer(lambda n, h, b: raw) as server:
            (response,) = await get_all(server.port)
        return response

    response = run(main())
    assert response.status_code == 429 and response.reason_phrase == "Too Many Requests"
    assert response.headers["retry-after"] == "7"
    assert response.headers.get_list("x-multi") == ["a", "b"]


def test_malformed_status_line_is_a_protocol_error():
    async def main():
        async with RawServer(lambda n, h, b: b"garbage\r\n\r\n") as server:
            await get_all(server.port)

    with pytest.raises(httpx.RemoteProtocolError):
        run(main())


# ------------------------------------------------------------------ dropped connections
def test_idle_connection_closed_by_the_server_is_not_reused():
    # The server closes after each response without saying so; the close is seen while idle.
    async def main():
        async with RawServer(lambda n, h, b: (ok(b'{"n": %d}' % n), "close")) as server:
            transport = LeanTransport()
            async with httpx.AsyncClient(transport=transport, timeout=5) as client:
                url = f"http://127.0.0.1:{server.port}/"
                first = await client.post(url, content=b"1")
                await asyncio.sleep(0.05)
                second = await client.post(url, content=b"2")
        return server, transport, first, second

    server, transport, first, second = run(main())
    assert (first.json(), second.json()) == ({"n": 1}, {"n": 2})
    assert server.connections == 2 and len(server.requests) == 2
    assert transport.connections_opened == 2


def test_close_not_yet_seen_by_the_event_loop_is_caught_before_sending():
    # The server's FIN is in the socket but no loop iteration has run since: the readability
    # check drops the connection instead of sending into it.
    async def main():
        async with RawServer(lambda n, h, b: (ok(b'{"n": %d}' % n), "close")) as server:
            transport = LeanTransport()
            async with httpx.AsyncClient(transport=transport, timeout=5) as client:
                url = f"http://127.0.0.1:{server.port}/"
                first = await client.post(url, content=b"1")
                while not server.closed_by_server:
                    await asyncio.sleep(0.001)
                time.sleep(0.05)   # the FIN arrives; the event loop does not run
                second = await client.post(url, content=b"2")
        return server, transport, first, second

    server, transport, first, second = run(main())
    assert (first.json(), second.json()) == ({"n": 1}, {"n": 2})
    assert len(server.requests) == 2 and transport.connections_opened == 2


def test_reset_on_a_reused_connection_is_resent_once():
    # The keep-alive race: the server reset the reused connection without taking the request.
    async def main():
        async with RawServer(lambda n, h, b: "reset" if n == 2 else ok(b'{"n": %d}' % n)) as server:
            responses = await get_all(server.port, n=2)
        return server, responses

    server, responses = run(main())
    assert [r.json()["n"] for r in responses] == [1, 3]
    assert len(server.requests) == 3 and server.connections == 2


def test_reset_on_a_new_connection_is_a_read_error():
    async def main():
        async with RawServer(lambda n, h, b: "reset") as server:
            try:
                await get_all(server.port)
            finally:
                assert len(server.requests) == 1

    with pytest.raises(httpx.ReadError):
        run(main())


def test_clean_close_after_the_request_is_not_resent():
    # The server may have taken the request (the fake server's "drop" fault): no resend.
    async def main():
        async with RawServer(lambda n, h, b: "close" if n == 2 else ok()) as server:
            try:
                await get_all(server.port, n=2)
            finally:
                assert len(server.requests) == 2

    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        run(main())


def test_partial_response_is_never_resent():
    cut = b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{"cut'

    async def main():
        async with RawServer(lambda n, h, b: ok() if n == 1 else cut) as server:
            try:
                await get_all(server.port, n=2)
            finally:
                assert len(server.requests) == 2

    with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
        run(main())


# --------------------------------------------------------- malformed framing, fails at once
def chunked_raw(*lines: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + b"".join(l + b"\r\n" for l in lines))


def fails_fast(answer, error=httpx.RemoteProtocolError, match=None, **kwargs):
    """The lean transport raises ``error`` for this answer well before its 5 s read timeout."""
    async def main():
        async with RawServer(answer) as server:
            await get_all(server.port, timeout=httpx.Timeout(5.0), **kwargs)

    start = time.perf_counter()
    with pytest.raises(error, match=match):
        run(main())
    assert time.perf_counter() - start < 2.0


@pytest.mark.parametrize("size", [b"-5", b"+5", b"0x5", b"5_0", b"", b" ", b"1" * 17])
def test_chunk_size_that_is_not_plain_hex_is_rejected_at_once(size):
    # int(b"-5", 16) is -5: the transport once took it as a chunk, then waited out the timeout.
    fails_fast(lambda n, h, b: chunked_raw(size, b'{"a": 1}', b"0", b""), match="bad chunk size")


def test_complete_head_over_the_cap_is_rejected_even_in_one_piece():
    head = b"HTTP/1.1 200 OK\r\nX-Padding: " + b"p" * 100_000 + b"\r\nContent-Length: 2\r\n\r\n{}"
    fails_fast(lambda n, h, b: head, match="headers too long")


def test_endless_interim_responses_are_rejected():
    fails_fast(lambda n, h, b: b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" * 40 + ok(),
               match="interim")


@pytest.mark.parametrize("length", [b"12abc", b"-1", b"1 2", b"9" * 30])
def test_bad_content_length_is_rejected(length):
    fails_fast(lambda n, h, b: b"HTTP/1.1 200 OK\r\nContent-Length: " + length + b"\r\n\r\n{}",
               match="Content-Length")


# ------------------------------------------------------------------------ bounded bodies
def test_declared_body_over_the_limit_is_refused_before_it_is_read():
    # The server announces 1 GB and sends nothing more: refused at the head, not after a wait.
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n{"
    fails_fast(lambda n, h, b: answer, ResponseTooLarge, "1000000000 bytes is over the limit",
               transport=LeanTransport(max_response_bytes=1 << 20))


def test_chunked_body_over_the_limit_is_cut():
    piece = b"%x\r\n%s" % (64 << 10, b"x" * (64 << 10))
    fails_fast(lambda n, h, b: chunked_raw(*[piece] * 40, b"0", b""), ResponseTooLarge,
               transport=LeanTransport(max_response_bytes=1 << 20))


def test_endless_trailers_count_towards_the_limit():
    trailers = [b"X-T: " + b"t" * 1000] * 2000
    fails_fast(lambda n, h, b: chunked_raw(b"2", b"{}", b"0", *trailers, b""), ResponseTooLarge,
               transport=LeanTransport(max_response_bytes=1 << 20))


def test_close_delimited_body_over_the_limit_is_cut():
    answer = b"HTTP/1.0 200 OK\r\n\r\n" + b"x" * (3 << 20)
    fails_fast(lambda n, h, b: (answer, "close"), ResponseTooLarge,
               transport=LeanTransport(max_response_bytes=1 << 20))


def test_body_at_the_limit_is_read():
    body = b'"' + b"x" * ((1 << 20) - 2) + b'"'

    async def main():
        async with RawServer(lambda n, h, b: ok(body)) as server:
            (response,) = await get_all(server.port,
                                        transport=LeanTransport(max_response_bytes=1 << 20))
        return response

    assert run(main()).content == body


def bomb(decoded_bytes: int) -> bytes:
    return gzip.compress(b"\0" * decoded_bytes, compresslevel=9)


async def post_with_hook(port, limit, transport=None):
    async with httpx.AsyncClient(transport=transport, timeout=5.0,
                                 headers={"Accept-Encoding": ACCEPT_ENCODING},
                                 event_hooks={"response": [limit_response_hook(limit)]}) as client:
        return await client.post(f"http://127.0.0.1:{port}/v1/chat/completions", content=b"{}")


@pytest.mark.parametrize("stack", ["lean", "httpx"])
def test_gzip_bomb_is_cut_at_the_decoded_limit_with_little_memory(stack):
    packed = bomb(64 << 20)   # 64 MB of zeros in ~64 KB

    async def main():
        async with RawServer(lambda n, h, b: ok(packed, "Content-Encoding: gzip")) as server:
            tracemalloc.start()
            try:
                with pytest.raises(ResponseTooLarge, match="decoded"):
                    await post_with_hook(server.port, 2 << 20,
                                         LeanTransport() if stack == "lean" else None)
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

    peak = run(main())
    assert peak < 12 << 20, f"peak {peak / 2**20:.1f} MiB while decoding a 64 MB bomb"


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "deflate-raw", "gzip, gzip"])
def test_the_hook_decodes_what_it_asks_for(encoding):
    payload = json.dumps({"choices": [{"message": {"content": "('move', 0)" * 500}}]}).encode()
    if encoding == "deflate-raw":
        packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        packed, header = packer.compress(payload) + packer.flush(), "deflate"
    elif encoding == "deflate":
        packed, header = zlib.compress(payload), "deflate"
    elif encoding == "gzip, gzip":
        packed, header = gzip.compress(gzip.compress(payload)), encoding
    else:
        packed, header = gzip.compress(payload), "gzip"

    async def main():
        async with RawServer(lambda n, h, b: ok(packed, f"Content-Encoding: {header}")) as server:
            response = await post_with_hook(server.port, 1 << 20, LeanTransport())
        return server, response

    server, response = run(main())
    assert response.content == payload and "content-encoding" not in response.headers
    assert b"accept-encoding: gzip, deflate\r\n" in server.requests[0][0].lower()


def test_the_hook_refuses_an_encoding_it_did_not_ask_for():
    async def main():
        brotli = ok(b"\x0b\x02\x80{}\x03", "Content-Encoding: br")
        async with RawServer(lambda n, h, b: brotli) as server:
            await post_with_hook(server.port, 1 << 20, LeanTransport())

    with pytest.raises(httpx.DecodingError, match="'br'"):
        run(main())


def test_the_hook_refuses_a_declared_length_over_the_limit_on_httpx():
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n{"

    async def main():
        async with RawServer(lambda n, h, b: answer) as server:
            await post_with_hook(server.port, 1 << 20)

    start = time.perf_counter()
    with pytest.raises(ResponseTooLarge):
        run(main())
    assert time.perf_counter() - start < 2.0


def test_body_limit_must_be_positive():
    with pytest.raises(ValueError, match="max_response_bytes"):
        LeanTransport(max_response_bytes=0)
    with pytest.raises(ValueError, match="max_response_bytes"):
        limit_response_hook(0)


# ------------------------------------------------------------------------------ timeouts
def test_read_timeout():
    async def main():
        async with RawServer(lambda n, h, b: None) as server:
            await get_all(server.port, timeout=httpx.Timeout(5.0, read=0.2))

    with pytest.raises(httpx.ReadTimeout):
        run(main())


def test_connect_timeout(monkeypatch):
    async def main():
        loop = asyncio.get_running_loop()

        async def slow(*args, **kwargs):
            await asyncio.sleep(10)

        monkeypatch.setattr(loop, "create_connection", slow)
        await get_all(1, timeout=httpx.Timeout(5.0, connect=0.1))

    with pytest.raises(httpx.ConnectTimeout):
        run(main())


def test_refused_connection_is_a_connect_error():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(httpx.ConnectError):
        run(get_all(port))


def test_write_timeout_when_the_server_does_not_read():
    async def main():
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        try:
            async with httpx.AsyncClient(transport=LeanTransport(),
                                         timeout=httpx.Timeout(5.0, write=0.2)) as client:
                await client.post(f"http://127.0.0.1:{listener.getsockname()[1]}/",
                                  content=b"x" * (64 << 20))
        finally:
            listener.close()

    with pytest.raises(httpx.WriteTimeout):
        run(main())


def test_aclose_closes_idle_connections():
    async def main():
        async with RawServer(lambda n, h, b: ok()) as server:
            await get_all(server.port, n=2)
            await asyncio.sleep(0.05)
        return server

    server = run(main())
    assert server.connections == 1 and server.closed_by_client == 1


# --------------------------------------------------------------------------------- https
@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def _tls_server_context(certificate):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*map(str, certificate))
    return context


def test_https_with_a_trusted_certificate(certificate):
    async def main():
        async with RawServer(lambda n, h, b: ok(b'{"tls": %d}' % n),
                             ssl_context=_tls_server_context(certificate)) as server:
            client_context = ssl.create_default_context(cafile=str(certificate[0]))
            return await get_all(server.port, n=2, scheme="https", host="localhost",
                                 transport=LeanTransport(ssl_context=client_context)), server

    responses, server = run(main())
    assert [r.json() for r in responses] == [{"tls": 1}, {"tls": 2}]
    assert server.connections == 1


def test_https_rejects_an_untrusted_certificate(certificate):
    async def main():
        async with RawServer(lambda n, h, b: ok(),
                             ssl_context=_tls_server_context(certificate)) as server:
            await get_all(server.port, scheme="https", host="localhost")

    with pytest.raises(httpx.ConnectError, match="certificate"):
        run(main())


# ----------------------------------------------------------------- through the openai SDK
def test_openai_agent_gets_a_decoded_reply_through_the_lean_transport(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "('move', 1)"},
                          "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 5, "completion_tokens": 3}}

    async def main():
        async with RawServer(lambda n, h, b: ok(gzip.compress(json.dumps(reply).encode()),
                                                "Content-Encoding: gzip")) as server:
            agent = OpenAIAgent(model="m", base_url=f"http://127.0.0.1:{server.port}/v1",
                                api_key_env=KEY_ENV, http_transport="lean")
            assert isinstance(agent.client._client._transport, LeanTransport)
            data = await agent._create(agent.client, [{"role": "user", "content": "hi"}], {}, {})
            await agent.aclose()
        return data, server

    data, server = run(main())
    assert data == reply
    head, body = server.requests[0]
    assert b"authorization: bearer sk-test" in head.lower()
    assert json.loads(body) == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    # The SDK's headers win over the httpx client's of the same name, as the SDK's own request
    # path merges them: one Accept, one User-Agent, no header twice.
    lines = head.lower().split(b"\r\n")[1:]
    names = [line.split(b":")[0] for line in lines if line]
    assert len(names) == len(set(names))
    assert b"accept: application/json" in lines and b"content-length: %d" % len(body) in lines
    assert any(line.startswith(b"user-agent: asyncopenai/python") for line in lines)


@pytest.mark.parametrize("transport", ["lean", "httpx"])
def test_redirect_loop_costs_at_most_six_requests_and_is_not_retried(monkeypatch, transport):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    loop = b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /v1/chat/completions\r\n" \
        b"Content-Length: 0\r\n\r\n"

    async def main():
        async with RawServer(lambda n, h, b: loop) as server:
            agent = OpenAIAgent(model="m", base_url=f"http://127.0.0.1:{server.port}/v1",
                                api_key_env=KEY_ENV, http_transport=transport, max_attempts=4,
                                backoff_s=0.01)
            reply = await agent.act(Turn(Episode("k", "maze_2d/easy", 0, 0), 0,
                                         [{"role": "user", "content": "hi"}], "hi"))
            await agent.aclose()
        return reply, server

    reply, server = run(main())
    # 1 request + 5 redirects (httpx follows 20 by default: 21 per attempt, each attempt retried).
    assert len(server.requests) == 6
    assert reply.flag == "error" and reply.attempts == 1 and reply.transient is False
    assert reply.error_kind == "redirects" and "redirects" in reply.error.lower()


@pytest.mark.parametrize("transport", ["lean", "httpx"])
def test_agent_reply_body_over_the_limit_is_a_transient_error(monkeypatch, transport):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    big = {"choices": [{"message": {"content": "x" * (2 << 20)}}]}
    answer = ok(json.dumps(big).encode())

    async def main():
        async with RawServer(lambda n, h, b: answer) as server:
            agent = OpenAIAgent(model="m", base_url=f"http://127.0.0.1:{server.port}/v1",
                                api_key_env=KEY_ENV, http_transport=transport, max_attempts=2,
                                backoff_s=0.01, max_response_bytes=1 << 20)
            reply = await agent.act(Turn(Episode("k", "maze_2d/easy", 0, 0), 0,
                                         [{"role": "user", "content": "hi"}], "hi"))
            await agent.aclose()
        return reply, server

    reply, server = run(main())
    assert len(server.requests) == 2
    assert reply.flag == "error" and reply.attempts == 2 and reply.transient is True
    assert reply.error_kind == "too_large" and "over the limit" in reply.error


# ------------------------------------------------------------------- choosing a transport
@pytest.fixture
def no_proxy_env(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv(KEY_ENV, "sk-test")
    return monkeypatch


def agent_transport(url, choice="auto"):
    return OpenAIAgent(model="m", base_url=url, api_key_env=KEY_ENV,
                       http_transport=choice).describe()["http_transport"]


def test_auto_is_lean_without_a_proxy(no_proxy_env):
    assert agent_transport("https://api.example.com/v1") == "lean"


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy", "ALL_PROXY"])
def test_auto_is_httpx_when_a_proxy_applies(no_proxy_env, variable):
    no_proxy_env.setenv(variable, "http://proxy.example:3128")
    assert agent_transport("https://api.example.com/v1") == "httpx"


def test_proxy_for_another_scheme_or_in_no_proxy_does_not_apply(no_proxy_env):
    no_proxy_env.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert agent_transport("https://api.example.com/v1") == "lean"
    assert agent_transport("http://api.example.com/v1") == "httpx"
    no_proxy_env.setenv("NO_PROXY", "api.example.com")
    assert agent_transport("http://api.example.com/v1") == "lean"
    assert not proxy_applies("http://api.example.com:8000/v1")


def test_explicit_transport_choice_and_its_record(no_proxy_env):
    no_proxy_env.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    agent = OpenAIAgent(model="m", base_url="https://api.example.com/v1", api_key_env=KEY_ENV,
                        http_transport="lean")
    assert agent.describe()["http_transport"] == "lean"
    assert agent.describe()["client_shards"] == 1
    assert agent_transport("https://api.example.com/v1", "httpx") == "httpx"
    with pytest.raises(ValueError, match="--http-transport"):
        agent_transport("https://api.example.com/v1", "curl")
