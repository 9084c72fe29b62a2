"""CacheRule `vary`: how the response's Vary header shapes the cache key, as the spec lists it and as Cloudflare's
`set_cache_settings` takes it (headers keyed by lowercase name)."""

from __future__ import annotations

from typing import Any

from app.api.rules.cache import CacheRule
from app.api.validation import validate_object
from reconcilers.rules import CacheRuleKind

BASE: dict[str, Any] = {
    "apiVersion": "kflare.dev/v1alpha1",
    "kind": "CacheRule",
    "metadata": {"name": "assets", "namespace": "demo"},
    "spec": {"zoneRef": {"name": "zone"}, "expression": 'http.request.uri.path.extension eq "jpg"', "cache": True},
}


def manifest(vary: Any) -> dict[str, Any]:
    return {**BASE, "spec": {**BASE["spec"], "vary": vary}}


def test_vary_is_sent_in_cloudflares_shape() -> None:
    vary = {
        "default": {"action": "passthrough"},
        "headers": [
            {"name": "accept-language", "action": "normalize", "languages": ["en", "de"]},
            {"name": "accept", "action": "normalize", "mediaTypes": ["image/webp"]},
            {"name": "x-device", "action": "bypass"},
        ],
    }
    assert validate_object("CacheRule", manifest(vary)) == []
    spec = CacheRule.model_validate(manifest(vary)).spec
    parameters = CacheRuleKind.parameters(None, spec)  # type: ignore[arg-type]
    assert parameters == {
        "cache": True,
        "vary": {
            "default": {"action": "passthrough"},
            "headers": {
                "accept-language": {"action": "normalize", "languages": ["en", "de"]},
                "accept": {"action": "normalize", "media_types": ["image/webp"]},
                "x-device": {"action": "bypass"},
            },
        },
    }
    only_default = CacheRule.model_validate(manifest({"default": {"action": "bypass"}})).spec
    assert CacheRuleKind.parameters(None, only_default)["vary"] == {"default": {"action": "bypass"}}  # type: ignore[arg-type,index]


def test_what_cloudflare_would_refuse_is_refused_naming_the_field() -> None:
    def errors(vary: Any) -> list[str]:
        return [str(e) for e in validate_object("CacheRule", manifest(vary))]

    assert any(e.startswith("spec.vary.default: ") for e in errors({"headers": []}))
    assert any(e.startswith("spec.vary.default.action: ") for e in errors({"default": {"action": "sometimes"}}))
    upper = {"default": {"action": "bypass"}, "headers": [{"name": "Accept", "action": "bypass"}]}
    assert any(e.startswith("spec.vary.headers[0].name: ") for e in errors(upper))
    misplaced = {
        "default": {"action": "bypass"},
        "headers": [
            {"name": "accept", "action": "normalize", "languages": ["en"]},
            {"name": "accept-language", "action": "normalize", "mediaTypes": ["image/webp"]},
            {"name": "accept", "action": "bypass"},
        ],
    }
    assert errors(misplaced) == [
        "spec.vary.headers[0].languages: languages are for the accept-language header only",
        "spec.vary.headers[1].mediaTypes: media types are for the accept header only",
        "spec.vary.headers[2].name: header accept is listed twice",
    ]
