"""The Rules language as Cloudflare documents it: its types, the phases kflare writes rules to, the fields each
phase offers and the functions each allows.

Types: String (and Bytes, which the language treats alike), Integer, Boolean, IP address, Array<T>, Map<T>. The
fields a phase offers (`PHASE_SCOPES`, `ROLE_SCOPES`) and the functions a phase allows (`FUNCTION_SPECS`) follow
Cloudflare's documentation; what depends on the zone's plan is left to Cloudflare.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

MAX_LENGTH: Final = 4096
"""Characters of one expression, Cloudflare's limit on every plan."""

Role = Literal["filter", "counting", "rewrite"]
"""What an expression is for: a rule's filter (a Boolean), a rate limiting rule's counting expression (a Boolean
that may read the response), or a rewrite value (a String: a URL rewrite, a header value, a redirect's target)."""

PHASES: Final = (
    "http_request_firewall_custom",
    "http_ratelimit",
    "http_request_transform",
    "http_request_late_transform",
    "http_response_headers_transform",
    "http_request_dynamic_redirect",
    "http_request_cache_settings",
    "http_config_settings",
    "http_request_origin",
    "http_request_firewall_managed",
)


# Types.


@dataclass(frozen=True, slots=True)
class Type:
    name: str
    """String, Bytes, Integer, Boolean, IP, Array, Map, or ? (unknown: already reported, checks nothing)."""
    of: Type | None = None

    def __str__(self) -> str:
        name = "IP address" if self.name == "IP" else self.name
        return f"{name}<{self.of}>" if self.of is not None else name


STRING: Final = Type("String")
BYTES: Final = Type("Bytes")
INTEGER: Final = Type("Integer")
BOOLEAN: Final = Type("Boolean")
IP: Final = Type("IP")
UNKNOWN: Final = Type("?")
BOOLEANS: Final = Type("Array", BOOLEAN)


def _parse_type(text: str) -> Type:
    text = text.strip()
    if text.endswith(">"):
        outer, _, inner = text[:-1].partition("<")
        return Type(outer, _parse_type(inner))
    return {"Number": INTEGER, "Integer": INTEGER, "IP address": IP, "String": STRING, "Bytes": BYTES}.get(
        text, Type(text)
    )


def is_text(t: Type) -> bool:
    return t.name in ("String", "Bytes", "?")


def is_type(t: Type, *names: str) -> bool:
    return t.name == "?" or t.name in names


TYPE_NAMES: Final = {
    "String": "a string",
    "Bytes": "a string",
    "Integer": "an integer",
    "Boolean": "a Boolean",
    "IP": "an IP address",
    "Array": "an array",
    "Map": "a map",
}


def article(type_: Type) -> str:
    if type_.of is not None:
        return f"{'an' if type_.name == 'Array' else 'a'} {type_}"
    return TYPE_NAMES.get(type_.name, str(type_))


# The field catalogue: Cloudflare's documented fields, with the scope that says which phases offer them.
#   request: every phase; body: the WAF phases; response: response phases and a rate limit's counting expression;
#   response_error: response header transforms only; transform: transform rules only; rewrite: rewrite values of
#   transform rules only.

_CATALOGUE: Final = """
request String: http.cookie http.host http.referer http.request.full_uri http.request.method http.request.uri
 http.request.uri.path http.request.uri.path.extension http.request.uri.query http.user_agent http.request.version
 http.x_forwarded_for ip.src.lat ip.src.lon ip.src.city ip.src.postal_code ip.src.metro_code ip.src.region
 ip.src.region_code ip.src.continent ip.src.country ip.src.subdivision_1_iso_code ip.src.subdivision_2_iso_code
 ip.geoip.continent ip.geoip.country ip.geoip.subdivision_1_iso_code ip.geoip.subdivision_2_iso_code
 raw.http.request.full_uri raw.http.request.uri raw.http.request.uri.path raw.http.request.uri.path.extension
 raw.http.request.uri.query cf.verified_bot_category cf.bot_management.ja3_hash cf.bot_management.ja4
 cf.hostname.metadata cf.ray_id cf.tls_cipher cf.tls_version cf.tls_client_random cf.tls_client_extensions_sha1
 cf.tls_client_extensions_sha1_le cf.tls_ciphers_sha1 cf.tls_client_ciphers_sha1 cf.tls_client_auth.cert_issuer_dn
 cf.tls_client_auth.cert_subject_dn cf.tls_client_auth.cert_issuer_dn_rfc2253 cf.tls_client_auth.cert_subject_dn_rfc2253
 cf.tls_client_auth.cert_issuer_dn_legacy cf.tls_client_auth.cert_subject_dn_legacy cf.tls_client_auth.cert_serial
 cf.tls_client_auth.cert_issuer_serial cf.tls_client_auth.cert_fingerprint_sha256
 cf.tls_client_auth.cert_fingerprint_sha1 cf.tls_client_auth.cert_not_before cf.tls_client_auth.cert_not_after
 cf.tls_client_auth.cert_ski cf.tls_client_auth.cert_issuer_ski cf.tls_client_auth.cert_rfc9440
 cf.tls_client_auth.cert_chain_rfc9440 cf.waf.score.class cf.worker.upstream_zone cf.zone.name cf.zone.plan
 cf.metal.id
request Integer: http.request.timestamp.sec http.request.timestamp.msec ip.src.asnum ip.geoip.asnum
 cf.bot_management.score cf.edge.server_port cf.edge.client_port cf.threat_score cf.tls_client_hello_length
 cf.edge.l4.delivery_rate cf.timings.client_tcp_rtt_msec cf.timings.client_quic_rtt_msec cf.waf.score
 cf.waf.score.sqli cf.waf.score.xss cf.waf.score.rce cf.waf.content_scan.num_malicious_obj
 cf.waf.content_scan.num_obj cf.llm.prompt.injection_score cf.llm.prompt.token_count cf.colo.id
 cf.bot_detection.js_check_score
request Boolean: ssl ip.src.is_in_european_union ip.geoip.is_in_european_union cf.api_gateway.auth_id_present
 cf.api_gateway.request_violates_schema cf.schema_validation.learned.violated cf.schema_validation.uploaded.violated
 cf.api_gateway.fallthrough_detected cf.bot_management.verified_bot cf.bot_management.static_resource
 cf.bot_management.js_detection.passed cf.client.bot cf.bot_management.corporate_proxy
 cf.bot_management.signed_agent cf.tls_client_auth.cert_revoked cf.tls_client_auth.cert_verified
 cf.tls_client_auth.cert_presented cf.tls_client_auth.cert_rfc9440_too_large
 cf.tls_client_auth.cert_chain_rfc9440_too_large cf.edge.client_tcp cf.waf.content_scan.has_obj
 cf.waf.content_scan.has_malicious_obj cf.waf.content_scan.has_failed cf.waf.auth_detected
 cf.waf.credential_check.password_leaked cf.waf.credential_check.username_leaked
 cf.waf.credential_check.username_and_password_leaked cf.waf.credential_check.username_password_similar
 cf.llm.prompt.detected cf.llm.prompt.pii_detected cf.llm.prompt.unsafe_topic_detected http.request.headers.truncated
request IP address: ip.src cf.edge.server_ip
request Bytes: cf.random_seed
request Array<Integer>: cf.bot_management.detection_ids cf.waf.content_scan.obj_sizes
 http.request.jwt.claims.iat.sec.values http.request.jwt.claims.nbf.sec.values
request Array<String>: cf.waf.content_scan.obj_types cf.waf.content_scan.obj_results cf.llm.prompt.pii_categories
 cf.llm.prompt.unsafe_topic_categories http.request.jwt.claims.aud.names http.request.jwt.claims.aud.values
 http.request.jwt.claims.iat.sec.names http.request.jwt.claims.nbf.sec.names http.request.jwt.claims.iss.names
 http.request.jwt.claims.iss.values http.request.jwt.claims.jti.names http.request.jwt.claims.jti.values
 http.request.jwt.claims.sub.names http.request.jwt.claims.sub.values http.request.uri.args.names
 http.request.uri.args.values raw.http.request.uri.args.names raw.http.request.uri.args.values
 http.request.headers.names http.request.headers.values raw.http.request.headers.names
 raw.http.request.headers.values
request Map<Integer>: cf.llm.prompt.custom_topic_categories
request Map<Array<String>>: http.request.cookies http.request.jwt.claims.aud http.request.jwt.claims.iss
 http.request.jwt.claims.jti http.request.jwt.claims.sub http.request.uri.args raw.http.request.uri.args
 http.request.headers raw.http.request.headers
request Map<Array<Integer>>: http.request.jwt.claims.iat.sec http.request.jwt.claims.nbf.sec
body String: http.request.body.raw http.request.body.mime
body Boolean: http.request.body.truncated
body Integer: http.request.body.size
body Map<Array<String>>: http.request.body.form http.request.body.multipart
body Array<String>: http.request.body.form.names http.request.body.form.values http.request.body.multipart.values
body Array<Array<String>>: http.request.body.multipart.names http.request.body.multipart.content_types
 http.request.body.multipart.content_dispositions http.request.body.multipart.content_transfer_encodings
 http.request.body.multipart.filenames
transform Array<String>: http.request.accepted_languages
rewrite String: ip.src.timezone.name
response Integer: http.response.code cf.timings.edge_msec cf.timings.origin_ttfb_msec cf.timings.worker_msec
response String: http.response.content_type.media_type
response Map<Array<String>>: http.response.headers raw.http.response.headers
response Array<String>: http.response.headers.names http.response.headers.values raw.http.response.headers.names
 raw.http.response.headers.values
response_error Integer: cf.response.1xxx_code
response_error String: cf.response.error_type
"""


def _catalogue(text: str) -> dict[str, tuple[Type, str]]:
    out: dict[str, tuple[Type, str]] = {}
    for entry in re.split(r"\n(?=\S)", text.strip()):
        head, _, names = entry.partition(":")
        scope, _, type_name = head.partition(" ")
        for name in names.split():
            out[name] = (_parse_type(type_name), scope)
    return out


FIELDS: Final = _catalogue(_CATALOGUE)
"""Every field: its type and its scope."""

_TRANSFORMS: Final = frozenset(
    {"http_request_transform", "http_request_late_transform", "http_response_headers_transform"}
)
_WAF: Final = frozenset({"http_request_firewall_custom", "http_ratelimit", "http_request_firewall_managed"})

PHASE_SCOPES: Final[dict[str, frozenset[str]]] = {
    "http_request_firewall_custom": frozenset({"request", "body"}),
    "http_ratelimit": frozenset({"request", "body"}),
    "http_request_firewall_managed": frozenset({"request", "body"}),
    "http_request_transform": frozenset({"request", "transform"}),
    "http_request_late_transform": frozenset({"request", "transform"}),
    "http_response_headers_transform": frozenset({"request", "transform", "response", "response_error"}),
    "http_request_dynamic_redirect": frozenset({"request"}),
    "http_request_cache_settings": frozenset({"request"}),
    "http_config_settings": frozenset({"request"}),
    "http_request_origin": frozenset({"request"}),
}
"""The fields each phase offers, by scope; a role adds some (`ROLE_SCOPES`)."""

ROLE_SCOPES: Final[dict[tuple[str, Role], frozenset[str]]] = {
    ("http_ratelimit", "counting"): frozenset({"response"}),
    **{(phase, "rewrite"): frozenset({"rewrite"}) for phase in _TRANSFORMS},
}

SCOPE_WHERE: Final = {
    "body": "request body fields are only available in WAF custom, rate limiting and managed rules",
    "response": "response fields are only available in response header transform rules and in a rate limiting"
    " rule's counting expression",
    "response_error": "this field is only available in response header transform rules",
    "transform": "this field is only available in transform rules",
    "rewrite": "this field is only available in the rewrite expressions of transform rules",
}


# Functions.

_T = frozenset({"String", "Bytes"})
_I = frozenset({"Integer"})
_IPS = frozenset({"IP"})


@dataclass(frozen=True)
class Param:
    types: frozenset[str]
    field_only: bool = False
    """Cloudflare refuses a literal here: the value must come from a field (or a function of one)."""
    literal_only: bool = False


@dataclass(frozen=True)
class Function:
    params: tuple[Param, ...]
    returns: Type
    required: int
    variadic: Param | None = None
    phases: frozenset[str] | None = None
    """Phases that allow the function; None for every phase."""
    rewrite_only: bool = False
    """Only in rewrite values (and a redirect's target URL), not in filters."""
    once: bool = False
    """At most one of the `once` functions per expression."""


def _fn(
    returns: Type,
    *params: Param,
    required: int | None = None,
    variadic: Param | None = None,
    phases: Iterable[str] | None = None,
    rewrite_only: bool = False,
    once: bool = False,
) -> Function:
    return Function(
        params=params,
        returns=returns,
        required=len(params) if required is None else required,
        variadic=variadic,
        phases=frozenset(phases) if phases is not None else None,
        rewrite_only=rewrite_only,
        once=once,
    )


REDIRECT: Final = "http_request_dynamic_redirect"

FUNCTION_SPECS: Final[dict[str, Function]] = {
    "any": _fn(BOOLEAN, Param(frozenset({"Array"}))),
    "all": _fn(BOOLEAN, Param(frozenset({"Array"}))),
    "cidr": _fn(
        IP, Param(_IPS, field_only=True), Param(_I), Param(_I), phases=_WAF - {"http_request_firewall_managed"}
    ),
    "cidr6": _fn(IP, Param(_IPS, field_only=True), Param(_I), phases=_WAF - {"http_request_firewall_managed"}),
    "concat": _fn(STRING, Param(_T | {"Integer", "Array"}), required=1, variadic=Param(_T | {"Integer", "Array"})),
    "decode_base64": _fn(
        STRING, Param(_T, field_only=True), phases=_TRANSFORMS | _WAF - {"http_request_firewall_managed"}
    ),
    "encode_base64": _fn(STRING, Param(_T), Param(_T, literal_only=True), required=1),
    "ends_with": _fn(BOOLEAN, Param(_T, field_only=True), Param(_T)),
    "starts_with": _fn(BOOLEAN, Param(_T, field_only=True), Param(_T)),
    "join": _fn(STRING, Param(frozenset({"Array"})), Param(_T), phases=_TRANSFORMS | {"http_request_firewall_custom"}),
    "len": _fn(INTEGER, Param(_T | {"Array"})),
    "lookup_json_integer": _fn(INTEGER, Param(_T), Param(_T | _I), variadic=Param(_T | _I)),
    "lookup_json_string": _fn(STRING, Param(_T), Param(_T | _I), variadic=Param(_T | _I)),
    "lower": _fn(STRING, Param(_T)),
    "upper": _fn(STRING, Param(_T)),
    "regex_replace": _fn(
        STRING,
        Param(_T),
        Param(_T, literal_only=True),
        Param(_T, literal_only=True),
        phases=_TRANSFORMS | {REDIRECT},
        rewrite_only=True,
        once=True,
    ),
    "wildcard_replace": _fn(
        STRING,
        Param(_T, field_only=True),
        Param(_T, literal_only=True),
        Param(_T, literal_only=True),
        Param(_T, literal_only=True),
        required=3,
        phases={"http_request_transform", REDIRECT},
        rewrite_only=True,
        once=True,
    ),
    "remove_bytes": _fn(BYTES, Param(_T), Param(_T, literal_only=True)),
    "remove_query_args": _fn(
        STRING, Param(_T, field_only=True), Param(_T), variadic=Param(_T), phases=_TRANSFORMS, rewrite_only=True
    ),
    "split": _fn(
        Type("Array", STRING),
        Param(_T),
        Param(_T, literal_only=True),
        Param(_I, literal_only=True),
        phases={"http_response_headers_transform"},
    ),
    "substring": _fn(STRING, Param(_T), Param(_I), Param(_I), required=2),
    "to_string": _fn(
        STRING, Param(frozenset({"Integer", "Boolean", "IP"})), phases=_TRANSFORMS | {REDIRECT}, rewrite_only=True
    ),
    "url_decode": _fn(STRING, Param(_T), Param(_T, literal_only=True), required=1),
    "uuidv4": _fn(STRING, Param(_T), phases=_TRANSFORMS, rewrite_only=True),
    "is_timed_hmac_valid_v0": _fn(
        BOOLEAN,
        Param(_T, literal_only=True),
        Param(_T),
        Param(_I, literal_only=True),
        Param(_I),
        Param(_I, literal_only=True),
        Param(_T, literal_only=True),
        required=4,
    ),
}
FUNCTIONS: Final = frozenset(FUNCTION_SPECS)

FOREIGN_FUNCTIONS: Final = {"bit_slice": "bit_slice() is a Magic Firewall function, not available in HTTP rules"}
