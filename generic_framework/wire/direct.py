"""Sending our own client's requests straight to its transport (docs/design/0702)."""

from __future__ import annotations

import logging

import httpx

__all__ = ["DirectSend"]

_httpx_logger = logging.getLogger("httpx")


class DirectSend:
    """What ``AsyncClient.send`` does for our own client, without its per-request layers.

    ``AsyncClient.send`` merges headers, cookies and parameters, parses the URL again, walks
    the auth and redirect generators and extracts cookies through ``urllib`` wrappers: about a
    fifth of a request's client CPU, none of which our own client needs (no auth flow, no
    redirects followed, no parameters). This builds the request from the client's merged
    headers and timeouts and hands it to the transport through its public interface
    (``handle_async_request``), then does what ``send`` does after: read the body (unless
    streaming), log the exchange on the ``httpx`` logger as httpx does, and keep cookies.

    Cookies stay exact: once a response sets one, or the jar is not empty, every later request
    goes through ``AsyncClient.send`` again (``usable`` is False). A closed client too, so it
    raises httpx's own error.
    """

    __slots__ = ("_client", "_headers", "_timeout", "_transport", "usable")

    def __init__(self, client: httpx.AsyncClient, transport: httpx.AsyncBaseTransport) -> None:
        self._client = client
        self._transport = transport
        self._headers = client.headers
        self._timeout = client.timeout.as_dict()
        self.usable = True
        """False once a response set a cookie or the client was closed (then
        ``AsyncClient.send`` handles every request). The client is private to its
        :class:`GLMClient`, so nothing else can put a cookie into its jar."""

    def request(self, url: httpx.URL, body: bytes) -> httpx.Request:
        """The request ``AsyncClient.build_request`` would make for this POST."""
        return httpx.Request(
            "POST", url, headers=self._headers, content=body, extensions={"timeout": self._timeout}
        )

    async def send(self, request: httpx.Request, *, stream: bool) -> httpx.Response:
        """Send through the transport; read the body unless ``stream``."""
        try:
            response = await self._transport.handle_async_request(request)
        except httpx.RequestError as exc:
            exc.request = request  # as httpx's request_context does
            raise
        response.request = request
        if "set-cookie" in response.headers:
            self._client.cookies.extract_cookies(response)
            self.usable = False
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
