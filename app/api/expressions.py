"""Cloudflare's Rules language (wirefilter), checked before Cloudflare sees an expression.

A rule's `expression` is checked at admission so that `kubectl apply` of a typo is denied with the position of the
mistake, instead of the rule failing later as a `TerminalError`. The checker is a tokenizer and a recursive-descent
parser written for this language, plus a type checker over Cloudflare's documented field catalogue:

    expression := xor ( ("or" | "||") xor )*        precedence, lowest first: or, xor, and, not
    xor        := and ( ("xor" | "^^") and )*
    and        := unary ( ("and" | "&&") unary )*
    unary      := ("not" | "!") unary | primary
    primary    := "(" expression ")" | "true" | "false" | comparison
    comparison := value [ operator right ]          a value alone must be a Boolean
    value      := (field | function "(" [expression ("," expression)*] ")" | literal) ( "[" key "]" )*
    key        := string | integer | "*"            map key, array index, every element
    right      := literal | "{" item+ "}" | "$" list  sets and lists only after `in`

Types: String (and Bytes, which the language treats alike), Integer, Boolean, IP address, Array<T>, Map<T>. An
expression with `[*]` maps over an array: `lower(http.request.headers.names[*])[*] == "x"` is an Array<Boolean> that
only `any()` and `all()` turn into a Boolean. The fields a phase offers (`_PHASE_SCOPES`) and the functions a phase
allows (`_FUNCTIONS`) follow Cloudflare's documentation. What depends on the zone's plan (regular expressions on
Free, field availability by plan, rule counts) is left to Cloudflare, which reports it with its own message.

Syntax errors stop the check at the first one (what follows a syntax error cannot be read reliably); unknown
names, type and phase errors are all reported, sorted by position. Positions are 1-based character offsets.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final, Literal, NoReturn

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


@dataclass(frozen=True)
class ExpressionError:
    """One mistake in an expression. `str()` is the sentence a user reads, with the position and any hint."""

    position: int
    """1-based character offset of the mistake in the expression."""
    message: str
    hint: str = ""

    def __str__(self) -> str:
        return f"{self.message} at {self.position}" + (f"; {self.hint}" if self.hint else "")


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


def _text(t: Type) -> bool:
    return t.name in ("String", "Bytes", "?")


def _is(t: Type, *names: str) -> bool:
    return t.name == "?" or t.name in names


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

_PHASE_SCOPES: Final[dict[str, frozenset[str]]] = {
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
"""The fields each phase offers, by scope; a role adds some (`_ROLE_SCOPES`)."""

_ROLE_SCOPES: Final[dict[tuple[str, Role], frozenset[str]]] = {
    ("http_ratelimit", "counting"): frozenset({"response"}),
    **{(phase, "rewrite"): frozenset({"rewrite"}) for phase in _TRANSFORMS},
}

_SCOPE_WHERE: Final = {
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


_REDIRECT: Final = "http_request_dynamic_redirect"

_FUNCTIONS: Final[dict[str, Function]] = {
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
        phases=_TRANSFORMS | {_REDIRECT},
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
        phases={"http_request_transform", _REDIRECT},
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
        STRING, Param(frozenset({"Integer", "Boolean", "IP"})), phases=_TRANSFORMS | {_REDIRECT}, rewrite_only=True
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
FUNCTIONS: Final = frozenset(_FUNCTIONS)

_FOREIGN_FUNCTIONS: Final = {"bit_slice": "bit_slice() is a Magic Firewall function, not available in HTTP rules"}

# Tokens.

_COMPARISON_WORDS: Final = {
    "eq": "eq",
    "ne": "ne",
    "lt": "lt",
    "le": "le",
    "gt": "gt",
    "ge": "ge",
    "contains": "contains",
    "matches": "matches",
    "wildcard": "wildcard",
    "in": "in",
}
_COMPARISON_SYMBOLS: Final = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "~": "matches"}
_LOGICAL: Final = {"and": "and", "&&": "and", "or": "or", "||": "or", "xor": "xor", "^^": "xor"}
_KEYWORDS: Final = frozenset({*_COMPARISON_WORDS, "and", "or", "xor", "not", "strict", "true", "false"})

_SPACE = re.compile(r"\s*")
_TOKEN = re.compile(
    r"""(?P<raw>r\#*")
    |(?P<ident>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
    |(?P<number>-?[0-9][0-9A-Fa-f:.]*(?:/[0-9]+)?|::[0-9A-Fa-f:.]*(?:/[0-9]+)?)
    |(?P<string>")
    |(?P<list>\$)
    |(?P<op>==|!=|<=|>=|&&|\|\||\^\^|[<>~!(){}\[\],*])""",
    re.VERBOSE,
)
_IP_TEXT = re.compile(r"[0-9A-Fa-f:.]+(?:/[0-9]+)?")
_LIST_NAME = re.compile(r"[a-z0-9_]+|cf\.[a-z0-9_.]+")
_LIST_TEXT = re.compile(r"[^\s(){}\[\],\"]*")
_INTEGER = re.compile(r"-?[0-9]+")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    """ident, number, string, raw, list, op, end."""
    start: int
    end: int
    text: str
    body: str = ""
    """A string's content, between its delimiters."""

    def show(self) -> str:
        return "the end of the expression" if self.kind == "end" else f'"{_clip(self.text)}"'


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(slots=True)
class Value:
    type: Type
    start: int
    literal: bool = False
    star: bool = False
    """An unpacked array (`x[*]`): operations apply to each element."""
    token: Token | None = None
    """The string of a string literal."""


class _Stop(Exception):
    """A syntax error: nothing after it can be read reliably."""


@dataclass
class _Group:
    """An open `(`, `{` or function call, to say which one a missing closer belongs to."""

    opener: str
    start: int


@dataclass
class Parser:
    text: str
    phase: str
    role: Role
    errors: list[ExpressionError] = field(default_factory=list)
    lists: set[str] = field(default_factory=set)
    """The lists (`$name`) the expression reads, as the parser met them."""
    pos: int = 0
    _peeked: Token | None = None
    _previous: Token | None = None
    _groups: list[_Group] = field(default_factory=list)
    _once: list[tuple[str, int]] = field(default_factory=list)
    _scopes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self._scopes = _PHASE_SCOPES[self.phase] | _ROLE_SCOPES.get((self.phase, self.role), frozenset())

    # Reporting.

    def report(self, start: int, message: str, hint: str = "") -> None:
        self.errors.append(ExpressionError(start + 1, message, hint))

    def fail(self, start: int, message: str, hint: str = "") -> NoReturn:
        self.report(start, message, hint)
        raise _Stop

    def unexpected(self, token: Token, expected: str) -> NoReturn:
        if token.kind == "end" and self._groups:
            group = self._groups[-1]
            closer = {"(": ")", "{": "}", "[": "]"}[group.opener[-1]]
            self.fail(
                group.start,
                f'"{group.opener}" is never closed',
                f'a "{closer}" is missing; the expression ended while {expected} was expected',
            )
        if token.kind == "op" and token.text == ")" and not any(g.opener.endswith("(") for g in self._groups):
            where = self._groups[-1].start if self._groups else 0
            self.fail(
                where,
                "unbalanced parentheses",
                f'the ")" at {token.start + 1} closes nothing: a "(" is missing before it',
            )
        self._quote_check(token.start, f"{token.show()} at {token.start + 1}, where {expected} was expected")
        if token.kind == "ident" and token.text.lower() in _KEYWORDS and token.text != token.text.lower():
            self.fail(
                token.start,
                f"unexpected {token.show()}",
                f'operators are written in lower case: "{token.text.lower()}"',
            )
        self.fail(token.start, f"expected {expected}, found {token.show()}")

    def _quote_check(self, start: int, found: str) -> None:
        """Blame a misplaced quote rather than what it displaced, when the quotes from `start` on do not pair up.

        A missing or extra quote shifts every string after it, so the error surfaces later than the mistake: right
        after a string that swallowed what followed it, or right after a word that should have been in quotes."""
        previous = self._previous
        if previous is None or not _odd_quotes(start, self.text):
            return
        # What was read from the misplaced quote on is unreliable: only the quote is reported from there.
        keep = [error for error in self.errors if error.position <= previous.start]
        if previous.kind in ("string", "raw") and previous.end == self._space_before(start):
            self.errors[:] = keep
            self.fail(
                previous.start,
                "a quote is missing or misplaced in the string",
                f"it ends at {previous.end} and is followed by {found}",
            )
        if previous.kind in ("ident", "number") and previous.end == start:
            self.errors[:] = keep
            self.fail(
                previous.start,
                "a quote seems to be missing here",
                f'"{_clip(self.text[previous.start : start + 1])}" has only its closing quote'
                if self.text[start] == '"'
                else f"{found}",
            )

    def _space_before(self, index: int) -> int:
        while index > 0 and self.text[index - 1].isspace():
            index -= 1
        return index

    # Tokenizer.

    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._lex()
        return self._peeked

    def advance(self) -> Token:
        token = self.peek()
        self._peeked = None
        self.pos = token.end
        self._previous = token
        return token

    def _lex(self) -> Token:
        text = self.text
        space = _SPACE.match(text, self.pos)
        start = space.end() if space else self.pos
        if start >= len(text):
            return Token("end", start, start, "")
        match = _TOKEN.match(text, start)
        if match is None:
            char = text[start]
            hint = "strings are written in double quotes" if char == "'" else ""
            self._quote_check(start, f'the character "{char}" at {start + 1}')
            self.fail(start, f'unexpected character "{char}"', hint)
        kind = match.lastgroup or "op"
        if kind == "string":
            return self._lex_string(start)
        if kind == "raw":
            return self._lex_raw(start, match.end() - start - 2)
        if kind == "list":
            name = _LIST_TEXT.match(text, start + 1)
            end = name.end() if name else start + 1
            return Token("list", start, end, text[start:end], text[start + 1 : end])
        return Token(kind, start, match.end(), match.group())

    def _lex_string(self, start: int) -> Token:
        text = self.text
        index = start + 1
        while index < len(text):
            char = text[index]
            if char == "\\":
                index += 2
                continue
            if char == '"':
                return Token("string", start, index + 1, text[start : index + 1], text[start + 1 : index])
            index += 1
        self._quote_check(start, f"a quote at {start + 1} that opens a string never closed")
        self.fail(start, "this string is never closed", 'a closing " is missing')

    def _lex_raw(self, start: int, hashes: int) -> Token:
        closer = '"' + "#" * hashes
        body_start = start + 2 + hashes
        end = self.text.find(closer, body_start)
        if end < 0:
            self.fail(start, "this raw string is never closed", f"it must end with {closer}")
        return Token("raw", start, end + len(closer), self.text[start : end + len(closer)], self.text[body_start:end])

    def expect(self, text: str, expected: str | None = None) -> Token:
        token = self.peek()
        if token.kind != "op" or token.text != text:
            self.unexpected(token, expected or f'"{text}"')
        return self.advance()

    def at(self, text: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.text == text

    # Grammar.

    def check(self) -> None:
        if len(self.text) > MAX_LENGTH:
            self.report(
                MAX_LENGTH, f"the expression is {len(self.text)} characters long; Cloudflare allows {MAX_LENGTH}"
            )
        if not self.text.strip():
            self.fail(0, "the expression is empty", 'use "true" to match every request')
        value = self.expression()
        token = self.peek()
        if token.kind != "end":
            expected = 'a logical operator ("and", "or", "xor") or the end of the expression'
            if token.kind == "ident" and token.text == "not":
                self.fail(
                    token.start,
                    '"not" cannot follow a value',
                    'to negate a comparison put "not" before it: "not ip.src in {...}"',
                )
            self.unexpected(token, expected)
        if self.role == "rewrite":
            if (value.type.name != "?" and not _text(value.type)) or value.star:
                self.report(value.start, f"a rewrite expression must give a String, not {self._show(value)}")
        elif not _is(value.type, "Boolean") or value.star:
            hint = ""
            if value.type == BOOLEANS:
                hint = _WRAP
            elif value.type.name != "?":
                hint = "compare it with a value, such as == or in {...}"
            self.report(value.start, f"the expression must be a Boolean (true or false), not {self._show(value)}", hint)
        for name, start in self._once[1:]:
            first = self._once[0][0]
            self.report(
                start,
                f"{name}() cannot be used here: an expression may use regex_replace() or wildcard_replace() once"
                f" (it already uses {first}())",
            )

    def expression(self) -> Value:
        return self._logical("or", self._xor)

    def _xor(self) -> Value:
        return self._logical("xor", self._and)

    def _and(self) -> Value:
        return self._logical("and", self.unary)

    def _logical(self, operator: str, operand: Callable[[], Value]) -> Value:
        left: Value = operand()
        while True:
            token = self.peek()
            if _LOGICAL.get(token.text) != operator or token.kind not in ("ident", "op"):
                return left
            self.advance()
            right: Value = operand()
            self._boolean(left, token.text)
            self._boolean(right, token.text)
            array = left.type == BOOLEANS or right.type == BOOLEANS
            left = Value(BOOLEANS if array else BOOLEAN, left.start)

    def _boolean(self, value: Value, operator: str) -> None:
        if not (_is(value.type, "Boolean") or value.type == BOOLEANS) or value.star:
            self.report(value.start, f'"{operator}" needs Booleans on both sides, not {self._show(value)}')
        elif value.type == BOOLEANS and not self._in_call():
            self.report(value.start, f'"{operator}" needs Booleans on both sides, not an array of Booleans', _WRAP)

    def unary(self) -> Value:
        token = self.peek()
        if (token.kind == "ident" and token.text == "not") or (token.kind == "op" and token.text == "!"):
            self.advance()
            operand = self.unary()
            self._boolean(operand, token.text)
            return Value(BOOLEANS if operand.type == BOOLEANS else BOOLEAN, token.start)
        return self.primary()

    def primary(self) -> Value:
        token = self.peek()
        if token.kind == "op" and token.text == "(":
            self.advance()
            self._groups.append(_Group("(", token.start))
            inner = self.expression()
            self.expect(")", 'a logical operator or ")"')
            self._groups.pop()
            return Value(inner.type, token.start, star=inner.star)
        if token.kind == "ident" and token.text in ("true", "false"):
            self.advance()
            return Value(BOOLEAN, token.start, literal=True)
        return self.comparison()

    def comparison(self) -> Value:
        left = self.value()
        token = self.peek()
        operator = self._operator(token)
        if operator is None:
            if not _ends_operand(token):
                if token.kind == "ident" and token.text == "not":
                    self.fail(
                        token.start,
                        '"not" cannot follow a value',
                        'to negate a comparison put "not" before it: "not ip.src in {...}"',
                    )
                wanted = "a logical operator (and, or, xor)" if _is(left.type, "Boolean") else "a comparison operator"
                self.unexpected(token, f"{wanted}{_ENDING}")
            return left
        self.advance()
        if operator == "strict":
            follow = self.peek()
            if follow.kind != "ident" or follow.text != "wildcard":
                self.unexpected(follow, '"wildcard" (the operator is "strict wildcard")')
            self.advance()
            operator = "strict wildcard"
        if left.literal:
            self.fail(left.start, "the left side of a comparison must be a field or a function, not a literal")
        self.right(left, operator, token)
        if left.type.name == "?":
            return Value(UNKNOWN, left.start)  # already reported: a guess at its type would only add noise
        return Value(BOOLEANS if left.star else BOOLEAN, left.start)

    @staticmethod
    def _operator(token: Token) -> str | None:
        if token.kind == "ident":
            return "strict" if token.text == "strict" else _COMPARISON_WORDS.get(token.text)
        if token.kind == "op":
            return _COMPARISON_SYMBOLS.get(token.text)
        return None

    def value(self) -> Value:
        token = self.peek()
        if token.kind == "ident" and token.text not in _KEYWORDS:
            self.advance()
            value = self.call(token) if self.at("(") else self.field(token)
        elif token.kind in ("string", "raw"):
            self.advance()
            if token.kind == "string":
                self._escapes(token, regex=False)
            value = Value(STRING, token.start, literal=True, token=token)
        elif token.kind == "number" and _INTEGER.fullmatch(token.text):
            self.advance()
            value = Value(INTEGER, token.start, literal=True)
        else:
            self.unexpected(token, "a field, a function or a value")
        while self.at("["):
            value = self.access(value)
        return value

    def field(self, token: Token) -> Value:
        name = token.text
        known = FIELDS.get(name)
        if known is None:
            close = difflib.get_close_matches(name, FIELDS, n=1, cutoff=0.75)
            close = close or difflib.get_close_matches(name, FUNCTIONS, n=1, cutoff=0.8)
            hint = f'did you mean "{close[0]}"?' if close else ""
            self.report(token.start, f'unknown field "{_clip(name, 80)}"', hint)
            return Value(UNKNOWN, token.start)
        type_, scope = known
        if scope not in self._scopes:
            where = f"{self.phase} rules" if self.role != "counting" else "a counting expression"
            self.report(token.start, f'field "{name}" is not available in {where}', _SCOPE_WHERE[scope])
        return Value(type_, token.start)

    def access(self, value: Value) -> Value:
        opener = self.advance()
        self._groups.append(_Group("[", opener.start))
        token = self.peek()
        base = value.type
        result: Value
        if token.kind == "op" and token.text == "*":
            self.advance()
            if value.star:
                self.report(token.start, "[*] is already applied to this value")
            if not _is(base, "Array", "Map"):
                self.report(token.start, f"[*] needs an array or a map, not {base}")
                base = UNKNOWN
            result = Value(base.of or UNKNOWN, value.start, star=True)
        elif token.kind in ("string", "raw"):
            self.advance()
            if not _is(base, "Map"):
                self.report(token.start, f'a key like ["name"] needs a map, not {base}', "arrays take an index: [0]")
                base = UNKNOWN
            result = Value(base.of or UNKNOWN, value.start, star=value.star)
        elif token.kind == "number" and _INTEGER.fullmatch(token.text):
            self.advance()
            if token.text.startswith("-"):
                self.report(token.start, "an array index cannot be negative")
            if not _is(base, "Array"):
                hint = 'maps take a key in quotes: ["name"]' if base.name == "Map" else ""
                self.report(token.start, f"an index like [0] needs an array, not {base}", hint)
                base = UNKNOWN
            result = Value(base.of or UNKNOWN, value.start, star=value.star)
        else:
            self.unexpected(token, 'an index ([0]), a key (["name"]) or [*]')
        self.expect("]")
        self._groups.pop()
        return result

    def call(self, name: Token) -> Value:
        opener = self.expect("(")
        self._groups.append(_Group(f"{name.text}(", name.start))
        args: list[Value] = []
        if not self.at(")"):
            args.append(self.expression())
            while self.at(","):
                self.advance()
                args.append(self.expression())
        self.expect(")", '"," or ")"')
        self._groups.pop()
        del opener
        return self._apply(name, args)

    def _apply(self, name: Token, args: list[Value]) -> Value:
        spec = _FUNCTIONS.get(name.text)
        if spec is None:
            if name.text in _FOREIGN_FUNCTIONS:
                self.report(name.start, _FOREIGN_FUNCTIONS[name.text])
                return Value(UNKNOWN, name.start)
            close = difflib.get_close_matches(name.text, FUNCTIONS, n=1, cutoff=0.7)
            hint = f'did you mean "{close[0]}"?' if close else ""
            self.report(name.start, f'unknown function "{_clip(name.text, 80)}"', hint)
            return Value(UNKNOWN, name.start)
        fn = name.text
        if (spec.phases is not None and self.phase not in spec.phases) or (
            spec.rewrite_only and self.role != "rewrite"
        ):
            if spec.rewrite_only:
                where = "in the rewrite expressions of transform rules and the target URL of redirect rules"
                if spec.phases is not None and _REDIRECT not in spec.phases:
                    where = "in the rewrite expressions of transform rules"
            else:
                where = "in " + ", ".join(sorted(spec.phases or ())) + " rules"
            self.report(name.start, f"{fn}() is not available in {self._where()}", f"Cloudflare allows it only {where}")
        if spec.once:
            self._once.append((fn, name.start))
        if fn == "regex_replace" and len(args) > 1 and args[1].token is not None:
            self._regex(args[1].token)
        count = len(args)
        most = len(spec.params) if spec.variadic is None else None
        if count < spec.required or (most is not None and count > most):
            wanted = (
                f"{spec.required}"
                if most == spec.required
                else f"at least {spec.required}"
                if most is None
                else f"{spec.required} to {most}"
            )
            self.report(name.start, f"{fn}() takes {wanted} argument{'s' if wanted != '1' else ''}, not {count}")
            return Value(UNKNOWN, name.start)
        mapped = False
        for index, arg in enumerate(args):
            param = spec.params[index] if index < len(spec.params) else spec.variadic
            assert param is not None  # the count was checked above
            if arg.star:
                if index != 0:
                    self.report(arg.start, "[*] can only be used in the first argument of a function")
                mapped = True
            self._argument(fn, index, arg, param)
        if fn in ("any", "all"):
            if args and args[0].type.name != "?" and (args[0].type != BOOLEANS or args[0].star):
                self.report(
                    args[0].start,
                    f'{fn}() takes an array of Booleans, such as {fn}(http.request.headers.names[*] == "x"),'
                    f" not {self._show(args[0])}",
                )
            return Value(BOOLEAN, name.start)
        returns = spec.returns
        if fn == "concat" and args and args[0].type.name == "Array" and not args[0].star:
            returns = args[0].type
        return Value(Type("Array", returns) if mapped else returns, name.start)

    def _argument(self, fn: str, index: int, arg: Value, param: Param) -> None:
        ordinal = ("first", "second", "third", "fourth", "fifth", "sixth")[index] if index < 6 else f"#{index + 1}"
        if arg.type.name != "?" and arg.type.name not in param.types:
            wanted = " or ".join(sorted({_TYPE_NAMES.get(t, t) for t in param.types}))
            self.report(arg.start, f"the {ordinal} argument of {fn}() must be {wanted}, not {self._show(arg)}")
        elif param.field_only and arg.literal:
            self.report(arg.start, f"the {ordinal} argument of {fn}() must be a field, not a literal")
        elif param.literal_only and not arg.literal and arg.type.name != "?":
            self.report(arg.start, f"the {ordinal} argument of {fn}() must be a literal value")

    def _where(self) -> str:
        return f"{self.phase} rules" if self.role == "filter" else f"{self.phase} {self.role} expressions"

    # The right side of a comparison.

    def right(self, left: Value, operator: str, token: Token) -> None:
        type_ = left.type
        name = type_.name
        reported = len(self.errors)
        if name == "Boolean":
            self.report(
                token.start,
                f'a Boolean cannot be compared with "{operator}"',
                'use it alone ("ssl") or negated ("not ssl")',
            )
        elif name in ("Array", "Map") and not left.star:
            self.report(
                token.start,
                f"{type_} cannot be compared directly",
                'use an index ([0]), a key (["name"]), or [*] inside any(...) or all(...)',
            )
        elif name == "IP" and operator in ("contains", "matches", "wildcard", "strict wildcard"):
            self.report(token.start, f'"{operator}" compares strings, not IP addresses', "use in {...} for ranges")
        elif name == "Integer" and operator in ("contains", "matches", "wildcard", "strict wildcard"):
            self.report(token.start, f'"{operator}" compares strings, not integers')
        if len(self.errors) > reported:
            type_ = UNKNOWN  # the mismatch is reported once; the right side is read for its syntax only
        if operator == "in":
            self._set(type_)
        else:
            self._literal(type_, operator, regex=operator == "matches")

    def _in_call(self) -> bool:
        return any(group.opener.endswith("(") and group.opener != "(" for group in self._groups)

    def _literal(self, type_: Type, operator: str, regex: bool = False) -> None:
        name = type_.name
        if name in ("IP",) or (name == "?" and self._looks_like_ip()):
            self._ip(allow_ranges=False)
            return
        token = self.peek()
        if token.kind in ("string", "raw"):
            self.advance()
            if token.kind == "string":
                self._escapes(token, regex=regex)
            if regex:
                self._regex(token)
            if name not in ("String", "Bytes", "?", "Boolean", "Array", "Map"):
                self.report(
                    token.start, f"expected {_article(type_)} to compare with, found a string", _quote_hint(token)
                )
            return
        if token.kind == "number":
            self.advance()
            if not _INTEGER.fullmatch(token.text):
                self.report(token.start, f'"{_clip(token.text)}" is not a valid number')
            elif name in ("String", "Bytes"):
                self.report(
                    token.start,
                    f"expected a string to compare with, found the number {token.text}",
                    f'write "{token.text}"',
                )
            return
        if token.kind == "op" and token.text == "{":
            self.fail(token.start, f'a set of values {{...}} can only follow "in", not "{operator}"')
        if token.kind == "list":
            self.fail(token.start, f'a list can only follow "in", not "{operator}"')
        self.unexpected(token, f"{_article(type_) if name != '?' else 'a value'} to compare with")

    def _set(self, type_: Type) -> None:
        token = self.peek()
        if token.kind == "list":
            self.advance()
            self._list(token, type_)
            return
        if not (token.kind == "op" and token.text == "{"):
            self.unexpected(token, 'a set of values in braces ({"a" "b"}) or a list ($name)')
        self.advance()
        self._groups.append(_Group("{", token.start))
        count = 0
        while True:
            item = self.peek()
            if item.kind == "op" and item.text == "}":
                break
            if item.kind == "op" and item.text == ",":
                self.fail(item.start, "the values of a set are separated by spaces, not commas")
            if type_.name == "IP" or (type_.name == "?" and self._looks_like_ip()):
                self._ip(allow_ranges=True)
            elif item.kind in ("string", "raw"):
                self.advance()
                if item.kind == "string":
                    self._escapes(item, regex=False)
                if type_.name not in ("String", "Bytes", "?"):
                    self.report(
                        item.start, f"expected {_article(type_)} in this set, found a string", _quote_hint(item)
                    )
            elif item.kind == "number":
                self.advance()
                self._integer_item(item, type_)
            else:
                self.unexpected(item, f'{_article(type_) if type_.name != "?" else "a value"} or "}}"')
            count += 1
        self.advance()
        self._groups.pop()
        if count == 0:
            self.report(token.start, "a set needs at least one value")

    def _integer_item(self, item: Token, type_: Type) -> None:
        low, dots, high = item.text.partition("..")
        good = _INTEGER.fullmatch(low) and (not dots or _INTEGER.fullmatch(high))
        if not good:
            self.report(item.start, f'"{_clip(item.text)}" is not a valid number or range (like 8000..8009)')
        elif type_.name in ("String", "Bytes"):
            self.report(
                item.start, f"expected a string in this set, found the number {item.text}", f'write "{item.text}"'
            )
        elif dots and int(low) > int(high):
            self.report(item.start, f"the range {item.text} is empty: its start is above its end")

    def _list(self, token: Token, type_: Type) -> None:
        name = token.body
        if not _LIST_NAME.fullmatch(name):
            hint = "list names are lower-case letters, digits and underscores"
            if name.lower() != name and _LIST_NAME.fullmatch(name.lower()):
                hint += f': "${name.lower()}"'
            self.report(token.start, f'"{_clip(token.text)}" is not a valid list name', hint)
            return
        if type_.name not in ("IP", "String", "Bytes", "Integer", "?"):
            self.report(token.start, f"a list cannot hold {type_} values")
        self.lists.add(name)

    def _looks_like_ip(self) -> bool:
        token = self.peek()
        return token.kind == "number" and ("." in token.text.replace("..", "") or ":" in token.text)

    def _ip(self, allow_ranges: bool) -> None:
        token = self.peek()
        match = _IP_TEXT.match(self.text, token.start)
        if token.kind == "end" or match is None or match.end() == token.start:
            self.unexpected(token, "an IP address")
        text = match.group()
        self._peeked = None
        self.pos = match.end()
        self._previous = Token("number", token.start, match.end(), text)
        start = token.start
        if "/" in text:
            if not allow_ranges:
                self.report(start, f"{text} is a range", f"use in {{{text}}} to match every address in it")
            try:
                ipaddress.ip_network(text, strict=False)  # host bits set are masked, as Cloudflare does
            except ValueError:
                self.report(start, f'"{_clip(text)}" is not a valid CIDR range')
            return
        low, dots, high = text.partition("..")
        if dots and not allow_ranges:
            self.report(start, f"{text} is a range", f"use in {{{text}}} to match every address in it")
        try:
            first = ipaddress.ip_address(low)
            if dots:
                last = ipaddress.ip_address(high)
                if first.version != last.version:
                    self.report(start, f"the range {text} mixes IPv4 and IPv6")
                elif int(first) > int(last):
                    self.report(start, f"the range {text} is empty: its start is above its end")
        except ValueError:
            self.report(start, f'"{_clip(text)}" is not a valid IP address')

    def _regex(self, token: Token) -> None:
        """Report the unbalanced groups and classes of a regular expression, which Cloudflare's engine refuses.

        Only the structure is checked: the syntax of the rest (Rust's regex dialect) is left to Cloudflare."""
        body = token.body
        base = token.start + (token.text.find('"') + 1 if token.kind == "raw" else 1)
        groups: list[int] = []
        classes: list[int] = []
        index = 0
        while index < len(body):
            char = body[index]
            if char == "\\":
                index += 2
                continue
            if char == "[":
                classes.append(index)
                index += 1
                if not classes[:-1]:  # a leading "]" (or "^]") is a literal in an outer class
                    index += body[index : index + 1] == "^"
                    index += body[index : index + 1] == "]"
                continue
            if classes:
                if char == "]":
                    classes.pop()
            elif char == "(":
                groups.append(index)
            elif char == ")":
                if not groups:
                    self.report(
                        token.start,
                        "the regular expression has unbalanced parentheses",
                        f'the ")" at {base + index + 1} closes nothing (write \\) for a literal parenthesis)',
                    )
                    return
                groups.pop()
            index += 1
        if classes:
            self.report(base + classes[0], 'this "[" of the regular expression is never closed')
        elif groups:
            self.report(base + groups[-1], 'this "(" of the regular expression is never closed')

    def _escapes(self, token: Token, regex: bool) -> None:
        body = token.body
        index = 0
        while True:
            index = body.find("\\", index)
            if index < 0:
                return
            escaped = body[index + 1 : index + 2]
            at = token.start + 1 + index
            if regex or escaped in ('"', "\\"):
                index += 2
                continue
            if escaped == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", body[index + 2 : index + 4]):
                index += 4
                continue
            if re.fullmatch(r"[0-7]{3}", body[index + 1 : index + 4]):
                index += 4
                continue
            self.report(
                at,
                f'"\\{escaped}" is not an escape Cloudflare knows in a string',
                'write \\\\ for a backslash, \\" for a quote, \\xHH for a byte, or use a raw string r"..."',
            )
            index += 2

    @staticmethod
    def _show(value: Value) -> str:
        if value.star:
            return f"each {value.type} of an array ([*])"
        if value.type == BOOLEANS:
            return "an array of Booleans"
        return _article(value.type)


_TYPE_NAMES: Final = {
    "String": "a string",
    "Bytes": "a string",
    "Integer": "an integer",
    "Boolean": "a Boolean",
    "IP": "an IP address",
    "Array": "an array",
    "Map": "a map",
}


_WRAP: Final = "a comparison on [*] gives one Boolean per element: wrap it in any(...) or all(...)"
_ENDING: Final = " or the end of the expression"


def _ends_operand(token: Token) -> bool:
    """Whether `token` may follow a complete operand: the end, a closer, a comma or a logical operator."""
    if token.kind == "end":
        return True
    if token.kind == "op":
        return token.text in (")", ",", "]", "}") or token.text in _LOGICAL
    return token.kind == "ident" and token.text in _LOGICAL


def _article(type_: Type) -> str:
    if type_.of is not None:
        return f"{'an' if type_.name == 'Array' else 'a'} {type_}"
    return _TYPE_NAMES.get(type_.name, str(type_))


def _quote_hint(token: Token) -> str:
    inner = token.body
    return f"write {inner} without quotes" if inner and _INTEGER.fullmatch(inner) else ""


def _odd_quotes(start: int, text: str) -> bool:
    """Whether the double quotes from `start` on fail to pair up (escaped ones left out)."""
    count = 0
    index = start
    while True:
        index = text.find('"', index)
        if index < 0:
            return count % 2 == 1
        if text[index - 1] != "\\":
            count += 1
        index += 1


def _run(text: str, phase: str, role: Role) -> Parser:
    if phase not in _PHASE_SCOPES:
        raise ValueError(f"unknown phase {phase!r}: expected one of {', '.join(PHASES)}")
    if role == "counting" and phase != "http_ratelimit":
        raise ValueError("only rate limiting rules (http_ratelimit) have a counting expression")
    parser = Parser(text, phase, role)
    with contextlib.suppress(_Stop):
        parser.check()
    return parser


def check_expression(text: str, phase: str, role: Role = "filter") -> list[ExpressionError]:
    """Every mistake in `text` as an expression of `phase` for `role`, sorted by position; empty when it is valid.

    Raises ValueError for a phase kflare does not write to (a programming error, not the user's).
    """
    errors = _run(text, phase, role).errors
    return sorted(dict.fromkeys(errors), key=lambda error: error.position)


@functools.lru_cache(maxsize=1024)
def lists_in(text: str, phase: str = "http_request_firewall_custom", role: Role = "filter") -> frozenset[str]:
    """The lists (`$name`, and Cloudflare's managed `$cf.name`) an expression reads, found by the parser, so a `$`
    inside a string is not one. A rule's lists are read on every event of the rule (its index of the lists it
    names): the answers for the expressions seen last are kept."""
    return frozenset(_run(text, phase, role).lists)
