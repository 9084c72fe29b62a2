"""The controller reads simple kubeconfigs itself and leaves the rest (exec plugins, auth providers) to the library."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from app.controlplane import CertificateAuthority
from app.kube.client import _simple_kubeconfig


def kubeconfig(path: Path, user: dict[str, Any], cluster: dict[str, Any]) -> Path:
    path.write_text(
        json.dumps(
            {
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                "clusters": [{"name": "k", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
            }
        )
    )
    return path


async def test_token_and_certificate_authority_data(tmp_path: Path) -> None:
    ca = CertificateAuthority.create("test")
    cluster = {"server": "https://127.0.0.1:6443", "certificate-authority-data": base64.b64encode(ca.pem).decode()}
    client = _simple_kubeconfig(kubeconfig(tmp_path / "kc", {"token": "abc"}, cluster))
    assert client is not None
    assert client.host == "https://127.0.0.1:6443"
    assert await client._auth() == {"Authorization": "Bearer abc"}
    await client.close()


async def test_client_certificate_files_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    ca = CertificateAuthority.create("test")
    key, cert = ca.issue("admin", groups=["system:masters"])
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    (tmp_path / "admin.crt").write_bytes(cert)
    (tmp_path / "admin.key").write_bytes(key)
    user = {"client-certificate": "admin.crt", "client-key": "admin.key"}
    client = _simple_kubeconfig(
        kubeconfig(tmp_path / "kc", user, {"server": "https://h:1", "certificate-authority": "ca.crt"})
    )
    assert client is not None
    assert await client._auth() == {}
    await client.close()


@pytest.mark.parametrize(
    "user",
    [
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "aws"}},
        {"auth-provider": {"name": "oidc"}},
    ],
)
def test_plugins_are_left_to_the_library(tmp_path: Path, user: dict[str, Any]) -> None:
    assert _simple_kubeconfig(kubeconfig(tmp_path / "kc", user, {"server": "https://h:1"})) is None


def test_a_missing_context_is_named(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_text(json.dumps({"current-context": "nope", "contexts": []}))
    with pytest.raises(ValueError, match="no context named 'nope'"):
        _simple_kubeconfig(path)
