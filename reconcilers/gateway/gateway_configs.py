"""What a Gateway's own data plane (`reconcilers.gateway.planes`) takes of the cloudflare-tunnel-gateway-controller
GatewayConfig its parametersRef names: what it gives in a GatewayParameters' terms, where its connector token is, and
the account its tunnel is adopted under (the one derived from the GatewayClassConfig of the Gateway's class,
`reconcilers.gateway.package`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import ValidationError

from app.api.tunnel_gateway_package import TUNNEL_TOKEN_KEY, GatewayConfig, GatewayConfigSpec
from reconcilers.gateway import raw, shapes
from reconcilers.gateway.kinds import CLASS_CONFIG_KIND, PACKAGE_GROUP, Classes, derived_name


def config_parameters(
    config: Mapping[str, object] | None,
    gateway: Mapping[str, object],
    ref: Mapping[str, object],
    accounts: Mapping[str, str],
) -> tuple[Mapping[str, object], tuple[str, str]] | str:
    """A GatewayConfig's plane in a GatewayParameters' terms, and where its connector token is; or why the Gateway
    cannot have it."""
    where = f"{GatewayConfig.info.kind} {shapes.ns(gateway)}/{ref.get('name')}"
    if config is None:
        return f"spec.infrastructure.parametersRef: {where} not found"
    given = raw.mapping(config.get("spec"))
    try:
        spec = GatewayConfigSpec.model_validate(given)
    except ValidationError as exc:
        first = exc.errors()[0]
        return f"{where} is not valid: spec.{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    if spec.autoscaling is not None:
        return f"{where} asks for autoscaling, which kflare does not do: give spec.replicas instead"
    if spec.cloudflare_credentials_secret_ref is not None:
        # Other credentials usually mean a tunnel in another account: the class's would not reach it, or act on
        # another account than the one asked for.
        return (
            f"{where} gives cloudflareCredentialsSecretRef, which kflare does not read (the tunnel is adopted with the"
            f" credentials of the class's {CLASS_CONFIG_KIND}): remove it when those reach the tunnel"
        )
    class_name = raw.text(gateway, "spec", "gatewayClassName")
    account = accounts.get(class_name)
    if account is None:
        return (
            f"{where}: a GatewayConfig's tunnel is adopted under the account of its class's {CLASS_CONFIG_KIND}, and"
            f" GatewayClass {class_name} names none"
        )
    # Envoy's resources as the package gives them (a Kubernetes ResourceRequirements), and its default of 2 replicas.
    parameters: dict[str, object] = {"accountRef": {"name": account}, "replicas": spec.replicas or 2}
    if given.get("resources"):
        parameters["resources"] = given["resources"]
    secret = spec.tunnel_token_secret_ref
    return parameters, (secret.name, secret.key or TUNNEL_TOKEN_KEY)


def class_accounts(classes: Iterable[Mapping[str, object]], served: Classes) -> dict[str, str]:
    """Of this controller's classes naming a GatewayClassConfig: class name -> the CloudflareAccount derived from it
    (`reconcilers.gateway.package`), under which a GatewayConfig's plane adopts its tunnel."""
    out: dict[str, str] = {}
    if served.package_namespace is None:
        return out
    for cls in classes:
        ref = raw.mapping(raw.at(cls, "spec", "parametersRef"))
        if served.ours(cls) and ref.get("group") == PACKAGE_GROUP and ref.get("kind") == CLASS_CONFIG_KIND:
            out[shapes.name(cls)] = derived_name(str(ref.get("name") or ""))
    return out
