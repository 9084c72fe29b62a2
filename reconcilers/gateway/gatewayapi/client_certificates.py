"""The certificates a Gateway names besides its listeners' own: the one its data plane presents to backends it speaks
TLS to (`spec.tls.backend.clientCertificateRef`), and the CAs its HTTPS listeners check clients' certificates against
(`spec.tls.frontend`: a default, and per port), each resolved as the spec asks and said in the status when it does
not resolve. Also the listeners' certificateRefs' checks, which read the same Secrets and ReferenceGrants."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from reconcilers.gateway import shapes
from reconcilers.gateway.gateway_api import (
    GatewaySpecTlsBackendClientCertificateRef,
    GatewaySpecTlsFrontendDefaultValidation,
)
from reconcilers.gateway.gatewayapi.policies import ClientCertificate
from reconcilers.gateway.ir import ClientValidation
from reconcilers.gateway.shapes import Gateway

INSECURE_FALLBACK = "AllowInsecureFallback"


@dataclass(frozen=True)
class Certificates:
    """What checking a Gateway's certificate references reads: the Secrets, the ReferenceGrants and the ConfigMaps
    (CA bundles)."""

    secret: Callable[[str, str], shapes.Secret | None]
    grants: list[shapes.ReferenceGrant]
    config_map: Callable[[str, str], shapes.ConfigMap | None] = lambda namespace, name: None


SecretRef = shapes.SecretObjectReference | GatewaySpecTlsBackendClientCertificateRef


def _tls_secret(
    gateway: Gateway | shapes.ListenerSet,
    ref: SecretRef,
    where: str,
    invalid: str,
    certificates: Certificates,
    from_kind: str = "Gateway",
) -> tuple[shapes.ObjectKey, str, str] | tuple[str, str]:
    """A Gateway's (or a ListenerSet's, `from_kind`) reference to a TLS Secret, resolved: its key, PEM certificate
    chain and key; or (reason, message) when it does not resolve: not a Secret, missing or without a PEM certificate
    and key (`invalid`), in another namespace no ReferenceGrant from that kind lets it refer to (RefNotPermitted)."""
    namespace = shapes.ns(gateway)
    group, kind, name = ref.get("group", ""), ref.get("kind", "Secret"), ref["name"]
    if group != "" or kind != "Secret":
        return invalid, f"{where}: {kind}.{group or 'core'} {name}: only Secrets"
    target = ref.get("namespace") or namespace
    if target != namespace and not shapes.reference_granted(
        certificates.grants, from_kind, namespace, "Secret", target, name
    ):
        return "RefNotPermitted", f"{where}: Secret {target}/{name}: no ReferenceGrant lets {namespace} in"
    secret = certificates.secret(target, name)
    if secret is None:
        return invalid, f"{where}: Secret {target}/{name} not found"
    pair = _pem_pair(secret)
    if pair is None:
        return invalid, f"{where}: Secret {target}/{name} holds no PEM certificate and key"
    return (target, name), *pair


def certificate_problem(
    owner: Gateway | shapes.ListenerSet, spec: shapes.Listener, certificates: Certificates, from_kind: str = "Gateway"
) -> tuple[str, str] | None:
    """(reason, message) of the first certificateRef of an HTTPS listener that does not resolve (`_tls_secret`,
    InvalidCertificateRef); `owner` is the Gateway or ListenerSet (`from_kind`) declaring the listener: grants to
    one kind do not cover the other."""
    for i, ref in enumerate(spec.get("tls", {}).get("certificateRefs", [])):
        where = f"tls.certificateRefs[{i}]"
        found = _tls_secret(owner, ref, where, "InvalidCertificateRef", certificates, from_kind)
        if len(found) == 2:
            return found
    return None


def _pem_pair(secret: shapes.Secret) -> tuple[str, str] | None:
    """A TLS Secret's certificate chain and private key as PEM, when it holds a usable pair (None: it does not)."""
    data = secret.get("data", {})
    try:
        cert, key = base64.b64decode(data["tls.crt"]), base64.b64decode(data["tls.key"])
        x509.load_pem_x509_certificate(cert)
        serialization.load_pem_private_key(key, password=None)
        return cert.decode(), key.decode()
    except (KeyError, ValueError, TypeError):
        return None


def _backend_ref(gateway: Gateway) -> GatewaySpecTlsBackendClientCertificateRef | None:
    tls = gateway["spec"].get("tls")
    backend = tls.get("backend") if tls is not None else None
    return backend.get("clientCertificateRef") if backend is not None else None


def secret_refs(gateway: Gateway) -> set[shapes.ObjectKey]:
    """The Secrets the Gateway names as certificates, its listeners' and the one it presents to TLS backends (what
    `Certificates.secret` is asked)."""
    backend = _backend_ref(gateway)
    return _secrets(gateway, gateway["spec"].get("listeners", []), [backend] if backend is not None else [])


def listener_set_secret_refs(listener_set: shapes.ListenerSet) -> set[shapes.ObjectKey]:
    """The Secrets a ListenerSet's listeners name as certificates."""
    return _secrets(listener_set, listener_set["spec"].get("listeners", []), [])


def _secrets(
    owner: Gateway | shapes.ListenerSet, listeners: list[shapes.Listener], more: list[SecretRef]
) -> set[shapes.ObjectKey]:
    refs: list[SecretRef] = [
        ref for listener in listeners for ref in listener.get("tls", {}).get("certificateRefs", [])
    ]
    refs += more
    return {
        (ref.get("namespace") or shapes.ns(owner), ref["name"])
        for ref in refs
        if ref.get("group", "") == "" and ref.get("kind", "Secret") == "Secret"
    }


def client_certificate(gateway: Gateway, certificates: Certificates) -> ClientCertificate | tuple[str, str] | None:
    """The certificate the Gateway's data plane presents to TLS backends (`spec.tls.backend.clientCertificateRef`),
    or (reason, message) when the reference does not resolve (`_tls_secret`, InvalidClientCertificateRef). None: the
    Gateway names none."""
    ref = _backend_ref(gateway)
    if ref is None:
        return None
    where = "spec.tls.backend.clientCertificateRef"
    found = _tls_secret(gateway, ref, where, "InvalidClientCertificateRef", certificates)
    if len(found) == 2:
        return found
    return ClientCertificate(*found)


NO_CERTIFICATES = Certificates(lambda namespace, name: None, [])


@dataclass(frozen=True)
class FrontendValidation:
    """How an HTTPS listener checks its clients' certificates (`validation`, None: it does not), and why a reference
    of its CAs does not resolve (`problem`: reason and message); `usable` is False when none does, and the listener
    cannot be served."""

    validation: ClientValidation | None = None
    problem: tuple[str, str] | None = None

    @property
    def usable(self) -> bool:
        return self.problem is None or self.validation is not None


NO_VALIDATION = FrontendValidation()


Validation = GatewaySpecTlsFrontendDefaultValidation


def _validations(gateway: Gateway) -> list[tuple[str, int | None, Validation]]:
    """The Gateway's client certificate validations, each with where it is declared and its port (None: the
    default)."""
    tls = gateway["spec"].get("tls")
    frontend = tls.get("frontend") if tls is not None else None
    if frontend is None:
        return []
    out: list[tuple[str, int | None, Validation]] = []
    default = frontend["default"].get("validation")
    if default is not None:
        out.append(("spec.tls.frontend.default.validation", None, default))
    for i, entry in enumerate(frontend.get("perPort") or []):
        validation = entry["tls"].get("validation")
        if validation is not None:
            out.append((f"spec.tls.frontend.perPort[{i}].tls.validation", entry["port"], validation))
    return out


def _frontend_config(gateway: Gateway, port: int) -> tuple[str, Validation] | None:
    """Where the validation of a listener on `port` is declared, and it: the `perPort` entry of that port, else the
    default."""
    found = _validations(gateway)
    for where, at, validation in found:
        if at == port:
            return where, validation
    return next(((where, validation) for where, at, validation in found if at is None), None)


def frontend_validation(gateway: Gateway, port: int, certificates: Certificates) -> FrontendValidation:
    """The client certificate validation of the Gateway's HTTPS listener on `port`, with the CAs that resolve: a
    ConfigMap's `ca.crt` of PEM certificates, in the Gateway's namespace or another whose ReferenceGrant lets it in.
    A reference that is not a ConfigMap is InvalidCACertificateKind, one not let in RefNotPermitted, one missing or
    without a certificate InvalidCACertificateRef; the first such is said."""
    found = _frontend_config(gateway, port)
    if found is None:
        return NO_VALIDATION
    where, config = found
    namespace = shapes.ns(gateway)
    bundles: list[str] = []
    problem: tuple[str, str] | None = None
    for i, ref in enumerate(config["caCertificateRefs"]):
        at = f"{where}.caCertificateRefs[{i}]"
        group, kind, name = ref["group"], ref["kind"], ref["name"]
        target = ref.get("namespace") or namespace
        if group != "" or kind != "ConfigMap":
            found_problem = ("InvalidCACertificateKind", f"{at}: {kind}.{group or 'core'} {name}: only ConfigMaps")
        elif target != namespace and not shapes.reference_granted(
            certificates.grants, "Gateway", namespace, "ConfigMap", target, name
        ):
            found_problem = (
                "RefNotPermitted",
                f"{at}: ConfigMap {target}/{name}: no ReferenceGrant lets {namespace} in",
            )
        else:
            config_map = certificates.config_map(target, name)
            pem = config_map.get("data", {}).get("ca.crt", "") if config_map is not None else ""
            if pem and _holds_certificates(pem):
                bundles.append(pem.strip() + "\n")
                continue
            what = "not found" if config_map is None else "has no PEM certificate under ca.crt"
            found_problem = ("InvalidCACertificateRef", f"{at}: ConfigMap {target}/{name} {what}")
        problem = problem or found_problem
    validation = (
        ClientValidation("".join(bundles), required=config.get("mode", "AllowValidOnly") != INSECURE_FALLBACK)
        if bundles
        else None
    )
    if validation is None and problem is None:
        problem = ("InvalidCACertificateRef", f"{where}: no caCertificateRefs")
    return FrontendValidation(validation, problem)


def insecure_fallback(gateway: Gateway) -> bool:
    """Whether any of the Gateway's client certificate validations lets clients in without a valid certificate."""
    return any(validation.get("mode") == INSECURE_FALLBACK for _, _, validation in _validations(gateway))


def frontend_config_maps(gateway: Gateway) -> set[shapes.ObjectKey]:
    """The ConfigMaps the Gateway's client certificate validations name (what `Certificates.config_map` is asked)."""
    return {
        (ref.get("namespace") or shapes.ns(gateway), ref["name"])
        for _, _, validation in _validations(gateway)
        for ref in validation["caCertificateRefs"]
        if ref["group"] == "" and ref["kind"] == "ConfigMap"
    }


def _holds_certificates(pem: str) -> bool:
    try:
        return bool(x509.load_pem_x509_certificates(pem.encode()))
    except ValueError:
        return False
