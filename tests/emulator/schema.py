"""Checks that an emulator reply fits the official SDK's models strictly, not just leniently.

The SDK builds its models without validation, so a reply missing a required field still "parses". Re-validating the
dumped model with pydantic catches that. Some SDK methods answer plain dicts: those typed as a union of a model and
``object``, such as the ruleset writes. :func:`conforms` then validates the dict against that model.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel


def conforms(obj: Any, model: Any = None) -> Any:
    """Validate ``obj`` (an SDK model instance, or a dict with the type the SDK declares for it) and return it as a
    model instance."""
    if isinstance(obj, dict):
        candidates = [model, *typing.get_args(model)]
        concrete = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        assert concrete, f"{model!r} names no model to validate a plain answer against"
        return concrete[0].model_validate(obj)
    kind = type(obj)
    kind.model_validate(obj.model_dump(mode="json", exclude_unset=True))
    return obj
