"""The reconcile of each Gateway's own data plane (`reconcilers.gateway.planes` says which Gateways have one, and
`reconcilers.gateway.plane_manifests` what one is made of).

The objects are written by server-side apply, only when what kflare would write differs from what it last wrote (an
idle reconcile makes no request), and never over an object of the same name that is not this Gateway's.

Deleting the Gateway, or its parametersRef, takes the plane down in an order that loses nothing and orphans nothing:
the finalizer `kflare.dev/data-plane` holds the Gateway while (1) the class's DNS records for its hostnames and its
rules in the tunnel's ingress document go, (2) the Deployment and the rest go, so no cloudflared holds the tunnel,
(3) the Tunnel resource goes (its own finalizer deletes or keeps the tunnel in Cloudflare, as the GatewayParameters'
`tunnelDeletionPolicy` says; a GatewayConfig's plane's Tunnel always keeps it). A Gateway refused its plane (its
parameters went, or the cap was lowered) keeps the plane it has: the Gateway says why, and nothing is taken down under
it.

A GatewayConfig's plane adopts the tunnel its connector token names (`tunnelTokenSecretRef`, in the Gateway's
namespace, watched): the token is read only for the tunnel ID and account tag inside it, which are not secret, and is
never logged nor copied. The tunnel's name, which adoption goes by, is read through the class's account until the
Tunnel holds it. cloudflared runs with the token the adopted Tunnel writes to its own Secret, as in every plane,
rather than with the user's Secret: it is then by construction the token of the tunnel whose ingress document kflare
writes, even while the user's Secret names another tunnel than the one adopted (the Gateway is told, and nothing
changes).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from app.api.tunnel_gateway_package import TUNNEL_ID_PATTERN
from app.cloudflare.errors import CloudflareError
from app.kube.client import JSON, KubeError, ResourceType
from app.kube.controller import Outcome
from app.kube.index import Ref
from app.kube.informer import Key
from app.kube.manager import SECRET_KIND
from app.kube.registrations import DocumentsOf, Input
from reconcilers.context import Context
from reconcilers.credentials import ready_account
from reconcilers.dns_record import DNSRecordKind
from reconcilers.gateway import class_records, envoy, shapes
from reconcilers.gateway import raw as untyped
from reconcilers.gateway.gateway_configs import class_accounts
from reconcilers.gateway.kinds import GATEWAY_CLASSES, GATEWAYS, TUNNEL_KIND
from reconcilers.gateway.package import ACCOUNTS, GATEWAY_CONFIGS
from reconcilers.gateway.plane_manifests import (
    ORIGIN_KEYS,
    TUNNELS,
    XDS_KEYS,
    adopting_tunnel_object,
    owned_names,
    plane_objects,
    tunnel_object,
)
from reconcilers.gateway.planes import (
    FINALIZER,
    GATEWAY_LABEL,
    PARAMETERS,
    Choice,
    Plane,
    PlanePolicy,
    PlaneSettings,
    choose,
    finalized,
    our_classes,
    parameters_ref,
    plane_name,
)
from reconcilers.gateway.shapes import ObjectKey
from reconcilers.lifecycle import NotReady

log = logging.getLogger(__name__)

REAPPLY: Final = 600.0
"""Seconds after which a plane's objects are applied again even when kflare's view of them has not changed: an edit
by someone else is undone within this long (server-side apply of an unchanged object writes nothing)."""
TEARDOWN_POLL: Final = 1.0
SOURCE_RETRY: Final = 30.0
SOURCE_WAIT: Final = 5.0
"""Seconds a reconcile waits for the watch of the chart's Secrets to list them (the first time only)."""
ACCOUNT_TAG: Final = r"^[a-f0-9]{32}$"


NAMESPACE_INDEX = "namespace"
"""The Gateways' cache by namespace: the cap on planes counts a namespace's Gateways."""

_choices_memo: dict[object, dict[ObjectKey, Choice]] = {}


def cached_choices(ctx: Context, policy: PlanePolicy) -> dict[ObjectKey, Choice]:
    """`choose` over what the caches hold, remembered per revision of the caches it reads (the tunnels' reconcile
    asks on every route's watch event)."""
    package = policy.classes.package_namespace is not None
    kinds = (GATEWAYS, PARAMETERS, GATEWAY_CLASSES, TUNNELS, *((GATEWAY_CONFIGS,) if package else ()))
    informers = [ctx.informer_of(rt.kind) for rt in kinds]
    memo_key = (policy, *((id(i), i.revision) for i in informers if i is not None)) if all(informers) else None
    if memo_key is not None and (found := _choices_memo.get(memo_key)) is not None:
        return found
    classes = ctx.cached_all(GATEWAY_CLASSES.kind)
    choices = choose(
        ctx.cached_all(GATEWAYS.kind),
        ctx.cached_all(PARAMETERS.kind),
        our_classes(classes, policy.classes),
        policy,
        lambda namespace, name: ctx.cached(TUNNEL_KIND, name, namespace),
        ctx.cached_all(GATEWAY_CONFIGS.kind) if package else (),
        class_accounts(classes, policy.classes),
    )
    if memo_key is not None:
        _choices_memo.clear()
        _choices_memo[memo_key] = choices
    return choices


# ---- the reconcile ----------------------------------------------------------------------------------------------


class PlaneReconciler:
    """The aggregate reconciler of each Gateway's own data plane (keyed `namespace/name` of the Gateway)."""

    name = "gateway-planes"

    def __init__(
        self, ctx: Context, settings: PlaneSettings, release: Callable[[ObjectKey], Awaitable[Outcome]]
    ) -> None:
        self.ctx, self.settings, self.release = ctx, settings, release
        self._applied: dict[tuple[str, str, str], tuple[str, float]] = {}
        self._term: object = None
        self._said: dict[str, str] = {}
        """Gateway -> why its GatewayConfig's tunnel was last not adopted (told once in an Event, not each retry)."""
        self.applies = 0
        """Objects applied since start (a test reads it: an idle reconcile applies nothing)."""

    def inputs(self) -> Mapping[ResourceType, DocumentsOf | Input]:
        default = self.settings.default_parameters

        def asking(namespace: str | None) -> list[str]:
            """The Gateways (of `namespace`, or all) that have or ask for a plane of their own: a namespace's are one
            lookup of the index this input keeps on the Gateways' cache, as each Gateway event asks."""
            informer = self.ctx.informer_of(GATEWAYS.kind)
            if informer is None:
                return []
            if namespace is None:
                found = informer.list()
            elif NAMESPACE_INDEX in informer.indexers:
                found = informer.by_index(NAMESPACE_INDEX, namespace)
            else:
                found = informer.list(namespace)
            return [
                f"{shapes.ns(g)}/{shapes.name(g)}"
                for g in found
                if parameters_ref(g, default) is not None or finalized(g)
            ]

        def of_gateway(raw: JSON) -> list[str]:
            if parameters_ref(raw, default) is None and not finalized(raw):
                return []
            # With the namespace's others: one that goes (or stops asking) frees a place under the cap.
            return sorted({f"{shapes.ns(raw)}/{shapes.name(raw)}", *asking(shapes.ns(raw))})

        def in_namespace(raw: JSON) -> list[str]:
            # The cap counts a namespace's Gateways: any of them may gain or lose its plane.
            return asking(shapes.ns(raw))

        def of_parameters(raw: JSON) -> list[str]:
            if default is not None and shapes.key(raw) == default:
                return asking(None)  # the default's Gateways are in every namespace
            return in_namespace(raw)

        def everywhere(raw: JSON) -> list[str]:
            return asking(None)

        def of_tunnel(raw: JSON) -> list[str]:
            meta = raw.get("metadata") or {}
            gateway = (meta.get("labels") or {}).get(GATEWAY_LABEL)
            return [f"{meta.get('namespace')}/{gateway}"] if gateway else []

        def tunnel_state(raw: JSON) -> object:
            # The ID it holds too: a GatewayConfig's plane checks it is the one the token names.
            held = ((raw.get("status") or {}).get("cloudflareMetadata") or {}).get("tunnelID")
            return repr(((raw.get("metadata") or {}).get("labels"), held))

        inputs: dict[ResourceType, DocumentsOf | Input] = {
            GATEWAYS: Input(of_gateway, _gateway_state, {NAMESPACE_INDEX: lambda raw: [shapes.ns(raw)]}),
            PARAMETERS: of_parameters,
            GATEWAY_CLASSES: everywhere,
            TUNNELS: Input(of_tunnel, tunnel_state),
        }

        def of_account(raw: JSON) -> list[str]:
            # A GatewayConfig's plane waits for its class's account to be Ready to read its tunnel's name.
            account = shapes.name(raw)
            return [
                f"{p.namespace}/{p.gateway[1]}"
                for p in cached_choices(self.ctx, self.settings.policy).values()
                if isinstance(p, Plane)
                and p.token is not None
                and untyped.at(p.parameters, "accountRef", "name") == account
            ]

        def ready_state(raw: JSON) -> object:
            conditions = (raw.get("status") or {}).get("conditions") or []
            return repr([c.get("status") for c in conditions if c.get("type") == "Ready"])

        if self.settings.classes.package_namespace is not None:
            inputs[GATEWAY_CONFIGS] = in_namespace
            inputs[ACCOUNTS] = Input(of_account, ready_state)
        return inputs

    async def reconcile(self, key: Key) -> Outcome:
        term = self.ctx.informer_of(GATEWAYS.kind)
        if term is not self._term:
            self._applied, self._term = {}, term  # a new term as leader: another leader may have written meanwhile
        namespace, _, name = key[1].partition("/")
        gateway = self.ctx.cached(GATEWAYS.kind, name, namespace)
        choice = cached_choices(self.ctx, self.settings.policy).get((namespace, name))
        if gateway is not None and isinstance(choice, Plane):
            return await self._ensure(gateway, choice)
        if gateway is None or not finalized(gateway):
            return Outcome.done()
        if isinstance(choice, str) and not (gateway["metadata"].get("deletionTimestamp")):
            # Refused (its parameters went, or the cap was lowered): the Gateway says why, and its plane is left
            # as it is rather than taken down under it.
            return Outcome.done()
        return await self._teardown(gateway)

    async def _ensure(self, gateway: JSON, plane: Plane) -> Outcome:
        if not finalized(gateway):
            try:
                await self._finalizer(gateway, [*(gateway["metadata"].get("finalizers") or []), FINALIZER])
            except KubeError as exc:
                return Outcome.done() if exc.not_found else Outcome(retry=True)
        try:
            xds, origin = await self._sources(plane)
        except LookupError as missing:
            log.warning(
                "a Gateway's data plane cannot be made", extra={"gateway": _name(plane), "reason": str(missing)}
            )
            return Outcome(requeue_after=SOURCE_RETRY)
        if plane.token is None:
            tunnel = tunnel_object(plane, self.settings)
        else:
            adopting = await self._adopting(plane)
            if isinstance(adopting, str):
                await self._tell(gateway, plane, adopting)
                return Outcome(requeue_after=SOURCE_RETRY)
            tunnel = adopting
            self._said.pop(_name(plane), None)
        failed = False
        wanted = [(TUNNELS, tunnel), *plane_objects(plane, self.settings, xds, origin, _listeners(gateway))]
        for rt, body in wanted:
            failed |= not await self._apply(rt, body, plane)
        return Outcome(retry=True) if failed else Outcome.done()

    async def _sources(self, plane: Plane) -> tuple[dict[str, str], dict[str, str]]:
        """The data of the chart's xDS and origin-certificate Secrets (in the controller's namespace), as their watches
        hold them: no request per reconcile, and a rotation of either (`helm upgrade` after deleting it) reaches
        every plane. The plane's bootstrap presents the plane's own credential (`envoy.plane_token`), never the
        installation's token, which is not copied."""
        keys = [
            (self.settings.namespace, self.settings.xds_secret),
            (self.settings.namespace, self.settings.origin_secret),
        ]
        # A GatewayConfig's token Secret too: a new token there may name another tunnel.
        token = [(plane.namespace, plane.token[0])] if plane.token is not None else []
        secrets = self.ctx.secrets
        secrets.reference(self.name, [*keys, *token])
        self.ctx.index.set_parents(Ref(self.name, "", _name(plane)), [Ref(SECRET_KIND, *k) for k in [*keys, *token]])
        out = []
        for key, wanted in zip(keys, (XDS_KEYS, ORIGIN_KEYS), strict=True):
            with contextlib.suppress(TimeoutError):
                await secrets.wait_synced(key, SOURCE_WAIT)
            data = (secrets.get(key) or {}).get("data") or {}
            missing = [k for k in wanted if k not in data]
            if missing:
                raise LookupError(f"Secret {key[0]}/{key[1]} has no {', '.join(missing)}")
            out.append({k: str(data[k]) for k in wanted})
            if wanted is XDS_KEYS:
                master = _decoded(data.get("token"))
                if not master:
                    raise LookupError(f"Secret {key[0]}/{key[1]} has no token")
                out[-1]["bootstrap.json"] = _own_bootstrap(out[-1]["bootstrap.json"], master, plane.cluster)
        return out[0], out[1]

    async def _adopting(self, plane: Plane) -> JSON | str:
        """The Tunnel of a GatewayConfig's plane, adopting the tunnel its connector token names; or why it cannot be
        written now (said without the token)."""
        assert plane.token is not None
        secret_name, key = plane.token
        where = f"Secret {plane.namespace}/{secret_name}"
        with contextlib.suppress(TimeoutError):
            await self.ctx.secrets.wait_synced((plane.namespace, secret_name), SOURCE_WAIT)
        secret = self.ctx.secrets.get((plane.namespace, secret_name))
        if secret is None:
            return f"{where} (the GatewayConfig's tunnelTokenSecretRef) not found"
        found = connector_tunnel((secret.get("data") or {}).get(key))
        if found is None:
            return f"{where} holds no Cloudflare connector token under key {key}"
        account_tag, tunnel_id = found
        existing = self.ctx.cached(TUNNEL_KIND, plane.name, plane.namespace) or {}
        held = ((existing.get("status") or {}).get("cloudflareMetadata") or {}).get("tunnelID")
        if held and held != tunnel_id:
            # Renaming the held tunnel to the other's name is what applying would do: it is left as it is.
            return (
                f"the Tunnel {plane.namespace}/{plane.name} holds tunnel {held} and the connector token in {where}"
                f" names tunnel {tunnel_id}: delete that Tunnel (its tunnel stays in Cloudflare) to adopt the token's"
            )
        # Once held, the name is the Tunnel's; until then it is read again (a rename in Cloudflare meanwhile is seen).
        name = str((existing.get("spec") or {}).get("name") or "") if held else ""
        if not name:
            account = untyped.text(plane.parameters, "accountRef", "name")
            try:
                link = await ready_account(self.ctx.credentials, account, plane.namespace)
            except NotReady as wait:
                return f"CloudflareAccount {account} is not ready: {wait.message}"
            if link.account_id != account_tag:
                return (
                    f"the connector token in {where} is of account {account_tag}, and CloudflareAccount {account}"
                    f" (the class's) is account {link.account_id}"
                )
            try:
                name = (await link.client.get_tunnel(link.account_id, tunnel_id)).name
            except CloudflareError as exc:
                return f"tunnel {tunnel_id} (of the connector token in {where}) not read: {exc}"
        return adopting_tunnel_object(plane, name)

    async def _tell(self, gateway: JSON, plane: Plane, why: str) -> None:
        """Why a GatewayConfig's tunnel is not adopted: logged each time, told on the Gateway once."""
        gateway_name = _name(plane)
        log.warning(
            "a GatewayConfig's tunnel not adopted",
            extra={"kind": GATEWAYS.kind, "namespace": plane.namespace, "object_name": plane.gateway[1], "reason": why},
        )
        if self._said.get(gateway_name) == why:
            return
        self._said[gateway_name] = why
        regarding = {**gateway, "apiVersion": GATEWAYS.api_version, "kind": GATEWAYS.kind}
        await self.ctx.recorder.record(regarding, type_="Warning", reason="TunnelNotAdopted", note=why)

    async def _finalizer(self, gateway: JSON, finalizers: list[object]) -> None:
        """Set the Gateway's finalizers, if it has not changed since it was read."""
        meta = gateway["metadata"]
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
        await self.ctx.kube.patch(GATEWAYS, shapes.name(gateway), patch, shapes.ns(gateway))

    async def _apply(self, rt: ResourceType, body: JSON, plane: Plane) -> bool:
        """Apply `body` unless it is what was applied last (and not long ago); never over another's object."""
        name = str(body["metadata"]["name"])
        memo_key = (rt.plural, plane.namespace, name)
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        last = self._applied.get(memo_key)
        if last is not None and last[0] == digest and time.monotonic() - last[1] < REAPPLY:
            return True
        try:
            if last is None:
                current = await self._get(rt, name, plane.namespace)
                if current is not None and shapes.labels(current).get(GATEWAY_LABEL) != plane.gateway[1]:
                    log.warning(
                        "an object of a Gateway's data plane exists and is not the Gateway's: left as it is",
                        extra={"gateway": _name(plane), "object": f"{rt.kind} {plane.namespace}/{name}"},
                    )
                    return False
            await self.ctx.kube.apply(rt, body, plane.namespace)
        except KubeError as exc:
            log.warning(
                "an object of a Gateway's data plane not written",
                extra={"gateway": _name(plane), "object": f"{rt.kind} {name}", "error": str(exc)},
            )
            return False
        self.applies += 1
        self._applied[memo_key] = (digest, time.monotonic())
        return True

    async def _get(self, rt: ResourceType, name: str, namespace: str) -> JSON | None:
        try:
            return await self.ctx.kube.get(rt, name, namespace)
        except KubeError as exc:
            if exc.not_found:
                return None
            raise

    async def _teardown(self, gateway: JSON) -> Outcome:
        """One step of taking the Gateway's plane down, in order; the finalizer goes when all are done."""
        namespace, gateway_name = shapes.key(gateway)
        name = plane_name(gateway_name)
        where = f"{namespace}/{gateway_name}"
        # (1) The hostnames: DNS records and the ingress rules, while cloudflared still serves the tunnel.
        released = await self.release((namespace, name))
        if released.retry or released.requeue_after:
            return released
        if class_records.records_of(self.ctx.informer_of(DNSRecordKind.kind), (namespace, name)):
            return Outcome(requeue_after=TEARDOWN_POLL)
        # (2) The pods and what they read.
        pending = False
        for rt, object_name in owned_names(name):
            pending |= not await self._gone(rt, object_name, namespace, gateway_name)
        if pending:
            return Outcome(requeue_after=TEARDOWN_POLL)
        # (3) The tunnel: its finalizer deletes or keeps it in Cloudflare, as the policy annotation says.
        if not await self._gone(TUNNELS, name, namespace, gateway_name):
            return Outcome(requeue_after=TEARDOWN_POLL)
        try:
            await self._finalizer(gateway, [f for f in gateway["metadata"].get("finalizers") or [] if f != FINALIZER])
        except KubeError as exc:
            if not exc.not_found:
                return Outcome(retry=True)
        self.ctx.index.remove(Ref(self.name, "", where))
        self._said.pop(where, None)
        for memo_key in [k for k in self._applied if k[1] == namespace and k[2].startswith(name)]:
            del self._applied[memo_key]
        log.info("a Gateway's data plane taken down", extra={"gateway": where})
        return Outcome.done()

    async def _gone(self, rt: ResourceType, name: str, namespace: str, gateway: str) -> bool:
        """Whether the object is gone; deletes it first if it is this Gateway's (another's is left, and counts as
        gone for this plane)."""
        current = await self._get(rt, name, namespace)
        if current is None:
            return True
        if shapes.labels(current).get(GATEWAY_LABEL) != gateway:
            return True
        if not (current.get("metadata") or {}).get("deletionTimestamp"):
            try:
                await self.ctx.kube.delete(rt, name, namespace)
                log.info(
                    "an object of a Gateway's data plane deleted", extra={"object": f"{rt.kind} {namespace}/{name}"}
                )
            except KubeError as exc:
                if exc.not_found:
                    return True
                raise
        return False

    async def timed_out(self, key: Key, seconds: float) -> None:
        log.warning("a Gateway's data plane reconcile timed out", extra={"gateway": key[1], "seconds": seconds})


def _gateway_state(raw: JSON) -> object:
    meta = raw.get("metadata") or {}
    listeners = [(entry.get("port"), entry.get("protocol"), entry.get("tls")) for entry in _listeners(raw)]
    return repr(
        (
            (raw.get("spec") or {}).get("infrastructure"),
            listeners,  # the plane's Service has their ports
            (raw.get("spec") or {}).get("gatewayClassName"),
            meta.get("uid"),
            meta.get("finalizers"),
            meta.get("deletionTimestamp"),
            meta.get("creationTimestamp"),
        )
    )


def _listeners(raw: JSON) -> list[JSON]:
    return [entry for entry in (raw.get("spec") or {}).get("listeners") or [] if isinstance(entry, dict)]


def _name(plane: Plane) -> str:
    return f"{plane.gateway[0]}/{plane.gateway[1]}"


def _decoded(value: object) -> str:
    try:
        return base64.b64decode(str(value or ""), validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError):
        return ""


def connector_tunnel(encoded: object) -> tuple[str, str] | None:
    """The account tag and tunnel ID of a Cloudflare connector token (Secret data: base64 of the token, itself base64
    of JSON `{"a": account tag, "t": tunnel ID, "s": secret}`); None when it is not one. The secret is not kept."""
    token = _decoded(encoded)
    try:
        fields = json.loads(base64.b64decode(token + "=" * (-len(token) % 4), validate=True))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(fields, dict):
        return None
    account, tunnel = str(fields.get("a") or ""), str(fields.get("t") or "")
    if not re.match(ACCOUNT_TAG, account) or not re.match(TUNNEL_ID_PATTERN, tunnel):
        return None
    return account, tunnel


def _own_bootstrap(encoded: str, master: str, cluster: str) -> str:
    """The chart's bootstrap (Secret data) with the plane's own credential in place of the installation's token."""
    try:
        bootstrap = json.loads(base64.b64decode(encoded))
        own = envoy.with_token(bootstrap, envoy.plane_token(master, cluster))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise LookupError("the chart's xDS Secret holds no Envoy bootstrap in bootstrap.json") from None
    return base64.b64encode(json.dumps(own, sort_keys=True).encode()).decode()
