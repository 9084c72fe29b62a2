"""The proxy a request goes through, as Go's net/http decides it from the same variables (so one NO_PROXY serves
client-go, cloudflared and kflare alike): the cases of `golang.org/x/net/http/httpproxy`'s own tests that a
controller meets, and what httpx's reading of NO_PROXY gets wrong (CIDR blocks)."""

from __future__ import annotations

import pytest

from app.cloudflare.http import CloudflareHTTP, HttpConfig
from app.proxy import ProxyEnvironment, redacted

PROXY = "http://proxy.internal:3128"


def via(no_proxy: str, url: str, **env: str) -> str | None:
    return ProxyEnvironment(https=env.get("https", PROXY), http=env.get("http", PROXY), no=no_proxy).proxy_for(url)


@pytest.mark.parametrize(
    ("no_proxy", "url", "proxied"),
    [
        ("", "https://api.cloudflare.com/client/v4", True),
        ("", "https://localhost:6443", False),  # loopback is never proxied
        ("", "https://127.0.0.1:6443", False),
        ("", "https://[::1]:6443", False),
        ("*", "https://api.cloudflare.com", False),
        ("10.96.0.0/12", "https://10.96.0.1:443", False),  # the kubernetes Service's address, by CIDR
        ("10.96.0.0/12", "https://10.112.0.1:443", True),
        ("10.96.0.1", "https://10.96.0.1", False),
        ("10.96.0.1:6443", "https://10.96.0.1:443", True),  # an entry's port must match
        ("10.96.0.1:443", "https://10.96.0.1", False),  # https's default port
        ("fd00::/8", "https://[fd00::1]:443", False),
        ("cloudflare.com", "https://api.cloudflare.com", False),  # a name and every name below it
        ("cloudflare.com", "https://cloudflare.com", False),
        (".cloudflare.com", "https://cloudflare.com", True),  # a leading dot: only the names below
        (".cloudflare.com", "https://api.cloudflare.com", False),
        ("*.cloudflare.com", "https://api.cloudflare.com", False),
        ("*.cloudflare.com", "https://cloudflare.com", True),
        ("notcloudflare.com", "https://api.cloudflare.com", True),  # a suffix of the name, not of a label
        ("svc, .cluster.local ,kubernetes.default.svc", "https://kubernetes.default.svc", False),
        ("api.cloudflare.com:8443", "https://api.cloudflare.com", True),
        ("API.Cloudflare.com", "https://api.cloudflare.com", False),  # names are compared case-insensitively
        ("10.0.0.0/8", "https://internal.example", True),  # a name is not resolved to match a block
    ],
)
def test_no_proxy_as_go_reads_it(no_proxy: str, url: str, proxied: bool) -> None:
    assert (via(no_proxy, url) is not None) is proxied


def test_the_scheme_picks_the_variable_and_a_bare_address_is_http() -> None:
    assert via("", "https://api.cloudflare.com", https="proxy.internal:3128") == "http://proxy.internal:3128"
    assert via("", "http://emulator.internal:8787", http="", https=PROXY) is None
    assert ProxyEnvironment.from_environ({"HTTPS_PROXY": "http://a:1", "https_proxy": "http://b:2"}).https == (
        "http://a:1"
    )
    assert ProxyEnvironment.from_environ({"https_proxy": "http://b:2", "NO_PROXY": "x"}) == ProxyEnvironment(
        https="http://b:2", no="x"
    )


def test_a_proxy_kflare_cannot_speak_to_is_refused_by_name_without_its_credentials() -> None:
    with pytest.raises(ValueError, match="HTTPS_PROXY") as refused:
        via("", "https://api.cloudflare.com", https="socks5://user:hunter2@proxy:1080")
    assert "hunter2" not in str(refused.value)
    with pytest.raises(ValueError, match="HTTPS_PROXY"):
        CloudflareHTTP(HttpConfig(proxies=ProxyEnvironment(https="socks5://proxy:1080")))


def test_credentials_are_never_shown() -> None:
    assert redacted("http://user:hunter2@proxy.internal:3128") == "http://proxy.internal:3128"
    assert redacted("http://proxy.internal:3128") == "http://proxy.internal:3128"
