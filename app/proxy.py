"""Which HTTP proxy a request goes through, decided from the environment as Go's net/http decides it (the
`golang.org/x/net/http/httpproxy` package client-go and cloudflared use), so that one set of variables serves every
component of a cluster alike.

- `HTTPS_PROXY` (or `https_proxy`) for `https` URLs, `HTTP_PROXY` (or `http_proxy`) for `http` ones; the upper-case
  name wins. A value without a scheme is taken as `http://`; `https://` proxies are spoken to over TLS. Other
  schemes (`socks5`) are refused when the client is made, with the variable named.
- `localhost` and loopback addresses never go through a proxy.
- `NO_PROXY` (or `no_proxy`), comma-separated: `*` (nothing is proxied), an IP address or a CIDR block (the request's
  host must be an address in it: a name is not resolved for this), or a host name, which matches itself and every
  name below it (`example.com`: `example.com` and `api.example.com`); with a leading `.` (or `*.`) only the names
  below it. Any entry but a CIDR block may carry a port (`host:port`, `[v6]:port`), then only that port matches.

The proxy's address may carry credentials (`http://user:password@proxy:3128`): they are sent as
`Proxy-Authorization` and never shown (`redacted`).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

DEFAULT_PORTS: Final = {"http": "80", "https": "443"}
PROXY_SCHEMES: Final = ("http", "https")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _env(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name.upper()) or environ.get(name.lower()) or ""


def _split_port(entry: str) -> tuple[str, str]:
    """`host:port` or `[v6]:port` into host and port ("" when none); a bare IPv6 address has no port."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest.removeprefix(":")
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, port
    return entry, ""


def _address(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def redacted(url: str) -> str:
    """A proxy's URL without its credentials, to be shown."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    shown = f"[{host}]" if ":" in host else host
    return parts._replace(netloc=shown + (f":{parts.port}" if parts.port else "")).geturl()


@dataclass(frozen=True)
class ProxyEnvironment:
    """The proxy variables, as read once (`from_environ`)."""

    http: str = ""
    https: str = ""
    no: str = ""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> ProxyEnvironment:
        env = os.environ if environ is None else environ
        return cls(_env(env, "http_proxy"), _env(env, "https_proxy"), _env(env, "no_proxy"))

    def proxy_for(self, url: str) -> str | None:
        """The proxy a request to `url` goes through (its URL, credentials included), or None for a direct one.
        Raises ValueError for a proxy variable kflare cannot use, naming it (never its value's credentials)."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS:
            return None
        value, name = (self.https, "HTTPS_PROXY") if scheme == "https" else (self.http, "HTTP_PROXY")
        if not value:
            return None
        host = (parts.hostname or "").lower().rstrip(".")
        port = str(parts.port) if parts.port else DEFAULT_PORTS[scheme]
        if not self._use_proxy(host, port):
            return None
        proxy = value if "://" in value else f"http://{value}"
        proxy_scheme = urlsplit(proxy).scheme.lower()
        if proxy_scheme not in PROXY_SCHEMES or not urlsplit(proxy).hostname:
            raise ValueError(
                f"{name} is {redacted(proxy)!r}: kflare speaks to HTTP proxies over http:// or https:// only"
            )
        return proxy

    def _use_proxy(self, host: str, port: str) -> bool:
        if host == "localhost":
            return False
        ip = _address(host)
        if ip is not None and ip.is_loopback:
            return False
        for raw in self.no.split(","):
            entry = raw.strip().lower()
            if not entry:
                continue
            if entry == "*":
                return False
            if "/" in entry:
                try:
                    network: Network = ipaddress.ip_network(entry, strict=False)
                except ValueError:
                    continue
                if ip is not None and ip.version == network.version and ip in network:
                    return False
                continue
            entry_host, entry_port = _split_port(entry)
            if entry_port and entry_port != port:
                continue
            entry_ip = _address(entry_host)
            if entry_ip is not None:
                if ip == entry_ip:
                    return False
                continue
            suffix = entry_host.removeprefix("*").rstrip(".")
            if not suffix:
                continue
            if suffix.startswith("."):
                if host.endswith(suffix):
                    return False
            elif host == suffix or host.endswith("." + suffix):
                return False
        return True
