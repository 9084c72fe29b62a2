"""Rules language expressions checked per second, beside a baseline, on one core.

The mix is what rule kinds carry: short filters (host and path matches), WAF rules with sets, lists and functions
over headers, rate limiting counting expressions, rewrite values, and one in eight with a typo. Two passes over the
same mix in the same run:

- baseline: a tokenization pass (one regular expression splitting each expression into words, strings and symbols,
  no grammar and no types), the floor any checker pays to read its input;
- check_expression: `app.api.expressions.check_expression` (tokenizer, parser, types, phase tables).

    .venv/bin/python bench/expressions.py [--expressions 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.api.expressions import Role, check_expression

WAF = "http_request_firewall_custom"
MIX: list[tuple[str, str, Role]] = [
    ('http.host eq "www.example.com"', "http_request_origin", "filter"),
    ('http.request.uri.path wildcard "/api/*" and not ssl', "http_config_settings", "filter"),
    (
        '(http.host eq "example.com" and starts_with(http.request.uri.path, "/blog/"))',
        "http_request_cache_settings",
        "filter",
    ),
    ("ip.src in $office_network or ip.src in {192.0.2.0/24 2001:db8::/32 198.51.100.3..198.51.100.7}", WAF, "filter"),
    (
        'any(lower(http.request.headers.names[*])[*] == "x-debug") and not cf.client.bot'
        ' and ip.src.country in {"CN" "RU" "KP"} and cf.threat_score gt 10',
        WAF,
        "filter",
    ),
    (
        'http.request.uri.path matches r"^/wp-(admin|login)\\.php$" and http.request.method in {"POST" "PUT"}',
        WAF,
        "filter",
    ),
    ('http.request.uri.path eq "/login" and http.request.method eq "POST"', "http_ratelimit", "filter"),
    ("http.response.code in {401 403 429}", "http_ratelimit", "counting"),
    ('concat("/archive", http.request.uri.path)', "http_request_transform", "rewrite"),
    (
        'wildcard_replace(http.request.full_uri, "https://*.example.com/*", "https://example.com/${1}/${2}")',
        "http_request_dynamic_redirect",
        "rewrite",
    ),
    ('any(http.response.headers["server"][*] == "nginx")', "http_response_headers_transform", "filter"),
    ('http.hots eq "example.com" and ip.src.asnum eq "13335"', WAF, "filter"),
]

_WORDS = re.compile(r'\s+|r#*"|"(?:\\.|[^"\\])*"|[A-Za-z_][A-Za-z0-9_.]*|[0-9][0-9A-Fa-f:./]*|[^\sA-Za-z0-9_]')


def baseline(text: str, phase: str, role: Role) -> Any:
    return _WORDS.findall(text)


def checker(text: str, phase: str, role: Role) -> Any:
    return check_expression(text, phase, role)


def measure(fn: Callable[[str, str, Role], Any], count: int) -> float:
    items = [MIX[n % len(MIX)] for n in range(count)]
    start = time.perf_counter()
    for text, phase, role in items:
        fn(text, phase, role)
    return count / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--expressions", type=int, default=20000, help="expressions per pass (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, the best shown (default: %(default)s)")
    args = parser.parse_args()
    count = max(1, min(args.expressions, 1_000_000))
    invalid = sum(1 for text, phase, role in MIX if check_expression(text, phase, role))
    average = sum(len(text) for text, _, _ in MIX) / len(MIX)
    print(
        f"{count} expressions per pass, a mix of {len(MIX)} ({invalid} invalid, {average:.0f} characters on average);"
        f" best of {args.rounds} rounds, interleaved"
    )
    best = {"baseline (tokenization only)": 0.0, "check_expression": 0.0}
    for _ in range(max(1, args.rounds)):
        best["baseline (tokenization only)"] = max(best["baseline (tokenization only)"], measure(baseline, count))
        best["check_expression"] = max(best["check_expression"], measure(checker, count))
    print(f"{'pass':<30} {'expressions/s':>14} {'us/expression':>14}")
    for name, rate in best.items():
        print(f"{name:<30} {rate:>14.0f} {1e6 / rate:>14.1f}")
    ratio = best["baseline (tokenization only)"] / best["check_expression"]
    print(f"check_expression costs {ratio:.1f}x the baseline per expression")
    return 0


if __name__ == "__main__":
    sys.exit(main())
