"""URL validation, canonical form, scrubbing and exclusion rules."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from backtrail.errors import InvalidInput, InvalidUrl
from backtrail.urls import (
    DEFAULT_EXCLUSIONS,
    MAX_URL_LENGTH,
    ExclusionRules,
    canonical_url,
    is_excluded,
    matching_rule,
    normalize_domain,
    scrub_title,
    scrub_url,
    site_domain,
    url_host,
    validate_capture_url,
    validate_exclusion_rule,
)

# ------------------------------------------------------------------ canonical_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTPS://Example.COM/Path/To", "https://example.com/Path/To"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("https://example.com", "https://example.com/"),
        ("https://example.com/a#section-2", "https://example.com/a"),
        ("https://example.com/a?", "https://example.com/a"),
        ("https://example.com/a/./b/../c", "https://example.com/a/c"),
        ("https://example.com/%7euser/%2f%zz", "https://example.com/~user/%2F%25zz"),
        ("https://example.com/a b/é", "https://example.com/a%20b/%C3%A9"),
        ("https://Bücher.de/Straße", "https://xn--bcher-kva.de/Stra%C3%9Fe"),
        ("https://example.com./a", "https://example.com/a"),
        ("http://[2001:DB8::0:1]:8080/x", "http://[2001:db8::1]:8080/x"),
        ("http://127.0.0.1:8000/docs/", "http://127.0.0.1:8000/docs/"),
        ("https://user:hunter2@example.com/a", "https://example.com/a"),
        ("https://example.com\\a\\b?x=\\", "https://example.com/a/b?x=%5C"),
    ],
)
def test_canonical_url_normalises_scheme_host_port_path_and_encoding(
    url: str, expected: str
) -> None:
    assert canonical_url(url) == expected


@pytest.mark.parametrize(
    "param",
    ["utm_source", "utm_medium", "UTM_Campaign", "utm_term", "utm_content", "fbclid", "gclid",
     "dclid", "msclkid", "mc_eid", "mc_cid", "_ga", "_gl", "igshid", "yclid", "twclid",
     "_hsenc", "__hstc", "mkt_tok", "pk_campaign", "srsltid"],
)  # fmt: skip
def test_canonical_url_drops_tracking_parameter(param: str) -> None:
    assert canonical_url(f"https://example.com/a?id=7&{param}=xyz") == "https://example.com/a?id=7"


def test_canonical_url_sorts_parameters_by_name_keeping_repeated_values_in_order() -> None:
    assert (
        canonical_url("https://example.com/s?q=rust&b=2&a=1&b=1&&page=3")
        == "https://example.com/s?a=1&b=2&b=1&page=3&q=rust"
    )


def test_canonical_url_keeps_meaningful_parameters_that_look_like_tracking() -> None:
    assert canonical_url("https://github.com/a/b?ref=main&source=x") == (
        "https://github.com/a/b?ref=main&source=x"
    )


def test_canonical_url_maps_tracking_and_fragment_variants_to_one_identity() -> None:
    variants = [
        "https://example.com/post?id=1",
        "HTTPS://EXAMPLE.com:443/post?utm_source=news&id=1#comments",
        "https://example.com/post?fbclid=abc&id=1&gclid=def",
        "https://example.com/./post?id=1&token=secret",
    ]
    assert {canonical_url(url) for url in variants} == {"https://example.com/post?id=1"}


def test_canonical_url_is_idempotent() -> None:
    samples = [
        "HTTPS://Example.COM:443/Ä b/../c?z=1&a=%7e#x",
        "http://[::1]:80/x?b&a",
        "https://bücher.de/?utm_source=x",
    ]
    for url in samples:
        once = canonical_url(url)
        assert canonical_url(once) == once


# ---------------------------------------------------------------------- scrub_url


@pytest.mark.parametrize(
    "name",
    ["token", "access_token", "Refresh_Token", "id_token", "key", "API_KEY", "apikey",
     "password", "passwd", "pwd", "session", "sessionid", "SID", "auth", "code", "sig",
     "signature", "secret", "client_secret", "jwt", "X-Amz-Signature", "X-Amz-Credential",
     "x-goog-signature", "my_custom_token", "webhook_secret"],
)  # fmt: skip
def test_scrub_url_removes_secret_bearing_parameter_case_insensitively(name: str) -> None:
    assert (
        scrub_url(f"https://example.com/cb?b=2&{name}=s3cr3t&a=1#top")
        == "https://example.com/cb?b=2&a=1#top"
    )


def test_scrub_url_keeps_parameters_that_only_resemble_secret_names() -> None:
    url = "https://example.com/?keyword=x&codec=h264&tokenizer=bpe&sessions=2&monkey=1"
    assert scrub_url(url) == url


def test_scrub_url_removes_userinfo_credentials() -> None:
    assert scrub_url("https://alice:hunter2@example.com/repo") == "https://example.com/repo"
    assert scrub_url("https://ghp_TOKEN@github.com/x") == "https://github.com/x"


def test_scrub_url_removes_tokens_from_fragment_parameters() -> None:
    assert (
        scrub_url("https://app.example.com/cb#access_token=abc&state=xyz&token_type=bearer")
        == "https://app.example.com/cb#state=xyz&token_type=bearer"
    )


def test_scrub_url_removes_session_ids_embedded_in_the_path() -> None:
    assert (
        scrub_url("https://shop.example.com/cart;jsessionid=ABC123?item=4")
        == "https://shop.example.com/cart?item=4"
    )


def test_scrub_url_keeps_tracking_parameters_and_order() -> None:
    url = "https://example.com/a?utm_source=x&z=1&a=2"
    assert scrub_url(url) == url


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("url", "scheme"),
    [
        ("javascript:alert(1)", "javascript"),
        ("JavaScript:alert(document.cookie)", "javascript"),
        ("data:text/html,<script>alert(1)</script>", "data"),
        ("file:///etc/passwd", "file"),
        ("chrome://settings/passwords", "chrome"),
        ("chrome-extension://abcdef/popup.html", "chrome-extension"),
        ("edge://settings", "edge"),
        ("brave://rewards", "brave"),
        ("about:blank", "about"),
        ("blob:https://example.com/0f3a", "blob"),
        ("view-source:https://example.com/", "view-source"),
        ("ftp://example.com/file", "ftp"),
        ("mailto:someone@example.com", "mailto"),
    ],
)
def test_validate_capture_url_rejects_non_web_scheme_naming_it(url: str, scheme: str) -> None:
    with pytest.raises(InvalidUrl) as caught:
        validate_capture_url(url)
    assert f"has scheme '{scheme}'; only http and https URLs can be captured" in str(caught.value)
    assert caught.value.code == "invalid_url"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("example.com/path", "has no scheme"),
        ("/relative/path", "has no scheme"),
        ("http://", "has no host"),
        ("https:///path", "has no host"),
        ("http:example.com", "has no host"),
        ("http://exa mple.com/", "has an invalid host"),
        ("http://a..b/", "has an invalid host"),
        ("http://-leading.example/", "has an invalid host"),
        ("http://" + "a" * 64 + ".com/", "has an invalid host"),
        ("http://%ff%fe/", "has an invalid host"),
        ("http://[::1/", "has an unclosed IPv6 address bracket"),
        ("http://[zz::1]/", "has an invalid IPv6 address"),
        ("http://1.2.3.999/", "has an invalid IPv4 address"),
        ("http://example.com:99999/", "has an invalid port '99999'"),
        ("http://example.com:8o/", "has an invalid port '8o'"),
        ("https://exa\x00mple.com/", "contains control characters"),
        ("https://example.com/a\x01b", "contains control characters"),
        ("https://example.com/\x7fx", "contains control characters"),
        ("https://example.com/\ud800", "contains invalid Unicode (a lone surrogate)"),
    ],
)
def test_validate_capture_url_rejects_malformed_url_with_reason(url: str, reason: str) -> None:
    with pytest.raises(InvalidUrl) as caught:
        validate_capture_url(url)
    assert reason in str(caught.value)


@pytest.mark.parametrize(
    ("value", "type_name"), [(None, "NoneType"), (42, "int"), (b"https://example.com/", "bytes")]
)
def test_validate_capture_url_rejects_non_strings(value: object, type_name: str) -> None:
    with pytest.raises(InvalidUrl, match=f"must be a string, not {type_name}"):
        validate_capture_url(value)


def test_invalid_url_is_an_invalid_input_and_a_value_error() -> None:
    with pytest.raises(InvalidUrl) as caught:
        validate_capture_url("about:blank")
    assert isinstance(caught.value, InvalidInput)
    assert isinstance(caught.value, ValueError)


def test_validate_capture_url_caps_length_as_given_and_once_encoded() -> None:
    base = "https://example.com/"
    assert validate_capture_url(base + "a" * (MAX_URL_LENGTH - len(base))) == base + "a" * (
        MAX_URL_LENGTH - len(base)
    )
    with pytest.raises(InvalidUrl, match="is 8193 characters long; the limit is 8192"):
        validate_capture_url(base + "a" * (MAX_URL_LENGTH - len(base) + 1))
    with pytest.raises(InvalidUrl, match="once percent-encoded; the limit is 8192"):
        validate_capture_url(base + "é" * 2000)


def test_validate_capture_url_strips_outer_whitespace_and_inner_newlines_like_browsers() -> None:
    assert validate_capture_url(" \t https://example.com/a\nb c\r\n ") == (
        "https://example.com/ab%20c"
    )


def test_validate_capture_url_keeps_fragment_userinfo_and_parameters() -> None:
    assert validate_capture_url("https://u:p@Example.com/a?token=1#x") == (
        "https://u:p@example.com/a?token=1#x"
    )


def test_hostile_urls_are_normalised_or_rejected_but_never_crash() -> None:
    rng = random.Random(20240229)
    pieces = [
        "http://", "https://", "HTTP://", "javascript:", "//", "/", "\\", "@", ":", "::",
        "[", "]", "%", "%zz", "%00", "%e2%80", "?", "#", "&", "=", "..", ".", " ", "\t",
        "\n", "\x00", "\x7f", "\u202e", "\ufeff", "\ud83d", "😀", "bücher", "xn--", "-",
        "example.com", "127.0.0.1", "[::1]", "localhost", ":8080", ":99999", "a" * 70,
        "utm_source=x", "token=y", "é" * 5,
    ]  # fmt: skip
    for _ in range(3000):
        url = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        for function in (validate_capture_url, scrub_url, canonical_url, url_host):
            try:
                result = function(url)
            except InvalidUrl:
                continue
            assert isinstance(result, str)
            assert result.isascii()
            assert not any(ord(char) < 0x21 or ord(char) == 0x7F for char in result)
        assert isinstance(is_excluded(url), bool)


def test_url_host_is_lower_case_punycode_without_port() -> None:
    assert url_host("https://WWW.Bücher.de:8443/x") == "www.xn--bcher-kva.de"


def test_normalize_domain_accepts_bare_domains_wildcards_and_urls() -> None:
    assert normalize_domain("Example.COM.") == "example.com"
    assert normalize_domain("*.Bücher.de") == "xn--bcher-kva.de"
    assert normalize_domain("https://news.example.com/a?b") == "news.example.com"
    with pytest.raises(InvalidUrl, match="is not a domain name"):
        normalize_domain("example.com/path")
    with pytest.raises(InvalidUrl, match="must be a string, not int"):
        normalize_domain(5)


# ----------------------------------------------------------------- exclusions


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("https://accounts.google.com/ServiceLogin", "accounts.google.com"),
        ("https://mail.google.com/mail/u/0/#inbox", "mail.google.com"),
        ("https://example.com/login?next=/home", "*/login"),
        ("https://example.com/accounts/login/", "*/login/"),
        ("https://example.com/Login.aspx", "*/login.*"),
        ("https://example.com/users/sign_in", "*/sign_in"),
        ("https://example.com/SignIn", "*/signin"),
        ("https://example.com/oauth/authorize?client_id=1", "*/authorize"),
        ("https://example.com/forgot-password?email=x", "*/forgot-password*"),
        ("https://shop.example.com/checkout", "shop.*/checkout"),
        ("https://www.example-shop.com/checkout", "www.*/checkout"),
        ("https://example-shop.com/cart/checkout", "*/cart/checkout"),
        ("https://shop.example.com/checkout/shipping", "*/checkout/shipping*"),
        ("https://www.paypal.com/myaccount/summary", "www.paypal.com/*"),
        ("https://vault.bitwarden.com/#/vault", "vault.bitwarden.com"),
        ("https://acme.okta.com/signin/verify", "*.okta.com/signin/*"),
        ("https://github.com/settings/tokens", "github.com/settings/*"),
        ("https://chromewebstore.google.com/detail/x", "chromewebstore.google.com"),
    ],
)
def test_default_rules_exclude_sign_in_mail_payment_and_password_pages(
    url: str, rule: str
) -> None:
    assert matching_rule(url) == rule
    assert is_excluded(url) is True


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/docs/index.html",
        "http://localhost:3000/",
        "http://[::1]:8080/guide",
        "https://docs.python.org/3/library/sqlite3.html",
        "https://github.com/rust-lang/rust",
        "https://news.ycombinator.com/item?id=1",
        "https://www.google.com/search?q=login+page",
        "https://example.com/author/jane",
        "https://docs.djangoproject.com/en/3.2/topics/signing.html",
        "https://docs.djangoproject.com/en/3.2/topics/auth/default.html",
        "https://docs.oracle.com/en/java/javase/17/docs/api/java.base/javax/security/auth/"
        "login/LoginContext.html",
        "https://example.com/blog/login-tips",
        "https://git-scm.com/docs/git-checkout",
        "https://oauth.net/2/",
        "https://docs.example.com/saml/overview",
        "https://docs.example.com/payment/intents",
        "https://docs.aws.amazon.com/signin/latest/userguide/what-is-sign-in.html",
        "https://secure.example.org/docs/",
        "https://auth.example.dev/guide",
        "https://accounts.example.net/help",
        "https://login.example.com/docs/",
        "https://developer.paypal.com/api/rest/",
        "https://docs.stripe.com/payments/checkout",
        "https://developer.paypal.com/docs/checkout/",
        "https://docs.adyen.com/online-payments/checkout",
        "https://woocommerce.com/document/checkout/",
    ],
)
def test_default_rules_keep_local_docs_ordinary_pages_and_docs_about_sign_in(url: str) -> None:
    assert matching_rule(url) is None
    assert is_excluded(url) is False


@pytest.mark.parametrize(
    "url", ["chrome://settings", "about:blank", "file:///home/me/a.pdf", "not a url", ""]
)
def test_urls_that_cannot_be_captured_count_as_excluded(url: str) -> None:
    assert is_excluded(url) is True
    assert is_excluded(url, []) is True


def test_domain_rule_matches_the_domain_and_subdomains_only() -> None:
    rules = ["Example.ORG"]
    assert is_excluded("https://example.org/x", rules)
    assert is_excluded("https://deep.sub.example.org/x", rules)
    assert not is_excluded("https://notexample.org/x", rules)
    assert not is_excluded("https://example.org.evil.com/x", rules)


def test_host_glob_rule_matches_hosts_only() -> None:
    rules = ["*.corp.example"]
    assert is_excluded("https://wiki.corp.example/page", rules)
    assert not is_excluded("https://corp.example/page", rules)
    assert not is_excluded("https://example.com/x.corp.example", rules)


def test_path_glob_rule_matches_host_and_path_but_not_query() -> None:
    rules = ["github.com/*/settings*"]
    assert matching_rule("https://github.com/org/settings/hooks", rules) == "github.com/*/settings*"
    assert not is_excluded("https://github.com/org/repo?tab=settings", rules)


def test_full_url_glob_rule_matches_scheme_and_query() -> None:
    rules = ["https://example.com/private/*"]
    assert is_excluded("https://example.com/private/notes?id=2", rules)
    assert not is_excluded("http://example.com/private/notes", rules)


def test_idn_rule_matches_punycode_and_unicode_urls() -> None:
    rules = ["bücher.de"]
    assert is_excluded("https://www.bücher.de/x", rules)
    assert is_excluded("https://www.xn--bcher-kva.de/x", rules)


def test_compiled_rules_expose_their_normalised_text() -> None:
    compiled = ExclusionRules(["  Example.COM ", "*/Private/*", "bücher.de"])
    assert compiled.rules == ("example.com", "*/private/*", "xn--bcher-kva.de")
    assert is_excluded("https://example.com/", compiled)


def test_default_exclusions_are_all_valid_rules() -> None:
    assert [validate_exclusion_rule(rule) for rule in DEFAULT_EXCLUSIONS] == list(
        DEFAULT_EXCLUSIONS
    )


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("exa mple.com", "contains spaces or control characters"),
        ("a\nb", "contains spaces or control characters"),
        ("x" * 1025, "is longer than 1024 characters"),
        (42, "must be a string, not int"),
    ],
)
def test_invalid_exclusion_rules_are_refused(rule: object, reason: str) -> None:
    with pytest.raises(InvalidUrl, match=reason):
        validate_exclusion_rule(rule)


def test_rules_must_be_a_list_not_one_string() -> None:
    with pytest.raises(InvalidUrl, match="must be a list of rules, not one string"):
        is_excluded("https://example.com/", "example.com")


@pytest.mark.parametrize("suffix", ["org", "co.uk", "github.io", "*.com", "xn--p1ai", "any.ck"])
def test_a_public_suffix_is_no_site_domain(suffix: str) -> None:
    with pytest.raises(InvalidUrl, match="public suffix"):
        site_domain(suffix)


@pytest.mark.parametrize(
    ("domain", "expected"),
    [("python.org", "python.org"), ("WWW.BBC.co.uk.", "www.bbc.co.uk"),
     ("me.github.io", "me.github.io"), ("localhost", "localhost"), ("wiki.corp", "wiki.corp"),
     ("corp", "corp"), ("127.0.0.1", "127.0.0.1"),
     ("https://docs.python.org/3/", "docs.python.org")],
)  # fmt: skip
def test_site_domain_normalises_registered_and_unlisted_names(domain: str, expected: str) -> None:
    assert site_domain(domain) == expected


# --------------------------------------------------- default rules, measured on real URLs

DATA = Path(__file__).parent / "data"


def doc_corpus_urls() -> list[str]:
    """The URL ids of the benchmark's real documentation corpus (``data/gen_doc_corpus.py``)."""
    urls, base = [], ""
    text = gzip.decompress((DATA / "doc_corpus_paths.txt.gz").read_bytes()).decode("utf-8")
    for line in text.split("\n"):
        if line.startswith("# "):
            base = line[2:]
        elif line:
            urls.append(base + line)
    return urls


def sign_in_urls() -> list[str]:
    lines = (DATA / "signin_urls.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_no_page_of_the_real_documentation_corpus_is_excluded_by_default() -> None:
    urls = doc_corpus_urls()
    assert len(urls) == 35_048 and len({url_host(url) for url in urls}) == 7
    rules = ExclusionRules(DEFAULT_EXCLUSIONS)
    matched = ((url, rules.match(url)) for url in urls)
    assert [(url, rule) for url, rule in matched if rule is not None] == []


def test_every_real_sign_in_recovery_mail_password_and_checkout_url_is_excluded() -> None:
    urls = sign_in_urls()
    assert len(urls) >= 100
    rules = ExclusionRules(DEFAULT_EXCLUSIONS)
    assert [url for url in urls if rules.match(url) is None] == []


# ------------------------------------------------------------------------ titles

TITLE_CASES = json.loads((DATA / "title_cases.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("title", "expected"), TITLE_CASES)
def test_a_title_holding_a_url_loses_the_url_s_secrets_and_nothing_else(
    title: str, expected: str
) -> None:
    assert scrub_title(title) == expected


def test_hostile_titles_are_scrubbed_without_crashing() -> None:
    rng = random.Random(7)
    alphabet = "ab?#;@&=:/%.\\\"' \t\u00e9\ud7ff"
    for _ in range(2_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        assert isinstance(scrub_title(text), str)
    assert "SECRET" not in scrub_title("x" * 10_000 + " a.example/?token=SECRET")
