"""The statuses the Gateway API stage decides, as the class writes them: a GatewayClass's, a Gateway's (with its
listeners') and a ListenerSet's."""

from typing import NotRequired, TypedDict

from reconcilers.gateway.features import SupportedFeature
from reconcilers.gateway.shapes import Condition


class ClassStatus(TypedDict):
    conditions: list[Condition]
    supportedFeatures: list[SupportedFeature]


class SupportedKind(TypedDict):
    group: str
    kind: str


class ListenerStatus(TypedDict):
    name: str
    supportedKinds: list[SupportedKind]
    attachedRoutes: int
    conditions: list[Condition]


class GatewayAddress(TypedDict):
    type: str
    value: str


class GatewayStatus(TypedDict):
    conditions: list[Condition]
    listeners: list[ListenerStatus]
    attachedListenerSets: int
    addresses: NotRequired[list[GatewayAddress]]


class ListenerSetStatus(TypedDict):
    conditions: list[Condition]
    listeners: list[ListenerStatus]
