"""Scenario 4's tools: a seeded mutator of manifests (no property-testing library: a seed reproduces a run), the
manifests it starts from (every kind's sample and everything in examples/), and `kflare run` serving its admission
webhooks to the test API server, registered for the test's namespace only."""

from __future__ import annotations

import contextlib
import copy
import json
import random
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from prometheus_client.parser import text_string_to_metric_families

from app.api import KINDS
from app.controlplane import ControlPlane, free_port
from app.kube.client import KubeClient, KubeError
from tests.fixtures.controller import GROUP, PLURALS, VERSION, ControllerProcess
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import TEST_LABEL
from tests.helpers import eventually
from tests.unit.webhooks.reviews import SAMPLES as REVIEW_SAMPLES
from tests.unit.webhooks.reviews import sample
from webhooks.configuration import configuration, url_client_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OBJECT_LABEL = "kflare-hostile-test"
KFLARE_KINDS = {model.info.kind for model in KINDS}

FIELD_PATH = re.compile(r"(?<![\w.])(spec|metadata|apiVersion|kind|request)(\.[^\s:]+|\[[^\]]*\])*\s*:")
"""A field path as the API server and the webhook print it before a reason: `spec.ttl: ...`, `metadata.name: ...`,
`spec.ingress[0].service: ...`."""


def base_manifests() -> list[dict[str, Any]]:
    """A valid manifest of every kind (the webhook tests' samples) and every kflare object in examples/."""
    out = [sample(kind) for kind in REVIEW_SAMPLES]
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if (
                isinstance(doc, dict)
                and doc.get("kind") in KFLARE_KINDS
                and doc.get("apiVersion", "").startswith(GROUP)
            ):
                out.append(doc)
    return out


# ---- the mutator ---------------------------------------------------------------------------------------------

WEIRD_STRINGS = (
    "",
    " ",
    "\x00",
    "nul\x00byte",
    "\x1b[31mred\x1b[0m",
    "\u202egnp.exe",
    "\ufeffbom",
    "\u200b",
    "e\u0301",
    "💥" * 64,
    "\n\r\t\v\f",
    "../../etc/passwd",
    "${jndi:ldap://x}",
    "'; DROP TABLE zones; --",
    "<script>alert(1)</script>",
    "%00%0a",
    "a" * 254 + ".com",
    "xn--nxasmq6b.com",
    "*.example.com",
    "-leading.example.com",
    "UPPER.Example.COM",
    "192.0.2.1",
    "::1",
    "300.300.300.300",
    "true",
    "null",
    "0x10",
    "1e309",
)
NUMBERS = (0, -1, 1, 2, 29, 30, 31, 86400, 86401, 65535, 65536, 2**31, 2**31 - 1, -(2**31), 2**53 + 1, 2**63, -(2**63))
FLOATS = (0.5, -0.0, 1e308, -1e308, 3.14159)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _paths(inner, (*prefix, index))


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    _get(obj, path[:-1])[path[-1]] = value


def _nested(rng: random.Random, depth: int) -> Any:
    leaf: Any = rng.choice(["x", 1, None, True])
    for _ in range(depth):
        leaf = {"a": leaf} if rng.random() < 0.5 else [leaf]
    return leaf


def _huge_string(rng: random.Random) -> str:
    size = rng.choice((300, 4_096, 70_000, 600_000))
    return rng.choice("ab\u00e9\u4e2d💥") * size


def _other_type(rng: random.Random, value: Any) -> Any:
    choices: list[Any] = [None, True, 7, -3.5, "text", [], {}, ["a", 1], {"k": "v"}]
    return rng.choice([c for c in choices if type(c) is not type(value)] or choices)


class Mutator:
    """Mutations of a manifest, reproducible from `seed`. `protected` paths (prefixes) are left alone."""

    def __init__(self, seed: int, bases: Sequence[dict[str, Any]] = ()) -> None:
        self.rng = random.Random(seed)
        self.pool: dict[tuple[str, str], list[Any]] = {}
        """Values of each kind's top-level spec fields across the bases: borrowed, they keep to the schema but may
        break a cross-field rule, which only the webhook checks."""
        for base in bases:
            for key, value in (base.get("spec") or {}).items():
                self.pool.setdefault((str(base.get("kind")), key), []).append(value)

    def mutate(self, manifest: dict[str, Any], *, spec_only: bool = False) -> tuple[dict[str, Any], list[str]]:
        obj = copy.deepcopy(manifest)
        done: list[str] = []
        kind = str(manifest.get("kind", ""))
        if isinstance(obj.get("spec"), dict) and self.rng.random() < 0.3:
            keys = sorted({k for (of, k) in self.pool if of == kind} - set(obj["spec"])) + sorted(obj["spec"])
            if keys:
                key = self.rng.choice(keys)
                borrowed = self.pool.get((kind, key)) or [obj["spec"].get(key)]
                obj["spec"][key] = copy.deepcopy(self.rng.choice(borrowed))
                done.append(f"borrow spec.{key}")
                if self.rng.random() < 0.5:
                    return obj, done
        for _ in range(self.rng.choice((1, 1, 1, 2, 3))):
            done.append(self._one(obj, spec_only=spec_only))
        return obj, done

    def _one(self, obj: dict[str, Any], *, spec_only: bool) -> str:
        rng = self.rng
        if spec_only or rng.random() < 0.85:
            candidates = [("spec", *p) for p in _paths(obj.get("spec"))] if "spec" in obj else [()]
        else:
            candidates = [p for p in _paths(obj) if p[:2] != ("metadata", "labels") and p[:1] != ("metadata",)]
            candidates += [("metadata", "name")] if "name" in obj.get("metadata", {}) else []
        path = rng.choice(candidates)
        where = ".".join(str(p) for p in path) or "<root>"
        current = _get(obj, path) if path else obj
        op = rng.choice(
            ("delete", "type", "huge", "weird", "nest", "enum", "number", "unknown", "list", "delete", "weird")
        )
        if not path:
            op = "unknown"
        if op == "delete":
            del _get(obj, path[:-1])[path[-1]]
        elif op == "type":
            _set(obj, path, _other_type(rng, current))
        elif op == "huge":
            _set(obj, path, _huge_string(rng))
        elif op == "weird":
            _set(obj, path, rng.choice(WEIRD_STRINGS))
        elif op == "nest":
            _set(obj, path, _nested(rng, rng.choice((5, 40, 120, 500))))
        elif op == "enum":
            word = rng.choice(("bogus", "A", "a", "CNAME ", "strict", "Delete", "off", "on", "full", "secondary"))
            _set(obj, path, word)
        elif op == "number":
            _set(obj, path, rng.choice((*NUMBERS, *FLOATS)))
        elif op == "unknown":
            target = current if isinstance(current, dict) else obj.setdefault("spec", {})
            if not isinstance(target, dict):
                target = obj
            target[rng.choice(("extra", "ttl2", "__proto__", "x-kubernetes", "$ref", "Spec"))] = rng.choice(
                ("v", 1, {"a": [1]}, None)
            )
        elif op == "list":
            # Many copies of something small, a few of something big: past the API server's limit either way,
            # without the test holding hundreds of megabytes.
            small = len(json.dumps(current, default=str)) < 1_000
            _set(obj, path, [current] * rng.choice((0, 2, 50, 1000) if small else (0, 2, 3)))
        return f"{op} {where}"


# ---- kflare run, serving its webhooks ------------------------------------------------------------------------


@dataclass
class Served:
    """`kflare run` with its webhook (TLS, the test CA's certificate) and plain-HTTP metrics on loopback."""

    proc: ControllerProcess
    webhook_url: str
    metrics_url: str
    ca_pem: bytes

    def http(self, timeout: float = 30.0) -> httpx.AsyncClient:
        import ssl

        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        return httpx.AsyncClient(verify=context, timeout=timeout)

    async def webhook_5xx(self) -> int:
        """5xx answers of the webhook listener, from the process's own metrics."""
        async with httpx.AsyncClient(timeout=10) as http:
            text = (await http.get(f"{self.metrics_url}/metrics")).text
        total = 0
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if (
                    s.name == "kflare_http_requests_total"
                    and s.labels.get("listener") == "webhook"
                    and s.labels.get("status", "").startswith("5")
                ):
                    total += int(s.value)
        return total

    def crashes_in_log(self) -> list[str]:
        return [
            line
            for line in self.proc.log().splitlines()
            if "Traceback" in line or "internal error while validating" in line or "Exception in ASGI" in line
        ]


@contextlib.contextmanager
def kflare_with_webhooks(plane: ControlPlane, emulator: EmulatorProcess, workdir: Path, *args: str) -> Iterator[Served]:
    """`kflare run` serving its webhooks (with `args` beside the flags that make it so) until the block ends."""
    cert_dir = workdir / "webhook-certs"
    cert_dir.mkdir(exist_ok=True)
    key, cert = plane.ca.issue("webhook", hosts=["127.0.0.1"], server=True)
    (cert_dir / "tls.key").write_bytes(key)
    (cert_dir / "tls.crt").write_bytes(cert)
    webhook_port, metrics_port = free_port(), free_port()
    proc = ControllerProcess(plane, emulator, workdir, "--drift-check-interval=5s")
    proc.argv = [a for a in proc.argv if not a.startswith(("--webhook-port", "--metrics-bind-address"))] + [
        f"--webhook-bind-address=127.0.0.1:{webhook_port}",
        f"--webhook-cert-dir={cert_dir}",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        "--metrics-secure=false",
        *args,
    ]
    proc.start()
    try:
        proc.wait_ready()
        yield Served(proc, f"https://127.0.0.1:{webhook_port}", f"http://127.0.0.1:{metrics_port}", plane.ca.pem)
    finally:
        proc.stop()


@contextlib.asynccontextmanager
async def registered(
    kube: ApiClient, raw: KubeClient, served: Served, namespace: str, label: str
) -> AsyncIterator[None]:
    """The webhooks as `kflare dev` registers them, for `namespace` (namespaced kinds) and objects labelled
    `label` (cluster-scoped kinds) only, so that no other test meets them."""
    name = f"kflare-hostile-{label}"
    body = configuration(
        name, url_client_config(served.webhook_url, served.ca_pem), labels={TEST_LABEL: "on"}, timeout_seconds=10
    )
    for hook, model in zip(body["webhooks"], sorted(KINDS, key=lambda m: m.info.namespaced), strict=True):
        if model.info.namespaced:
            hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
        else:
            hook["objectSelector"] = {"matchLabels": {OBJECT_LABEL: label}}
    api = client.AdmissionregistrationV1Api(kube)
    await api.create_validating_webhook_configuration(body)
    try:
        probe = sample("DNSRecord", type="TXT", content="x", proxied=True)
        probe["metadata"] = {"name": "probe", "namespace": namespace}

        async def refused() -> bool:
            try:
                await create(raw, probe, namespace, dry_run=True)
            except KubeError as exc:
                return "denied the request" in exc.message
            return False

        await eventually(refused, timeout=30, what="the API server to call the webhooks")
        yield
    finally:
        with contextlib.suppress(client.exceptions.ApiException):
            await api.delete_validating_webhook_configuration(name)


def _path(manifest: dict[str, Any], namespace: str, name: str | None = None) -> str:
    kind = manifest.get("kind")
    plural = PLURALS[kind] if isinstance(kind, str) and kind in PLURALS else "dnsrecords"
    where = "" if plural == "cloudflareaccounts" else f"/namespaces/{namespace}"
    return f"/apis/{GROUP}/{VERSION}{where}/{plural}" + (f"/{name}" if name else "")


async def create(kube: KubeClient, manifest: dict[str, Any], namespace: str, *, dry_run: bool) -> dict[str, Any]:
    """POST `manifest` as it is (no client-side model: the API server sees what a hostile client would send)."""
    query = {"dryRun": "All"} if dry_run else None
    return await kube.request("POST", _path(manifest, namespace), query=query, body=manifest)


async def replace(kube: KubeClient, manifest: dict[str, Any], namespace: str) -> dict[str, Any]:
    path = _path(manifest, namespace, manifest["metadata"]["name"])
    return await kube.request("PUT", path, query={"dryRun": "All"}, body=manifest)
