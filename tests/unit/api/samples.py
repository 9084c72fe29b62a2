"""Manifests written for the Go controller (kflare v0.2), from its deploy guide and API reference.

Ours must accept every one of them unchanged.
"""

from __future__ import annotations

from typing import Any

import yaml

from app.api.docs import load_yaml

ACCOUNT = """
apiVersion: kflare.dev/v1alpha1
kind: CloudflareAccount
metadata:
  name: my-account
spec:
  accountID: 0123456789abcdef0123456789abcdef
  tokenSecretRef:
    name: cloudflare-token
    namespace: kflare-system
"""

ACCOUNT_WITH_KEY = """
apiVersion: kflare.dev/v1alpha1
kind: CloudflareAccount
metadata:
  name: team-account
spec:
  accountID: fedcba9876543210fedcba9876543210
  tokenSecretRef:
    name: team-token
    namespace: team-a
    key: token
"""

ZONE = """
apiVersion: kflare.dev/v1alpha1
kind: Zone
metadata:
  name: example-com
  namespace: my-namespace
  annotations:
    kflare.dev/deletion-policy: retain
    kflare.dev/adoption-policy: adopt-or-create
spec:
  name: example.com
  accountRef:
    name: my-account
"""

ZONE_PLAN = """
apiVersion: kflare.dev/v1alpha1
kind: Zone
metadata:
  name: shop
  namespace: my-namespace
spec:
  name: shop.example.co.uk
  accountRef:
    name: my-account
  plan: pro
  type: partial
"""

RECORD_A = """
apiVersion: kflare.dev/v1alpha1
kind: DNSRecord
metadata:
  name: www
  namespace: my-namespace
spec:
  zoneRef:
    name: example-com
  name: www.example.com
  type: A
  content: 192.0.2.10
  proxied: true
"""

RECORD_AAAA = """
apiVersion: kflare.dev/v1alpha1
kind: DNSRecord
metadata:
  name: www-v6
  namespace: my-namespace
spec:
  zoneRef:
    name: example-com
  name: www.example.com
  type: AAAA
  content: 2001:db8::10
  ttl: 1
  proxied: false
"""

RECORD_CNAME = """
apiVersion: kflare.dev/v1alpha1
kind: DNSRecord
metadata:
  name: docs
  namespace: my-namespace
spec:
  zoneRef:
    name: example-com
  name: docs.example.com
  type: CNAME
  content: example.github.io
  ttl: 3600
  comment: documentation site
"""

RECORD_MX = """
apiVersion: kflare.dev/v1alpha1
kind: DNSRecord
metadata:
  name: mx-1
  namespace: my-namespace
spec:
  zoneRef:
    name: example-com
  name: example.com
  type: MX
  content: mx1.mail.example.net
  priority: 10
  ttl: 300
"""

RECORD_TXT = """
apiVersion: kflare.dev/v1alpha1
kind: DNSRecord
metadata:
  name: spf
  namespace: my-namespace
spec:
  zoneRef:
    name: example-com
  name: example.com
  type: TXT
  content: '"v=spf1 include:_spf.example.net ~all"'
  comment: SPF
  tags:
    - owner:mail-team
    - env:prod
"""

RECORD_SRV = """
apiVersion: kflare.dev/v1alpha1
kind: DNSRecord
metadata:
  name: sip
  namespace: my-namespace
spec:
  zoneRef:
    name: example-com
  name: _sip._tcp.example.com
  type: SRV
  data:
    priority: 10
    weight: 5
    port: 5060
    target: sip.example.com
"""

RECORD_CAA = """
apiVersion: kflare.dev/v1alpha1
kind: DNSRecord
metadata:
  name: caa
  namespace: my-namespace
spec:
  zoneRef:
    name: example-com
  name: example.com
  type: CAA
  data:
    flags: 0
    tag: issue
    value: letsencrypt.org
"""

RECORD_URI = """
apiVersion: kflare.dev/v1alpha1
kind: DNSRecord
metadata:
  name: uri
  namespace: my-namespace
spec:
  zoneRef:
    name: example-com
  name: _ftp._tcp.example.com
  type: URI
  priority: 10
  data:
    weight: 1
    target: ftp://ftp.example.com/public
"""

RECORD_TUNNEL = """
apiVersion: kflare.dev/v1alpha1
kind: DNSRecord
metadata:
  name: app
  namespace: my-namespace
spec:
  zoneRef:
    name: example-com
  name: app.example.com
  type: CNAME
  proxied: true
  tunnelRef:
    name: my-tunnel
"""

RECORD_WILDCARD = """
apiVersion: kflare.dev/v1alpha1
kind: DNSRecord
metadata:
  name: wildcard
  namespace: my-namespace
spec:
  zoneRef:
    name: example-com
  name: "*.example.com"
  type: CNAME
  content: example.com
  proxied: true
"""

WORKER = """
apiVersion: kflare.dev/v1alpha1
kind: WorkerScript
metadata:
  name: api
  namespace: my-namespace
spec:
  name: api-worker
  accountRef:
    name: my-account
  script: |
    export default { async fetch(request, env) { return new Response(await env.CACHE.get("greeting")); } };
  compatibilityDate: "2026-10-01"
  compatibilityFlags:
    - nodejs_compat
  bindings:
    - name: GREETING
      plainText: hello
    - name: API_KEY
      secretKeyRef:
        name: api-secrets
        key: api-key
    - name: CACHE
      kvNamespaceRef:
        name: cache
    - name: LEGACY_KV
      kvNamespaceID: 0f2ac74b498b48028cb68387c421e279
    - name: ASSETS
      r2BucketRef:
        name: assets
    - name: LOGS
      r2BucketName: logs-bucket
"""

WORKER_CONFIGMAP = """
apiVersion: kflare.dev/v1alpha1
kind: WorkerScript
metadata:
  name: legacy
  namespace: my-namespace
spec:
  name: legacy-worker
  accountRef:
    name: my-account
  format: serviceWorker
  scriptConfigMapRef:
    name: legacy-worker-code
    key: worker.js
"""

ROUTE = """
apiVersion: kflare.dev/v1alpha1
kind: WorkerRoute
metadata:
  name: api-route
  namespace: my-namespace
spec:
  zoneRef:
    name: example-com
  pattern: api.example.com/*
  workerScriptRef:
    name: api
"""

ROUTE_EXCLUSION = """
apiVersion: kflare.dev/v1alpha1
kind: WorkerRoute
metadata:
  name: api-static
  namespace: my-namespace
spec:
  zoneRef:
    name: example-com
  pattern: "*example.com/static/*"
"""

KV = """
apiVersion: kflare.dev/v1alpha1
kind: KVNamespace
metadata:
  name: cache
  namespace: my-namespace
spec:
  accountRef:
    name: my-account
  title: api-cache
"""

R2 = """
apiVersion: kflare.dev/v1alpha1
kind: R2Bucket
metadata:
  name: assets
  namespace: my-namespace
  annotations:
    kflare.dev/deletion-policy: retain
spec:
  accountRef:
    name: my-account
  name: my-assets
  locationHint: weur
"""

D1 = """
apiVersion: kflare.dev/v1alpha1
kind: D1Database
metadata:
  name: app-db
  namespace: my-namespace
spec:
  accountRef:
    name: my-account
  name: app-db
  locationHint: weur
"""

TUNNEL = """
apiVersion: kflare.dev/v1alpha1
kind: Tunnel
metadata:
  name: web
  namespace: default
spec:
  name: web-tunnel
  accountRef:
    name: my-account
  credentialsSecretRef:
    name: web-tunnel-token
"""

TUNNEL_CONFIGURATION = """
apiVersion: kflare.dev/v1alpha1
kind: TunnelConfiguration
metadata:
  name: web
  namespace: default
spec:
  tunnelRef:
    name: web
  ingress:
    - hostname: app.example.com
      service: http://web.default.svc.cluster.local:80
      originRequest:
        httpHostHeader: app.example.com
        noTLSVerify: false
    - hostname: "*.example.com"
      path: ^/api/.*
      service: https://api.default.svc:8443
      originRequest:
        originServerName: api.internal
        http2Origin: true
        disableChunkedEncoding: true
    - hostname: db.example.com
      service: tcp://postgres.default.svc:5432
  defaultService: http_status:404
"""

ALL: dict[str, str] = {
    "account": ACCOUNT,
    "account-with-key": ACCOUNT_WITH_KEY,
    "zone": ZONE,
    "zone-plan": ZONE_PLAN,
    "record-a": RECORD_A,
    "record-aaaa": RECORD_AAAA,
    "record-cname": RECORD_CNAME,
    "record-mx": RECORD_MX,
    "record-txt": RECORD_TXT,
    "record-srv": RECORD_SRV,
    "record-caa": RECORD_CAA,
    "record-uri": RECORD_URI,
    "record-tunnel": RECORD_TUNNEL,
    "record-wildcard": RECORD_WILDCARD,
    "worker": WORKER,
    "worker-configmap": WORKER_CONFIGMAP,
    "route": ROUTE,
    "route-exclusion": ROUTE_EXCLUSION,
    "kv": KV,
    "r2": R2,
    "d1": D1,
    "tunnel": TUNNEL,
    "tunnel-configuration": TUNNEL_CONFIGURATION,
}


def load(text: str) -> dict[str, Any]:
    document = load_yaml(text)
    assert isinstance(document, dict)
    return document


def _documents(path: str) -> dict[str, str]:
    """The manifests of an example file, each as its own text, by kind (the first of each kind)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / path).read_text(encoding="utf-8")
    out: dict[str, str] = {}
    for part in text.split("\n---\n"):
        document = yaml.safe_load(part)
        out.setdefault(document["kind"], part)
    return out


RULES: dict[str, str] = {
    **_documents("examples/40-rules.yaml"),
    **_documents("examples/50-managed-transform.yaml"),
    **_documents("examples/35-ip-list.yaml"),
}
"""One manifest of each rule kind and of ManagedTransform, as the examples give them."""
