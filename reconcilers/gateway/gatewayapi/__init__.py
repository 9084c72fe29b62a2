"""Gateway API objects to the IR (`reconcilers.gateway.ir`): the stage that decides every status.

- `world`: what the translation reads (`World`), and which Secrets the caches are asked for;
- `status`: which GatewayClasses the class serves and whether each is accepted, each Gateway's conditions and
  listeners (what a route may attach to);
- `listener_sets`: which ListenerSets a Gateway takes, their listeners merged after its own (precedence, conflicts),
  and their conditions;
- `https_listeners`: the certificates each data plane serves clients reaching it directly, by SNI;
- `attach`: a route's attachment to listeners, the hostnames it serves, who owns a hostname several routes claim;
- `route_shapes`: the shapes of a route's rules, matches, filters and backendRefs;
- `rules` (over `route_matches` and `route_filters`): a route's rules as routes, refusing what the data plane does
  not implement;
- `backends` (with `policies`, the BackendTLSPolicies): a route's backendRefs resolved to clusters;
- `builds`: a route's build (its rules and backends), remembered per route version: the incremental rebuild;
- `routes`: every route's attachments with the statuses its build decides;
- `to_ir`: the classes' and Gateways' statuses (`status`), the ListenerSets' (`listener_sets`), the planes' virtual
  hosts and clusters, the BackendTLSPolicies' ancestors and the hostnames published.
"""

from reconcilers.gateway.gatewayapi.attach import hostname_matches
from reconcilers.gateway.gatewayapi.to_ir import class_statuses, to_ir
from reconcilers.gateway.gatewayapi.world import (
    DNS_PUBLISHING_ANNOTATION,
    World,
    certificate_refs,
    publishes_dns,
)

__all__ = [
    "DNS_PUBLISHING_ANNOTATION",
    "World",
    "certificate_refs",
    "class_statuses",
    "hostname_matches",
    "publishes_dns",
    "to_ir",
]
