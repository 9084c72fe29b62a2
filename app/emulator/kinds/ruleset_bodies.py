"""What the ruleset endpoints take: a ruleset's and a rule's body, a state-file entry, and where a rule goes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from app.emulator.envelope import pointer_of
from app.emulator.kinds.rule_checks import refused
from app.emulator.state import Obj


class RuleInput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    ref: str | None = None
    action: str | None = None
    expression: str | None = None
    description: str = ""
    enabled: bool = True
    action_parameters: dict[str, JsonValue] | None = None
    ratelimit: dict[str, JsonValue] | None = None
    logging: dict[str, JsonValue] | None = None
    position: dict[str, JsonValue] | None = None


class RulesetInput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str | None = None
    description: str | None = None
    kind: Literal["managed", "custom", "root", "zone"] | None = None
    phase: str | None = None
    rules: list[dict[str, JsonValue]] = []


class RulesetSeed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    zone_id: str | None = None
    id: str | None = None
    name: str = "default"
    description: str = ""
    kind: Literal["zone"] = "zone"
    phase: str
    version: str | None = None
    last_updated: str | None = None
    rules: list[dict[str, JsonValue]] = []
    history: list[dict[str, JsonValue]] | None = None


def parse_rule(raw: object) -> RuleInput:
    try:
        return RuleInput.model_validate(raw)
    except ValidationError as exc:
        message, pointer = pointer_of(exc)
        raise refused(message, pointer) from None


def parse_ruleset(raw: object) -> RulesetInput:
    try:
        return RulesetInput.model_validate(raw)
    except ValidationError as exc:
        message, pointer = pointer_of(exc)
        raise refused(message, pointer) from None


def place(rules: list[Obj], rule: Obj, position: dict[str, JsonValue] | None) -> list[Obj]:
    """``rule`` put among ``rules`` where ``position`` says (the end without one)."""
    if not position:
        return [*rules, rule]
    if len(position) != 1:
        raise refused("position takes exactly one of before, after and index", "/position")
    ((where, value),) = position.items()
    ids = [r["id"] for r in rules]
    if where == "index":
        if not isinstance(value, int) or value < 1:
            raise refused("position.index is a number from 1", "/position/index")
        index = min(value - 1, len(rules))
    elif where in ("before", "after") and isinstance(value, str):
        if value == "":
            index = 0 if where == "before" else len(rules)
        elif value in ids:
            index = ids.index(value) + (1 if where == "after" else 0)
        else:
            raise refused(f"position.{where} names no rule of this ruleset", f"/position/{where}")
    else:
        raise refused("position takes before, after or index", "/position")
    return [*rules[:index], rule, *rules[index:]]
