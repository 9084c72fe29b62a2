"""Object metadata, conditions and the status every kind shares."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_serializer, field_validator

from app.api.base import KflareModel
from app.api.constants import READY

ConditionStatus = Literal["True", "False", "Unknown"]

CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def rfc3339(moment: datetime) -> str:
    """A Kubernetes timestamp: UTC, whole seconds (`2026-10-26T12:00:00Z`)."""
    return _utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


class ObjectMeta(KflareModel):
    """The part of Kubernetes object metadata kflare reads."""

    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    finalizers: list[str] = Field(default_factory=list)

    @field_validator("labels", "annotations", "finalizers", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object, info: ValidationInfo) -> object:
        # Kubernetes sends `null` for an empty map or list now and then; read it as empty.
        if value is None:
            return [] if info.field_name == "finalizers" else {}
        return value

    @property
    def deleting(self) -> bool:
        return self.deletion_timestamp is not None


class Condition(KflareModel):
    """An observation of the object's state, as the Kubernetes API conventions define it."""

    type: Annotated[str, Field(max_length=316, pattern=CONDITION_TYPE_PATTERN)]
    """Type of the condition; kflare reports `Ready`."""
    status: ConditionStatus
    """Status of the condition: True, False or Unknown."""
    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=REASON_PATTERN)]
    """Machine-readable reason for the condition's last transition, in CamelCase."""
    message: Annotated[str, Field(max_length=32768)] = ""
    """Human-readable details about the transition."""
    observed_generation: Annotated[int, Field(ge=0)] | None = None
    """The object's `metadata.generation` the condition was set for."""
    last_transition_time: datetime
    """When the condition last changed its status."""

    @field_serializer("last_transition_time")
    def _whole_seconds(self, moment: datetime) -> str:
        return rfc3339(moment)


class Status(KflareModel):
    """Base of every kind's status: the conditions, and helpers to keep them per the API conventions."""

    conditions: Annotated[
        list[Condition],
        Field(
            max_length=16,
            json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
        ),
    ] = Field(default_factory=list)
    """Conditions of the object; kflare reports one, `Ready`."""

    @field_validator("conditions", mode="before")
    @classmethod
    def _null_conditions(cls, value: object) -> object:
        return [] if value is None else value

    def condition(self, type_: str = READY) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    @property
    def ready(self) -> bool:
        found = self.condition(READY)
        return found is not None and found.status == "True"

    def set_condition(
        self,
        status: ConditionStatus,
        reason: str,
        message: str = "",
        *,
        observed_generation: int | None = None,
        type_: str = READY,
        now: datetime | None = None,
    ) -> bool:
        """Set a condition; `lastTransitionTime` moves only when the status changes. True if anything changed."""
        old = self.condition(type_)
        if (
            old is not None
            and old.status == status
            and old.reason == reason
            and old.message == message
            and old.observed_generation == observed_generation
        ):
            return False
        moment = now or datetime.now(UTC)
        if old is not None and old.status == status:
            moment = old.last_transition_time
        new = Condition(
            type=type_,
            status=status,
            reason=reason,
            message=message,
            observed_generation=observed_generation,
            last_transition_time=_utc(moment).replace(microsecond=0),
        )
        if old is None:
            self.conditions = [*self.conditions, new]
        else:
            self.conditions = [new if c.type == type_ else c for c in self.conditions]
        return True
