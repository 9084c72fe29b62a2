"""cloudflare-tunnel-gateway-controller's GatewayClassConfig, as kflare's own objects: one aggregate reconcile per
GatewayClassConfig (keyed by its name) that a GatewayClass of this controller names.

What it makes, in the controller's namespace and named `derived_name(<config>)`:

- a CloudflareAccount whose token is the config's credentials Secret (`api-token`, or the reference's key), with the
  account ID of `spec.accountId`, else of the Secret's `account-id` key, else none (the account finds it from the
  token when the token reaches one account);
- a Tunnel that adopts the config's tunnel (`kflare.dev/adoption-policy: adopt`, by the name Cloudflare gives that
  ID) and writes its connector token to the Secret `<name>-token`, for the shared data plane's cloudflared.

Why this design: the class, the tunnels' reconcile and the data plane already run on a kflare Tunnel and its
account (their credentials, status and DNS records), so deriving those objects lets everything else stay as it is,
and each keeps its own lifecycle and status (`kubectl get cloudflareaccounts,tunnels` says what is wrong). It is the
safest: the Tunnel says `kflare.dev/deletion-policy: retain` and is only ever an adoption, never a create, so no tunnel
is made, and the user's tunnel is never deleted, whatever happens to the package's objects. Both objects are owned by
the GatewayClassConfig (an owner reference, without blocking its deletion): when it goes, they go with it and the
tunnel stays in Cloudflare. The package's objects are only read, never written.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
from collections.abc import Mapping
from typing import Final

from pydantic import ValidationError

from app.api.tunnel_gateway_package import (
    ACCOUNT_ID_KEY,
    API_TOKEN_KEY,
    PACKAGE_GROUP,
    ExternalBackend,
    GatewayClassConfig,
    GatewayClassConfigSpec,
    GatewayConfig,
)
from app.cloudflare.errors import CloudflareError
from app.kube.client import JSON, KubeError, ResourceType
from app.kube.controller import Outcome
from app.kube.index import Ref
from app.kube.informer import Key
from app.kube.manager import SECRET_KIND
from app.kube.registrations import DocumentsOf, Input
from reconcilers.cloudflare_account import CloudflareAccountKind
from reconcilers.context import Context
from reconcilers.credentials import ready_account
from reconcilers.gateway import raw as untyped
from reconcilers.gateway import shapes
from reconcilers.gateway.kinds import CLASS_CONFIG_KIND, GATEWAY_CLASSES, Classes, derived_name
from reconcilers.gateway.plane_manifests import adopting_tunnel
from reconcilers.lifecycle import NotReady
from reconcilers.managed_kind import resource_type
from reconcilers.tunnel import TunnelKind

log = logging.getLogger(__name__)

VERSION: Final = "v1alpha1"
GATEWAY_CLASS_CONFIGS: Final = ResourceType(
    PACKAGE_GROUP, VERSION, GatewayClassConfig.info.plural, GatewayClassConfig.info.kind, False, optional=True
)
"""Optional, as the package's other kinds: a cluster without the package's CRDs still serves the class."""
GATEWAY_CONFIGS: Final = ResourceType(
    PACKAGE_GROUP, VERSION, GatewayConfig.info.plural, GatewayConfig.info.kind, optional=True
)
EXTERNAL_BACKENDS: Final = ResourceType(
    PACKAGE_GROUP, VERSION, ExternalBackend.info.plural, ExternalBackend.info.kind, optional=True
)
ACCOUNTS: Final = resource_type(CloudflareAccountKind)
TUNNELS: Final = resource_type(TunnelKind)
CONFIG_LABEL: Final = "kflare.dev/gateway-class-config"
"""On each derived object: the name of the GatewayClassConfig it is made of."""
RETRY: Final = 30.0
SECRET_WAIT: Final = 5.0


def _config_names(cls: Mapping[str, object], classes: Classes) -> list[str]:
    ref = untyped.mapping(untyped.at(cls, "spec", "parametersRef"))
    if classes.ours(cls) and ref.get("group") == PACKAGE_GROUP and ref.get("kind") == CLASS_CONFIG_KIND:
        return [str(ref.get("name") or "")]
    return []


def _owner(config: Mapping[str, object]) -> JSON:
    meta = untyped.mapping(config.get("metadata"))
    return {
        "apiVersion": f"{PACKAGE_GROUP}/{VERSION}",
        "kind": CLASS_CONFIG_KIND,
        "name": str(meta.get("name") or ""),
        "uid": str(meta.get("uid") or ""),
        # Not blocking: deleting the package's object never waits on kflare's (which keep the tunnel either way).
        "blockOwnerDeletion": False,
    }


def _meta(config: Mapping[str, object], name: str, namespace: str | None = None) -> JSON:
    meta: JSON = {
        "name": name,
        "labels": {
            CONFIG_LABEL: untyped.text(config, "metadata", "name"),
            "app.kubernetes.io/managed-by": "kflare",
        },
        "ownerReferences": [_owner(config)],
    }
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def account_object(
    config: Mapping[str, object], spec: GatewayClassConfigSpec, namespace: str, secret: JSON | None
) -> JSON:
    """The CloudflareAccount derived from a GatewayClassConfig (`secret`: its credentials Secret, when read)."""
    ref = spec.cloudflare_credentials_secret_ref
    account_id = spec.account_id or _decoded(((secret or {}).get("data") or {}).get(ACCOUNT_ID_KEY))
    body_spec: JSON = {
        "tokenSecretRef": {"name": ref.name, "namespace": ref.namespace or namespace, "key": ref.key or API_TOKEN_KEY}
    }
    if account_id:
        body_spec["accountID"] = account_id
    name = derived_name(shapes.name(config))
    return {
        "apiVersion": ACCOUNTS.api_version,
        "kind": ACCOUNTS.kind,
        "metadata": _meta(config, name),
        "spec": body_spec,
    }


def tunnel_object(config: Mapping[str, object], namespace: str, tunnel_name: str) -> JSON:
    """The Tunnel adopting a GatewayClassConfig's tunnel, named `tunnel_name` in Cloudflare."""
    name = derived_name(shapes.name(config))
    return adopting_tunnel(_meta(config, name, namespace), tunnel_name, name, f"{name}-token")


def _decoded(value: object) -> str:
    try:
        return base64.b64decode(str(value or ""), validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError):
        return ""


class PackageReconciler:
    """The aggregate reconciler of the objects derived from each GatewayClassConfig a class of ours names."""

    name = "gateway-class-configs"

    def __init__(self, ctx: Context, classes: Classes) -> None:
        assert classes.package_namespace is not None
        self.ctx, self.classes, self.namespace = ctx, classes, classes.package_namespace
        self._names: dict[str, str] = {}
        """Tunnel ID -> its name in Cloudflare, once read (it is what the derived Tunnel adopts by)."""

    def inputs(self) -> Mapping[ResourceType, DocumentsOf | Input]:
        def of_config(raw: JSON) -> list[str]:
            return [str((raw.get("metadata") or {}).get("name") or "")]

        def of_class(raw: JSON) -> list[str]:
            return _config_names(raw, self.classes)

        def of_derived(raw: JSON) -> list[str]:
            found = ((raw.get("metadata") or {}).get("labels") or {}).get(CONFIG_LABEL)
            return [str(found)] if found else []

        def state(raw: JSON) -> object:
            conditions = (raw.get("status") or {}).get("conditions") or []
            return repr(
                ((raw.get("metadata") or {}).get("labels"), [c for c in conditions if c.get("type") == "Ready"])
            )

        return {
            GATEWAY_CLASS_CONFIGS: of_config,
            GATEWAY_CLASSES: of_class,
            ACCOUNTS: Input(of_derived, state),
            TUNNELS: Input(of_derived, state),
        }

    def _named(self, name: str) -> bool:
        return any(name in _config_names(c, self.classes) for c in self.ctx.cached_all(GATEWAY_CLASSES.kind))

    async def reconcile(self, key: Key) -> Outcome:
        name = key[1]
        config = self.ctx.cached(GATEWAY_CLASS_CONFIGS.kind, name)
        if config is None or not self._named(name) or (config.get("metadata") or {}).get("deletionTimestamp"):
            # Gone, or no class of ours names it: what was derived of it goes by its owner reference, or stays for
            # the class that names it again (a Tunnel kept is never a tunnel deleted).
            return Outcome.done()
        where = {"kind": CLASS_CONFIG_KIND, "object": name}
        try:
            spec = GatewayClassConfigSpec.model_validate(config.get("spec") or {})
        except ValidationError as exc:
            log.warning("GatewayClassConfig not read", extra={**where, "error": str(exc)})
            return Outcome.done()
        ref = spec.cloudflare_credentials_secret_ref
        secret_key = (ref.namespace or self.namespace, ref.name)
        self.ctx.secrets.reference(self.name, [secret_key])
        self.ctx.index.set_parents(Ref(self.name, "", name), [Ref(SECRET_KIND, *secret_key)])
        with contextlib.suppress(TimeoutError):
            await self.ctx.secrets.wait_synced(secret_key, SECRET_WAIT)
        account = account_object(config, spec, self.namespace, self.ctx.secrets.get(secret_key))
        try:
            await self.ctx.kube.apply(ACCOUNTS, account)
        except KubeError as exc:
            log.warning("CloudflareAccount of a GatewayClassConfig not written", extra={**where, "error": str(exc)})
            return Outcome(retry=True)
        try:
            link = await ready_account(self.ctx.credentials, account["metadata"]["name"], self.namespace)
        except NotReady as wait:
            log.info("GatewayClassConfig's account not ready", extra={**where, "reason": wait.reason})
            return Outcome(requeue_after=wait.requeue_after or RETRY)
        tunnel_name = self._names.get(spec.tunnel_id)
        if tunnel_name is None:
            try:
                tunnel_name = (await link.client.get_tunnel(link.account_id, spec.tunnel_id)).name
            except CloudflareError as exc:
                log.warning(
                    "tunnel of a GatewayClassConfig not read",
                    extra={**where, "tunnel": spec.tunnel_id, "error": str(exc)},
                )
                return Outcome(requeue_after=RETRY)
            self._names[spec.tunnel_id] = tunnel_name
        tunnel = tunnel_object(config, self.namespace, tunnel_name)
        try:
            await self.ctx.kube.apply(TUNNELS, tunnel, self.namespace)
        except KubeError as exc:
            log.warning("Tunnel of a GatewayClassConfig not written", extra={**where, "error": str(exc)})
            return Outcome(retry=True)
        adopted = self.ctx.cached(TUNNELS.kind, tunnel["metadata"]["name"], self.namespace)
        found = ((adopted or {}).get("status") or {}).get("cloudflareMetadata") or {}
        if found.get("tunnelID") and found["tunnelID"] != spec.tunnel_id:
            # A rename between the read and the adoption took another tunnel of that name: read the name again.
            self._names.pop(spec.tunnel_id, None)
            log.warning(
                "the Tunnel of a GatewayClassConfig adopted another tunnel",
                extra={**where, "tunnel": spec.tunnel_id, "adopted": found["tunnelID"]},
            )
            return Outcome(requeue_after=RETRY)
        return Outcome.done()

    async def timed_out(self, key: Key, seconds: float) -> None:
        log.warning(
            "a GatewayClassConfig's reconcile timed out",
            extra={"kind": CLASS_CONFIG_KIND, "object": key[1], "seconds": seconds},
        )
