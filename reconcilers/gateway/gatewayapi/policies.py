"""BackendTLSPolicies: which one applies to each Service port a route sends to, the TLS Envoy then speaks to that
backend (SNI, trusted CAs, the names the backend's certificate must carry), and each policy's status per Gateway.

A policy that applies but cannot be honoured (no valid CA, an unknown trust store, options the data plane does not
implement) fails closed: the backend is treated as having no endpoints, so its requests get a 5xx, never plaintext.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from cryptography import x509

from reconcilers.gateway import shapes
from reconcilers.gateway.envoy import EnvoyJSON
from reconcilers.gateway.gatewayapi.route_shapes import BackendObjectReference, Route
from reconcilers.gateway.kinds import GATEWAY_GROUP
from reconcilers.gateway.shapes import (
    BackendTLSPolicy,
    Condition,
    ConfigMap,
    ObjectKey,
    PolicyAncestorStatus,
    condition,
)

UPSTREAM_TLS_CONTEXT = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
SYSTEM_CA_FILE = "/etc/ssl/certs/ca-certificates.crt"
"""The system trust store of the data plane's Envoy image (Debian's and Ubuntu's bundle from ca-certificates), for
`wellKnownCACertificates: System`."""
SYSTEM = "System"
MAX_ANCESTORS = 16
"""The CRD's limit on status.ancestors."""

ConfigMapLookup = Callable[[str, str], ConfigMap | None]
Target = tuple[str, str, str | None]
"""(namespace, Service name, port name or None for the whole Service) a policy targets."""


@dataclass(frozen=True)
class ClientCertificate:
    """The certificate a Gateway's data plane presents to the backends it speaks TLS to
    (`spec.tls.backend.clientCertificateRef`): the Secret it is read from, and its PEM certificate chain and key."""

    secret: ObjectKey
    chain: str
    key: str = field(repr=False)

    @property
    def suffix(self) -> str:
        """What the name of a cluster presenting it carries: Gateways of one plane presenting different certificates
        to one backend get a cluster each."""
        return f"/client/{self.secret[0]}/{self.secret[1]}"


@dataclass(frozen=True)
class UpstreamTLS:
    """The TLS of a cluster to a backend, from the policy that applies to it."""

    policy: ObjectKey
    sni: str
    ca_pem: str | None
    ca_file: str | None
    sans: tuple[tuple[str, str], ...]
    """(Envoy's san_type, value): the backend's certificate must carry one of them."""

    @property
    def suffix(self) -> str:
        """What the cluster's name carries so that a change of policy makes another cluster (Envoy then warms the
        new one instead of keeping connections opened under the old trust)."""
        return f"/tls/{self.policy[0]}/{self.policy[1]}"

    def transport_socket(self, *, http2: bool, client: ClientCertificate | None = None) -> EnvoyJSON:
        trusted: EnvoyJSON = {"inline_string": self.ca_pem} if self.ca_pem is not None else {"filename": self.ca_file}
        context: EnvoyJSON = {
            "validation_context": {
                "trusted_ca": trusted,
                "match_typed_subject_alt_names": [
                    {"san_type": kind, "matcher": {"exact": value}} for kind, value in self.sans
                ],
            },
            # HTTP/2 over TLS is negotiated: a backend that is asked for h2 must be told so in ALPN.
            "alpn_protocols": ["h2"] if http2 else ["http/1.1"],
        }
        if client is not None:
            context["tls_certificates"] = [
                {"certificate_chain": {"inline_string": client.chain}, "private_key": {"inline_string": client.key}}
            ]
        return {
            "name": "envoy.transport_sockets.tls",
            "typed_config": {"@type": UPSTREAM_TLS_CONTEXT, "sni": self.sni, "common_tls_context": context},
        }


@dataclass
class CheckedPolicy:
    """A policy with what its spec and its references say, before conflicts are settled."""

    policy: BackendTLSPolicy
    tls: UpstreamTLS | None
    """None: the policy cannot be honoured (its backends fail closed)."""
    accepted: tuple[bool, str, str]
    resolved: tuple[bool, str, str]
    conflict: str | None = None
    """The policy it loses a target to (the older), said for the status message."""

    @property
    def key(self) -> ObjectKey:
        return shapes.key(self.policy)


@dataclass(frozen=True)
class Applied:
    """The policy deciding a Service port's TLS, and every policy that asked to (the losers of a conflict too)."""

    policy: CheckedPolicy
    contenders: tuple[CheckedPolicy, ...]


def _certificates(pem: str) -> bool:
    try:
        return bool(x509.load_pem_x509_certificates(pem.encode()))
    except ValueError:
        return False


def check(policy: BackendTLSPolicy, config_map: ConfigMapLookup) -> CheckedPolicy:
    """A policy's Accepted and ResolvedRefs as its spec and its CA references make them, and its TLS when valid."""
    namespace = shapes.ns(policy)
    validation = policy["spec"]["validation"]
    resolved: tuple[bool, str, str] = (True, "ResolvedRefs", "")
    ca_pem: str | None = None
    ca_file: str | None = None
    refs = validation.get("caCertificateRefs") or []
    well_known = validation.get("wellKnownCACertificates")
    invalid: tuple[bool, str, str] | None = None
    if refs:
        bundles: list[str] = []
        problems: list[tuple[str, str]] = []
        for i, ref in enumerate(refs):
            where = f"validation.caCertificateRefs[{i}]"
            group, kind, name = ref.get("group", ""), ref.get("kind", ""), ref["name"]
            if group != "" or kind != "ConfigMap":
                problems.append(("InvalidKind", f"{where}: {kind}.{group or 'core'} {name}: only ConfigMaps"))
                continue
            found = config_map(namespace, name)
            if found is None:
                problems.append(("InvalidCACertificateRef", f"{where}: ConfigMap {namespace}/{name} not found"))
                continue
            pem = (found.get("data") or {}).get("ca.crt")
            if pem is None:
                problems.append(("InvalidCACertificateRef", f"{where}: ConfigMap {namespace}/{name} has no ca.crt"))
                continue
            if not _certificates(pem):
                message = f"{where}: ca.crt of ConfigMap {namespace}/{name} is not a PEM certificate"
                problems.append(("InvalidCACertificateRef", message))
                continue
            bundles.append(pem.strip() + "\n")
        if problems:
            resolved = (False, problems[0][0], "; ".join(message for _, message in problems))
        if bundles:
            ca_pem = "".join(bundles)
        else:
            invalid = (False, "NoValidCACertificate", resolved[2])
    elif well_known == SYSTEM:
        ca_file = SYSTEM_CA_FILE
    else:
        what = f"wellKnownCACertificates {well_known!r}" if well_known else "no caCertificateRefs"
        invalid = (False, "Invalid", f"{what}: the trusted CAs are ConfigMaps' ca.crt, or the System set")
    options = sorted(policy["spec"].get("options") or {})
    if invalid is None and options:
        invalid = (False, "Invalid", f"options.{options[0]} is not supported by this data plane")
    if invalid is not None:
        return CheckedPolicy(policy, None, invalid, resolved)
    sans = tuple(
        ("DNS", san.get("hostname", "")) if san["type"] == "Hostname" else ("URI", san.get("uri", ""))
        for san in validation.get("subjectAltNames") or []
    ) or (("DNS", validation["hostname"]),)
    tls = UpstreamTLS(shapes.key(policy), validation["hostname"], ca_pem, ca_file, sans)
    return CheckedPolicy(policy, tls, (True, "Accepted", ""), resolved)


@dataclass
class BackendTLS:
    """The cluster's BackendTLSPolicies, by the Service (and port) each targets."""

    policies: list[BackendTLSPolicy] = field(default_factory=list)
    config_map: ConfigMapLookup = lambda namespace, name: None

    def __post_init__(self) -> None:
        self.checked = [check(p, self.config_map) for p in sorted(self.policies, key=shapes.age_key)]
        self._targets: dict[Target, list[CheckedPolicy]] = defaultdict(list)
        for checked in self.checked:
            namespace = shapes.ns(checked.policy)
            targets = {
                (namespace, ref["name"], ref.get("sectionName") or None)
                for ref in checked.policy["spec"]["targetRefs"]
                if ref.get("group", "") == "" and ref.get("kind") == "Service"
            }
            for target in sorted(targets, key=str):
                self._targets[target].append(checked)
        for contenders in self._targets.values():
            winner = contenders[0]  # oldest first, then by namespace/name: the spec's precedence
            for loser in contenders[1:]:
                loser.conflict = loser.conflict or f"{shapes.ns(winner.policy)}/{shapes.name(winner.policy)}"

    def applied(self, namespace: str, service: str, port_name: str | None) -> Applied | None:
        """The policy for a port of a Service: one naming the port wins over one for the whole Service."""
        contenders = (port_name is not None and self._targets.get((namespace, service, port_name))) or (
            self._targets.get((namespace, service, None))
        )
        if not contenders:
            return None
        return Applied(contenders[0], tuple(contenders))

    def statuses(
        self, ancestors: dict[ObjectKey, set[ObjectKey]], controller_of: Mapping[ObjectKey, str]
    ) -> dict[ObjectKey, list[PolicyAncestorStatus]]:
        """This controller's status.ancestors of every policy: one entry per Gateway of the class whose routes send
        to a backend the policy (or a policy it conflicts with) targets; none for a policy no such route uses."""
        out: dict[ObjectKey, list[PolicyAncestorStatus]] = {}
        for checked in self.checked:
            gateways = sorted(ancestors.get(checked.key, set()))[:MAX_ANCESTORS]
            out[checked.key] = [
                {
                    "ancestorRef": {"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": ns, "name": name},
                    "controllerName": controller_of[(ns, name)],
                    "conditions": _conditions(checked),
                }
                for ns, name in gateways
            ]
        return out


def _conditions(checked: CheckedPolicy) -> list[Condition]:
    observed = shapes.generation(checked.policy)
    if checked.conflict is not None:
        message = f"the older BackendTLSPolicy {checked.conflict} targets the same Service and port"
        accepted = condition("Accepted", False, "Conflicted", message, observed)
    else:
        accepted = condition("Accepted", *checked.accepted, observed)
    return [accepted, condition("ResolvedRefs", *checked.resolved, observed)]


def config_map_refs(policies: Iterable[BackendTLSPolicy]) -> set[ObjectKey]:
    """The ConfigMaps the policies name as CAs (what `BackendTLS.config_map` is asked)."""
    return {
        (shapes.ns(policy), ref["name"])
        for policy in policies
        for ref in policy["spec"]["validation"].get("caCertificateRefs") or []
        if ref.get("group", "") == "" and ref.get("kind") == "ConfigMap"
    }


def backend_services(route: Route) -> set[tuple[str, str, int | None]]:
    """(namespace, Service, port) of every Service a route sends to, mirrors included."""
    namespace = shapes.ns(route)
    refs: list[BackendObjectReference] = []
    for rule in route["spec"].get("rules") or []:
        refs += list(rule.get("backendRefs") or [])
        refs += [f["requestMirror"]["backendRef"] for f in rule.get("filters") or [] if f.get("requestMirror")]
    return {
        (ref.get("namespace") or namespace, ref["name"], ref.get("port"))
        for ref in refs
        if ref.get("group", "") == "" and ref.get("kind", "Service") == "Service"
    }
