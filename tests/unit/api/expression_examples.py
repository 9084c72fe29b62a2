"""Expressions from Cloudflare's Rules language documentation (operators, values, functions and field reference
pages), each with a phase whose rules may use it."""

from __future__ import annotations

WAF = "http_request_firewall_custom"
RESPONSE = "http_response_headers_transform"

VALID: list[tuple[str, str]] = [
    ('http.request.uri.path matches "/autodiscover\\.(xml|src)$"', WAF),
    ('http.host eq "www.example.com" and not cf.edge.server_port in {80 443}', WAF),
    ('http.request.uri.path eq "/articles/2008/"', WAF),
    ("ip.src ne 203.0.113.0", WAF),
    ("cf.waf.score lt 10", WAF),
    ("cf.waf.score ge 60", WAF),
    ('http.request.uri.path contains "/articles/"', WAF),
    ('http.request.uri.path wildcard "/articles/*"', WAF),
    ('http.request.uri.path strict wildcard "/AdminTeam/*"', WAF),
    ('http.request.uri.path matches "^/articles/200[7-8]/$"', WAF),
    ('http.request.uri.path ~ "^/articles/200[7-8]/$"', WAF),
    ('lower(http.host) == "www.cloudflare.com"', WAF),
    ('lower(http.request.uri.path) contains "/wp-login.php"', WAF),
    ('any(url_decode(http.request.body.form.values[*])[*] contains "an xss attack")', WAF),
    ('all(http.request.headers["content-type"][*] == "application/json")', WAF),
    ('any(http.request.cookies["app"][*] == "test")', WAF),
    ('any(http.request.uri.args["search"][*] == "red+apples")', WAF),
    ('any(http.request.headers.names[*] == "content-type")', WAF),
    ("any(len(http.request.headers.values[*])[*] gt 10)", WAF),
    ('any(lower(http.request.headers.names[*])[*] == "content-type")', WAF),
    ('http.request.headers.names[0] == "Content-Type"', WAF),
    ('all(len(http.request.uri.args["filter"][*])[*] in {3 4})', WAF),
    ('all(not len(http.request.uri.args["filter"][*])[*] in {3 4})', WAF),
    ('len(http.request.uri.args["filter"]) >= 0', WAF),
    ('not len(http.request.uri.args["order"]) >= 0', WAF),
    ("(ip.src in $office_network)", WAF),
    ('http.host in {"example.com" "example.net"}', WAF),
    ("ip.src in {198.51.100.1 198.51.100.3..198.51.100.7 192.0.2.0/24 2001:0db8::/32}", WAF),
    ("cf.edge.server_port in {8000..8009 8080..8089}", WAF),
    ('http.request.uri.path matches r#"a"b"#', WAF),
    ('http.request.uri.path matches r##"a"#b"##', WAF),
    ('http.request.uri.path matches r"/api/login\\.aspx$"', WAF),
    ('http.request.uri.path matches "a\\"b"', WAF),
    ("ssl", WAF),
    ("not ssl", WAF),
    ("true", "http_request_firewall_managed"),
    ("any(cf.bot_management.detection_ids[*] eq 33554817)", WAF),
    (
        "not cf.bot_management.verified_bot and not cf.bot_management.static_resource"
        " and not cf.bot_management.corporate_proxy and cf.bot_management.score lt 30",
        WAF,
    ),
    ('cf.waf.content_scan.has_obj and http.request.uri.path eq "/upload"', WAF),
    ('cf.waf.content_scan.num_malicious_obj > 2 and http.request.uri.path eq "/upload"', WAF),
    ('any(cf.waf.content_scan.obj_sizes[*] > 512000) and http.request.uri.path eq "/upload"', WAF),
    (
        'any(cf.waf.content_scan.obj_results[*] in {"suspicious" "infected"}) and http.request.uri.path eq "/upload"',
        WAF,
    ),
    ('(cf.llm.prompt.pii_detected and any(cf.llm.prompt.pii_categories[*] in {"EMAIL_ADDRESS" "BANK_ACCOUNT"}))', WAF),
    ('(cf.llm.prompt.custom_topic_categories["competitors"] lt 30)', WAF),
    ('any(http.request.body.multipart.names[*][0] == "picture")', WAF),
    ('http.request.body.mime in {"image/bmp" "image/gif" "image/jpeg" "image/png" "image/tiff"}', WAF),
    ('ends_with(http.request.uri.path, ".html")', WAF),
    ('starts_with(http.request.uri.path, "/blog")', WAF),
    ('lookup_json_string(http.request.body.raw, "network", "name") == "cloudflare"', WAF),
    ('lookup_json_integer(http.request.body.raw, 1, "product_id") == 456', WAF),
    ('(any(decode_base64(http.request.headers["client_id"][*])[*] eq "123abc"))', WAF),
    ('url_decode(http.request.uri.path) matches "(?u)\\p{Hangul}+"', WAF),
    ("cidr(ip.src, 24, 24) == 113.10.0.0", WAF),
    ("cidr6(ip.src, 24) == 2001:0000:0000:0000:0000:0000:0000:0000", "http_ratelimit"),
    (
        'http.host == "downloads.example.com"'
        ' and not is_timed_hmac_valid_v0("mysecretkey", http.request.uri, 100000, http.request.timestamp.sec, 8)',
        WAF,
    ),
    (
        'is_timed_hmac_valid_v0("mysecretkey", concat(http.request.uri, http.request.headers["timestamp"][0], "-",'
        ' http.request.headers["mac"][0]), 100000, http.request.timestamp.sec, 0)',
        WAF,
    ),
    ('ip.src.country in {"GB" "FR"} or ip.src.asnum eq 13335', "http_request_cache_settings"),
    ('http.request.uri.path eq "/" xor ssl', "http_config_settings"),
    ('http.host eq "a.example.com" || (http.host eq "b.example.com" && !ssl)', "http_request_origin"),
    ('http.request.full_uri wildcard "http*://example.com/*" and not ssl', "http_request_dynamic_redirect"),
    ('any(http.response.headers["server"][*] == "nginx")', RESPONSE),
    ("http.response.code eq 403 and cf.response.1xxx_code eq 1020", RESPONSE),
    ('any(raw.http.response.headers.names[*] == "content-type")', RESPONSE),
    ('http.remove_bytes_is_not_a_field eq "x"'.replace("http.remove_bytes_is_not_a_field", "http.host"), WAF),
    ('remove_bytes(http.host, "\\x2e\\x77") == "cloudflarecom"', WAF),
    ('substring(http.request.body.raw, 0, -2) eq "asdfgh"', WAF),
    ('join(http.request.headers.names, ",") contains "x-debug"', WAF),
    ('split(http.request.headers["x-categories"][0], ",", 64)[0] == "groceries"', RESPONSE),
    (
        "http.response.code in {500..599}",
        "http_ratelimit",
    ),
]
"""Filters that must pass; the rate limit entry with a response field is a counting expression."""

REWRITES: list[tuple[str, str]] = [
    ('concat("/archive", http.request.uri.path)', "http_request_transform"),
    ('concat("userid=123&", http.request.uri.query)', "http_request_transform"),
    ('regex_replace(http.request.uri.path, "^/foo/([^/]*)/(.*)$", "/bar/${2}/${1}")', "http_request_transform"),
    (
        'wildcard_replace(http.request.full_uri, "https://*.example.com/*/*", "https://example.com/${1}/${2}/${3}")',
        "http_request_dynamic_redirect",
    ),
    ('wildcard_replace(http.request.uri.path, "/apps/*", "/${1}", "s")', "http_request_transform"),
    ('concat("https://www.example.com", http.request.uri.path)', "http_request_dynamic_redirect"),
    ("to_string(cf.bot_management.score)", "http_request_late_transform"),
    ("uuidv4(cf.random_seed)", "http_request_late_transform"),
    ('remove_query_args(http.request.uri.query, "country")', "http_request_transform"),
    ('concat("/", http.request.accepted_languages[0], http.request.uri.path)', "http_request_transform"),
    ("ip.src.timezone.name", "http_request_late_transform"),
    ('regex_replace(http.host, r"\\\\", "a")', "http_request_late_transform"),
    ('regex_replace(http.host, "\\\\\\\\", "a")', "http_request_late_transform"),
    ('join(split(http.response.headers["x-a"][0], ",", 8), ";")', RESPONSE),
]
"""Rewrite values (URL rewrites, header values, redirect targets) that must pass."""
