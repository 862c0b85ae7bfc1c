"""Who may talk to ``voice serve``: an optional shared token and allowed origins.

Checked at the HTTP upgrade, before a session (and its LLM context) exists, so a
stranger costs the server one refused request. The token may come as an
``Authorization: Bearer`` header (scripts, Prometheus) or a ``token`` query
parameter (a browser's WebSocket cannot set headers; the page passes on the
``?token=`` it was opened with). Browsers always send ``Origin``: a page from
another site may not open a socket to this one unless ``--allow-origin`` names
it, so a malicious page cannot use a visitor's local assistant (or microphone
stream) behind their back. Clients that are not browsers send no ``Origin``.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from websockets.http11 import Request

TOKEN_ENV = "VOICE_SERVE_TOKEN"


@dataclass(frozen=True)
class Refusal:
    status: HTTPStatus
    reason: str  # a stable code, also counted in the metrics
    text: str  # what the caller should do


@dataclass
class Access:
    token: str = ""
    origins: list[str] = field(default_factory=list)  # extra allowed origins; "*" = any

    @classmethod
    def from_options(cls, token: str | None, origins: list[str] | None) -> Access:
        """``--token`` wins over the environment variable (which keeps it out of ``ps``)."""
        return cls(token or os.environ.get(TOKEN_ENV, ""), [o.rstrip("/") for o in origins or []])

    def check(self, request: Request, need_origin_check: bool = True) -> Refusal | None:
        """None if the request may go on, else why not."""
        if self.token and not hmac.compare_digest(
            presented_token(request).encode(), self.token.encode()
        ):
            return Refusal(
                HTTPStatus.UNAUTHORIZED,
                "bad_token",
                "A token is required: open the page as /?token=TOKEN, or send "
                "'Authorization: Bearer TOKEN'.",
            )
        origin = request.headers.get("Origin")
        if (
            need_origin_check
            and origin is not None
            and not self.origin_allowed(origin, request.headers.get("Host", ""))
        ):
            return Refusal(
                HTTPStatus.FORBIDDEN,
                "bad_origin",
                f"Connections from pages at {origin} are not allowed. Start voice serve "
                f"with --allow-origin {origin} if that page is yours.",
            )
        return None

    def origin_allowed(self, origin: str, host: str) -> bool:
        origin = origin.rstrip("/")
        if "*" in self.origins or origin in self.origins:
            return True
        # The page this server itself served: same host and port as the request, and
        # a host that is this machine. A name the attacker controls can be made to
        # resolve here (DNS rebinding), and then Origin and Host agree; a token, or
        # --allow-origin naming the page, is needed for anything but loopback.
        same = bool(host) and urlsplit(origin).netloc.lower() == host.lower()
        return same and (bool(self.token) or is_loopback(urlsplit(origin).hostname or ""))


def presented_token(request: Request) -> str:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    query = urlsplit(request.path).query
    return parse_qs(query).get("token", [""])[0]


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    host = host.strip("[]")  # an IPv6 literal as it appears in a URL
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: assume it can be reached from elsewhere


def exposure_warning(host: str, token: str, tls: bool) -> str | None:
    """What to tell an operator who binds beyond this machine, or None."""
    if is_loopback(host):
        return None
    problems = []
    if not token:
        problems.append(f"no token (set --token or {TOKEN_ENV})")
    if not tls:
        problems.append(
            "no TLS (browsers only give microphones to https pages or localhost: use "
            "--certfile/--keyfile or a reverse proxy, see the README)"
        )
    if not problems:
        return None
    return f"warning: voice serve listens on {host or 'all addresses'} with " + (
        " and ".join(problems) + "."
    )
