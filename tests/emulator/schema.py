"""Checks that an emulator reply fits the official SDK's models strictly, not just leniently.

The SDK builds its models without validation, so a reply missing a required field still "parses". Re-validating the
dumped model with pydantic catches that.
"""

from __future__ import annotations

from typing import Any


def conforms(obj: Any) -> Any:
    """Validate ``obj`` (an SDK model instance) against its own class and return it."""
    model = type(obj)
    model.model_validate(obj.model_dump(mode="json", exclude_unset=True))
    return obj
