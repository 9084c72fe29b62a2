"""A rule with a typo in its expression is denied at admission, with the field, the position and a hint.

The rule kinds are built elsewhere; a test-only kind with an `expression` checked the way theirs is stands in.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import model_validator

from app.api import GROUP, VERSION, KflareModel, KindInfo
from app.api.base import Problems
from app.api.expressions import check_expression
from app.api.meta import Status
from app.api.resource import Resource
from webhooks.review import AdmissionRequest
from webhooks.validate import decide


class ExampleRuleSpec(KflareModel):
    expression: str

    @model_validator(mode="after")
    def _check_expression(self) -> Self:
        problems = Problems()
        for error in check_expression(self.expression, "http_request_firewall_custom"):
            problems.add("expression", str(error), self.expression)
        problems.raise_if_any("expression")
        return self


class ExampleRule(Resource[ExampleRuleSpec, Status]):
    info = KindInfo(kind="ExampleRule", plural="examplerules")


def review(expression: str) -> AdmissionRequest:
    obj: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ExampleRule",
        "metadata": {"name": "block-admin", "namespace": "web"},
        "spec": {"expression": expression},
    }
    return AdmissionRequest.model_validate(
        {
            "uid": "4f7c2a",
            "kind": {"group": GROUP, "version": VERSION, "kind": "ExampleRule"},
            "operation": "CREATE",
            "object": obj,
        }
    )


def test_a_typo_is_denied_with_its_position() -> None:
    decision = decide(ExampleRule, review('http.hots eq "admin.example.com" and not ip.src in $office'))
    assert not decision.allowed
    assert decision.status is not None
    assert decision.status.code == 422
    assert decision.message == 'spec.expression: unknown field "http.hots" at 1; did you mean "http.host"?'


def test_every_mistake_is_listed() -> None:
    decision = decide(ExampleRule, review('http.host eq "a" and ip.src.asnum eq "13335" and cf.thret_score gt 1'))
    assert decision.message == (
        "spec.expression: expected an integer to compare with, found a string at 38; write 13335 without quotes;"
        ' spec.expression: unknown field "cf.thret_score" at 50; did you mean "cf.threat_score"?'
    )


def test_an_unbalanced_expression_is_denied() -> None:
    decision = decide(ExampleRule, review('(http.host eq "a" or ssl'))
    assert decision.message.startswith('spec.expression: "(" is never closed at 1')


def test_a_valid_expression_is_allowed() -> None:
    decision = decide(ExampleRule, review('any(http.request.headers["x-debug"][*] == "1") or ip.src in $office'))
    assert decision.allowed
