"""Bounded responses: what reading one HTTP response may hold, on either HTTP stack.

The agent reads untrusted bodies; a body's size is bounded as received and as decoded (a gzip
bomb of 300 MB once took the process to 1.4 GB). ``limit_response_hook`` is an httpx response
hook that does it for the SDK's own httpx stack and above ``LeanTransport``
(bridges/http_transport.py), which bounds the raw bytes it reads itself.
"""
from __future__ import annotations

try:  # the HTTP library under the installed openai SDK (httpx, or httpx2 in openai 3)
    import httpx2 as httpx
except ImportError:  # pragma: no cover - older openai releases
    import httpx

DEFAULT_MAX_RESPONSE_BYTES = 16 << 20   # raw and decoded; a chat completion is a few KB
ACCEPT_ENCODING = "gzip, deflate"       # what limit_response_hook decodes
_DECODE_PIECE = 1 << 20


class ResponseTooLarge(httpx.DecodingError):
    """A response body (as sent, or decoded) over the configured limit."""


def limit_response_hook(max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES, raw_bounded: bool = False):
    """An httpx ``event_hooks["response"]`` hook that bounds what reading a response may hold:
    at most ``max_bytes`` as received and as decoded. It takes over the decoding of
    ``Content-Encoding`` (gzip, deflate; anything else is a DecodingError: the client asks
    for ``ACCEPT_ENCODING`` only), decompressing in bounded pieces, so a small compressed body
    cannot inflate past the limit. Over the limit, ``ResponseTooLarge`` is raised where the body
    is read (httpx reads it inside ``send``, so the SDK reports it as a connection error).
    ``raw_bounded``: the transport bounds the bytes it reads itself (``LeanTransport``), so a
    body without an encoding is left as it is (a few microseconds less per response)."""
    if max_bytes < 1:
        raise ValueError(f"max_response_bytes: must be at least 1, got {max_bytes}")

    async def hook(response) -> None:
        length = response.headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > max_bytes:
            raise ResponseTooLarge(f"the response body of {int(length)} bytes is over the "
                                   f"limit of {max_bytes} bytes", request=response.request)
        codings = [c.strip().lower() for c in
                   response.headers.get_list("content-encoding", split_commas=True)]
        codings = [c for c in codings if c and c != "identity"]
        for coding in codings:
            if coding not in ("gzip", "x-gzip", "deflate"):
                raise httpx.DecodingError(f"the response has content encoding {coding!r}, "
                                          f"which was not asked for", request=response.request)
        if len(codings) > 2:
            raise httpx.DecodingError(f"{len(codings)} content encodings in a row",
                                      request=response.request)
        if codings:
            del response.headers["content-encoding"]
            if "content-length" in response.headers:
                del response.headers["content-length"]
        elif raw_bounded:
            return
        response.stream = _LimitedStream(response.stream, codings, max_bytes, response.request)

    return hook


class _LimitedStream(httpx.AsyncByteStream):
    """A response stream read through bounded decoders, counting bytes in and out."""

    def __init__(self, inner, codings: list, max_bytes: int, request):
        self._inner = inner
        self._codings = codings
        self._max = max_bytes
        self._request = request

    def _too_large(self, what: str) -> ResponseTooLarge:
        return ResponseTooLarge(f"the response body{what} is over the limit of {self._max} "
                                "bytes", request=self._request)

    async def __aiter__(self):
        decoders = [_Inflater(c) for c in reversed(self._codings)]
        received = produced = 0
        async for chunk in self._inner:
            received += len(chunk)
            if received > self._max:
                raise self._too_large("")
            pieces = [chunk]
            for decoder in decoders:
                budget = self._max - produced
                pieces = [out for piece in pieces for out in decoder.feed(piece, budget)]
            produced = self._tally(pieces, produced)
            for piece in filter(None, pieces):
                yield piece
        pieces = []
        for decoder in decoders:   # what the decoders still hold, through the ones after them
            pieces = [out for piece in pieces for out in decoder.feed(piece, self._max - produced)]
            pieces += decoder.flush(self._max - produced)
        self._tally(pieces, produced)
        for piece in filter(None, pieces):
            yield piece

    def _tally(self, pieces, produced: int) -> int:
        """Bytes decoded so far after ``pieces``; too many is an error before any is passed on."""
        produced += sum(len(piece) for piece in pieces)
        if produced > self._max:
            raise self._too_large(" (decoded)")
        return produced

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Inflater:
    """One gzip or deflate decoder that never produces more than it is allowed to at once."""

    def __init__(self, coding: str):
        import zlib

        self._zlib = zlib
        self._deflate = coding == "deflate"
        self._first = True
        wbits = zlib.MAX_WBITS | 16 if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._d = zlib.decompressobj(wbits)

    def feed(self, data: bytes, budget: int) -> list:
        """The output for ``data``; more than ``budget`` bytes raise (as ResponseTooLarge, by
        the caller, which sees one byte past the budget)."""
        out = []
        while True:
            cap = max(1, min(_DECODE_PIECE, budget + 1))
            try:
                piece = self._d.decompress(data, cap)
            except self._zlib.error as e:
                if self._deflate and self._first:   # deflate sent raw, without the zlib header
                    self._first = False
                    self._d = self._zlib.decompressobj(-self._zlib.MAX_WBITS)
                    continue
                raise httpx.DecodingError(f"the response does not decode ({e})") from None
            self._first = False
            out.append(piece)
            budget -= len(piece)
            if budget < 0:
                return out
            data = self._d.unconsumed_tail
            if not data and len(piece) < cap:
                return out

    def flush(self, budget: int) -> list:
        try:
            return self.feed(b"", budget) + [self._d.flush()]
        except self._zlib.error as e:
            raise httpx.DecodingError(f"the response does not decode ({e})") from None
