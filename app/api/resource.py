"""The base of every kind: `Resource[SpecT, StatusT]` plus the class-level facts its CRD is generated from."""

from __future__ import annotations

import functools
from typing import ClassVar, Generic, Self, TypeVar, cast

from pydantic import BaseModel, Field, model_validator

from app.api.base import API_VERSION, KflareModel, KindInfo, Problems
from app.api.meta import ObjectMeta, Status

# Covariant, so that every kind is an `AnyResource`: code that handles any kind reads what all specs and statuses share.
SpecT = TypeVar("SpecT", bound=KflareModel, covariant=True)
StatusT = TypeVar("StatusT", bound=Status, covariant=True)


class Resource(KflareModel, Generic[SpecT, StatusT]):
    """A kflare custom resource.

    A kind is a subclass `class Zone(Resource[ZoneSpec, ZoneStatus])` with `info = KindInfo(...)`; its docstring
    describes the kind in the CRD. A missing `status` reads as an empty one, so reconcilers can always write to it.
    """

    info: ClassVar[KindInfo]

    api_version: str = API_VERSION
    """APIVersion defines the versioned schema of this representation of an object."""
    kind: str = ""
    """Kind is a string value representing the REST resource this object represents."""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SpecT
    status: StatusT

    @model_validator(mode="before")
    @classmethod
    def _fill_in(cls, data: object) -> object:
        if isinstance(data, dict):
            data = dict(data)
            if not data.get("kind"):
                data["kind"] = cls.info.kind
            if data.get("status") is None:
                data["status"] = {}
        return data

    @model_validator(mode="after")
    def _identity(self) -> Self:
        problems = Problems()
        if self.api_version != API_VERSION:
            problems.add("apiVersion", f"must be {API_VERSION}", self.api_version)
        if self.kind != self.info.kind:
            problems.add("kind", f"must be {self.info.kind}", self.kind)
        problems.raise_if_any(type(self).__name__)
        return self

    @classmethod
    def spec_model(cls) -> type[KflareModel]:
        return cast(type[KflareModel], _field_type(cls, "spec"))

    @classmethod
    def status_model(cls) -> type[Status]:
        return cast(type[Status], _field_type(cls, "status"))

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace

    @property
    def key(self) -> str:
        """`namespace/name`, or `name` for a cluster-scoped kind."""
        return f"{self.metadata.namespace}/{self.metadata.name}" if self.metadata.namespace else self.metadata.name


AnyResource = Resource[KflareModel, Status]
ResourceClass = type[Resource[KflareModel, Status]]


@functools.cache
def _field_type(model: type[BaseModel], name: str) -> object:
    """The declared type of a model's field: pydantic builds `model_fields` anew on each access from the class, and
    the webhook asks for a kind's spec model on every review."""
    return model.model_fields[name].annotation
