"""The Rules language checker: Cloudflare's documented expressions pass, typos fail with their position."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api.expressions import PHASES, ExpressionError, Role, check_expression
from tests.unit.api.expression_examples import REWRITES, VALID, WAF

RESPONSE = "http_response_headers_transform"


def role_of(text: str, phase: str) -> Role:
    if (text, phase) in REWRITES:
        return "rewrite"
    return "counting" if phase == "http_ratelimit" and "http.response" in text else "filter"


def errors(text: str, phase: str = WAF, role: Role = "filter") -> list[str]:
    return [str(error) for error in check_expression(text, phase, role)]


@pytest.mark.parametrize(("text", "phase"), VALID)
def test_documented_filters_pass(text: str, phase: str) -> None:
    assert errors(text, phase, role_of(text, phase)) == []


@pytest.mark.parametrize(("text", "phase"), REWRITES)
def test_documented_rewrites_pass(text: str, phase: str) -> None:
    assert errors(text, phase, "rewrite") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('http.hots eq "example.com"', 'unknown field "http.hots" at 1; did you mean "http.host"?'),
        (
            'ssl and http.request.uri.pth eq "/"',
            'unknown field "http.request.uri.pth" at 9; did you mean "http.request.uri.path"?',
        ),
        ('lowr(http.host) eq "a"', 'unknown function "lowr" at 1; did you mean "lower"?'),
        (
            'ip.src.asnum eq "13335"',
            "expected an integer to compare with, found a string at 17; write 13335 without quotes",
        ),
        ("http.host eq 443", 'expected a string to compare with, found the number 443 at 14; write "443"'),
        (
            'cf.edge.server_port in {80 "443"}',
            "expected an integer in this set, found a string at 28; write 443 without quotes",
        ),
        ('ip.src eq "192.0.2.1"', 'expected an IP address, found ""192.0.2.1"" at 11'),
        ("ip.src eq 192.0.2.0/24", "192.0.2.0/24 is a range at 11; use in {192.0.2.0/24} to match every address in it"),
        ("ip.src in {192.0.2.300}", '"192.0.2.300" is not a valid IP address at 12'),
        (
            "ip.src in {192.0.2.9..192.0.2.1}",
            "the range 192.0.2.9..192.0.2.1 is empty: its start is above its end at 12",
        ),
        ('http.host in {"a", "b"}', "the values of a set are separated by spaces, not commas at 18"),
        (
            "ip.src in $Office",
            '"$Office" is not a valid list name at 11; list names are lower-case letters, digits and'
            ' underscores: "$office"',
        ),
        ('http.host eq "a" AND ssl', 'unexpected "AND" at 18; operators are written in lower case: "and"'),
        (
            "http.host eq 'a'",
            'unexpected character "\'" at 14; strings are written in double quotes',
        ),
        (
            "ip.src not in {192.0.2.1}",
            '"not" cannot follow a value at 8; to negate a comparison put "not" before it: "not ip.src in {...}"',
        ),
        ('http.host == "a" or', "expected a field, a function or a value, found the end of the expression at 20"),
        ('ssl == "true"', 'a Boolean cannot be compared with "eq" at 5; use it alone ("ssl") or negated ("not ssl")'),
        (
            'http.request.headers.names[*] == "Content-Type"',
            "the expression must be a Boolean (true or false), not an array of Booleans at 1; a comparison on [*]"
            " gives one Boolean per element: wrap it in any(...) or all(...)",
        ),
        (
            'http.request.headers == "x"',
            'Map<Array<String>> cannot be compared directly at 22; use an index ([0]), a key (["name"]), or [*]'
            " inside any(...) or all(...)",
        ),
        (
            'http.request.headers[0] eq "x"',
            'an index like [0] needs an array, not Map<Array<String>> at 22; maps take a key in quotes: ["name"]',
        ),
        (
            "http.host",
            "the expression must be a Boolean (true or false), not a string at 1; compare it with a value, such"
            " as == or in {...}",
        ),
        ('http.host contains "a" and http.request.uri.path', '"and" needs Booleans on both sides, not a string at 28'),
        ('ends_with("a.html", ".html")', "the first argument of ends_with() must be a field, not a literal at 11"),
        ("starts_with(http.host)", "starts_with() takes 2 arguments, not 1 at 1"),
        ('any(lower(http.host, http.request.headers.names[*]) == "a")', "lower() takes 1 argument, not 2 at 5"),
        (
            'http.host eq "a\\qb"',
            '"\\q" is not an escape Cloudflare knows in a string at 16; write \\\\ for a backslash, \\" for a'
            ' quote, \\xHH for a byte, or use a raw string r"..."',
        ),
        ('http.request.uri.path matches "^/(a|b$"', 'this "(" of the regular expression is never closed at 34'),
        (
            'http.host wildcard "*.example.com" and ip.src contains "1"',
            '"contains" compares strings, not IP addresses at 47; use in {...} for ranges',
        ),
        ('http.host strict "a"', 'expected "wildcard" (the operator is "strict wildcard"), found ""a"" at 18'),
        ('"a" eq http.host', "the left side of a comparison must be a field or a function, not a literal at 1"),
        ("", 'the expression is empty at 1; use "true" to match every request'),
        ('bit_slice("udp", 64, 72) == 1', "bit_slice() is a Magic Firewall function, not available in HTTP rules at 1"),
    ],
)
def test_typos_are_reported_with_their_position(text: str, expected: str) -> None:
    assert errors(text) == [expected]


class TestBalance:
    def test_an_unclosed_parenthesis_points_at_it(self) -> None:
        assert errors('ssl and (http.host eq "a" or http.host eq "b"') == [
            '"(" is never closed at 9; a ")" is missing; the expression ended while a logical operator or ")" was'
            " expected"
        ]

    def test_an_unclosed_function_call_points_at_the_function(self) -> None:
        assert errors('any(http.request.headers.names[*] == "a"')[0].startswith('"any(" is never closed at 1')

    def test_an_extra_closing_parenthesis(self) -> None:
        assert errors('http.host eq "a") and ssl') == [
            'unbalanced parentheses at 1; the ")" at 17 closes nothing: a "(" is missing before it'
        ]

    def test_an_unclosed_string(self) -> None:
        assert errors('http.host eq "a and ssl') == ['this string is never closed at 14; a closing " is missing']

    def test_a_missing_opening_quote_is_blamed_on_the_word_before_it(self) -> None:
        assert errors('lookup_json_string(http.request.body.raw, company") == "cloudflare"') == [
            'a quote seems to be missing here at 43; "company"" has only its closing quote'
        ]

    def test_a_missing_closing_quote_is_blamed_on_the_string_that_swallowed_the_rest(self) -> None:
        assert errors('http.host in {"a "b"}') == [
            'a quote is missing or misplaced in the string at 15; it ends at 18 and is followed by "b" at 19,'
            ' where a string or "}" was expected'
        ]

    def test_an_unclosed_set_and_raw_string(self) -> None:
        assert errors('http.host in {"a" "b"')[0].startswith('"{" is never closed at 14')
        assert errors('http.host matches r#"a"b"') == ['this raw string is never closed at 19; it must end with "#']


def _string_bodies(text: str) -> set[int]:
    """Indexes inside string literals (not their delimiters), found independently of the checker."""
    inside: set[int] = set()
    index = 0
    while index < len(text):
        if text.startswith('r"', index) or text.startswith("r#", index):
            hashes = len(text[index + 1 :]) - len(text[index + 1 :].lstrip("#"))
            start = index + 2 + hashes
            end = text.index('"' + "#" * hashes, start)
            inside.update(range(start, end))
            index = end + 1 + hashes
        elif text[index] == '"':
            end = index + 1
            while text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            inside.update(range(index + 1, end))
            index = end + 1
        else:
            index += 1
    return inside


BREAKS = [
    (text, phase, index)
    for text, phase in [*VALID, *REWRITES]
    for index, char in enumerate(text)
    if char in '"()' and not (text[index - 1 : index] == "r" and char == '"')
]


@pytest.mark.parametrize(("text", "phase", "index"), BREAKS)
def test_removing_a_quote_or_parenthesis_fails_at_or_before_the_break(text: str, phase: str, index: int) -> None:
    broken = text[:index] + text[index + 1 :]
    found = check_expression(broken, phase, role_of(text, phase))
    if index in _string_bodies(text) and not found:
        return  # a quote or parenthesis inside a string: the string changed, the expression may still be valid
    assert found, f"{broken!r} passed"
    assert found[0].position <= index + 1, f"{broken!r}: {[str(e) for e in found]}"


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([*VALID, *REWRITES]), st.data())
def test_any_single_deletion_is_reported_within_the_text(example: tuple[str, str], data: st.DataObject) -> None:
    text, phase = example
    index = data.draw(st.integers(0, len(text) - 1))
    broken = text[:index] + text[index + 1 :]
    for error in check_expression(broken, phase, role_of(text, phase)):
        assert 1 <= error.position <= len(broken) + 1
        assert str(error).startswith(error.message)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab.[]*(){}"$#r=!<>~&|^, 019:/\\-_')), max_size=60))
def test_arbitrary_text_never_crashes(text: str) -> None:
    for error in check_expression(text, WAF):
        assert isinstance(error, ExpressionError)
        assert 1 <= error.position <= max(len(text), 1) + 1


class TestPhases:
    def test_response_fields_only_in_response_phases(self) -> None:
        assert errors("http.response.code eq 404", RESPONSE) == []
        assert errors("http.response.code eq 404") == [
            'field "http.response.code" is not available in http_request_firewall_custom rules at 1; response fields'
            " are only available in response header transform rules and in a rate limiting rule's counting expression"
        ]

    def test_a_counting_expression_may_read_the_response(self) -> None:
        assert errors("http.response.code in {401 403}", "http_ratelimit", "counting") == []
        assert errors("http.response.code in {401 403}", "http_ratelimit") != []

    @pytest.mark.parametrize("phase", sorted(set(PHASES) - {WAF, "http_ratelimit", "http_request_firewall_managed"}))
    def test_body_fields_only_in_waf_phases(self, phase: str) -> None:
        assert errors('http.request.body.raw contains "x"', phase) == [
            f'field "http.request.body.raw" is not available in {phase} rules at 1; request body fields are only'
            " available in WAF custom, rate limiting and managed rules"
        ]

    def test_rewrite_functions_only_in_rewrites(self) -> None:
        assert errors('regex_replace(http.request.uri.path, "a", "b") eq "c"') == [
            "regex_replace() is not available in http_request_firewall_custom rules at 1; Cloudflare allows it only in"
            " the rewrite expressions of transform rules and the target URL of redirect rules"
        ]

    def test_one_replace_function_per_expression(self) -> None:
        text = 'concat(regex_replace(http.host, "a", "b"), wildcard_replace(http.request.uri.path, "/*", "/${1}"))'
        assert errors(text, "http_request_transform", "rewrite") == [
            "wildcard_replace() cannot be used here: an expression may use regex_replace() or wildcard_replace() once"
            " (it already uses regex_replace()) at 44"
        ]

    def test_cidr_only_in_custom_and_rate_limiting_rules(self) -> None:
        assert errors("cidr(ip.src, 24, 64) == 192.0.2.0", "http_ratelimit") == []
        assert errors("cidr(ip.src, 24, 64) == 192.0.2.0", "http_request_origin")[0].startswith(
            "cidr() is not available in http_request_origin rules at 1"
        )

    def test_a_rewrite_must_give_a_string(self) -> None:
        assert errors("ip.src", "http_request_late_transform", "rewrite") == [
            "a rewrite expression must give a String, not an IP address at 1"
        ]

    def test_unknown_phase_is_a_programming_error(self) -> None:
        with pytest.raises(ValueError, match="unknown phase"):
            check_expression("ssl", "http_request_sanitize")


def test_several_mistakes_are_all_reported_in_order() -> None:
    found = check_expression('http.hots eq "a" or ip.src.asnum eq "1" or cf.thread_score gt 10', WAF)
    assert [error.position for error in found] == [1, 37, 44]


def test_the_length_limit() -> None:
    text = " or ".join(['http.host eq "a"'] * 250)
    assert errors(text) == [f"the expression is {len(text)} characters long; Cloudflare allows 4096 at 4097"]
