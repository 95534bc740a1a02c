"""How GLMClient's requests leave it: one sender, chosen when the client is built.

- :class:`DirectSend`: our own ``AsyncClient``'s requests go straight to its transport
  (docs/design/0702).
- :class:`ClientSend`: a borrowed client's requests go through its ``send``, as it was given.

Both build the POST of a body to a URL and send it, streamed or read whole; neither retries,
translates errors or takes slots (the client does, once, for both).
"""

from __future__ import annotations

import logging
from typing import Protocol

import httpx

__all__ = ["ClientSend", "DirectSend", "Sender"]

_httpx_logger = logging.getLogger("httpx")


class Sender(Protocol):
    """What :class:`~generic_framework.wire.client.GLMClient` sends its requests through."""

    def request(self, url: str, body: bytes) -> httpx.Request:
        """The POST of ``body`` to ``url``, with the client's headers and timeouts."""
        ...

    async def send(self, request: httpx.Request, *, stream: bool) -> httpx.Response:
        """Send ``request``; read the body unless ``stream``."""
        ...


class ClientSend:
    """Through ``AsyncClient.send``: every layer of the client, exactly as httpx runs them.

    ``headers`` go with every request (a borrowed client does not carry ours); the URL is given
    as text, since a borrowed client may be httpx-like (httpx2) with URL types of its own.
    """

    __slots__ = ("_client", "_headers")

    def __init__(self, client: httpx.AsyncClient, headers: dict[str, str] | None) -> None:
        self._client = client
        self._headers = headers

    def request(self, url: str, body: bytes) -> httpx.Request:
        """``AsyncClient.build_request`` of the POST."""
        return self._client.build_request("POST", url, content=body, headers=self._headers)

    async def send(self, request: httpx.Request, *, stream: bool) -> httpx.Response:
        """``AsyncClient.send``."""
        return await self._client.send(request, stream=stream)


class DirectSend:
    """What ``AsyncClient.send`` does for our own client, without its per-request layers.

    ``AsyncClient.send`` merges headers, cookies and parameters, parses the URL again, walks
    the auth and redirect generators and extracts cookies through ``urllib`` wrappers: about a
    fifth of a request's client CPU, none of which our own client needs (no auth flow, no
    redirects followed, no parameters). This builds the request from the client's merged
    headers and timeouts and hands it to the transport through its public interface
    (``handle_async_request``), then does what ``send`` does after: read the body (unless
    streaming), log the exchange on the ``httpx`` logger as httpx does, and keep cookies.

    What ``send`` would do stays exact: a cookie a response set goes into the client's jar and
    from the jar onto every later request, and a closed client raises httpx's own error.
    """

    __slots__ = ("_client", "_headers", "_timeout", "_transport", "_urls")

    def __init__(self, client: httpx.AsyncClient, transport: httpx.AsyncBaseTransport) -> None:
        self._client = client
        self._transport = transport
        self._headers = client.headers
        self._timeout = client.timeout.as_dict()
        # Parsed once per URL: httpx checks a URL string character by character every time.
        self._urls: dict[str, httpx.URL] = {}

    def request(self, url: str, body: bytes) -> httpx.Request:
        """The request ``AsyncClient.build_request`` would make for this POST."""
        parsed = self._urls.get(url)
        if parsed is None:
            parsed = self._urls[url] = httpx.URL(url)
        return httpx.Request(
            "POST",
            parsed,
            headers=self._headers,
            cookies=self._client.cookies,  # an empty jar adds nothing
            content=body,
            extensions={"timeout": self._timeout},
        )

    async def send(self, request: httpx.Request, *, stream: bool) -> httpx.Response:
        """Send through the transport; read the body unless ``stream``."""
        if self._client.is_closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        try:
            response = await self._transport.handle_async_request(request)
        except httpx.RequestError as exc:
            exc.request = request  # as httpx's request_context does
            raise
        response.request = request
        if "set-cookie" in response.headers:
            self._client.cookies.extract_cookies(response)
        if _httpx_logger.isEnabledFor(logging.INFO):
            _httpx_logger.info(
                'HTTP Request: %s %s "%s %d %s"',
                request.method,
                request.url,
                response.http_version,
                response.status_code,
                response.reason_phrase,
            )
        if not stream:
            try:
                await response.aread()
            except BaseException:
                await response.aclose()
                raise
        return response
