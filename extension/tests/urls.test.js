import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync, existsSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import {
  DEFAULT_EXCLUSIONS, canonicalUrl, compileRules, effectiveRules, isCapturableUrl, matchRule,
  normalizeDomain, scrubTitle, scrubUrl, validateRule, SECRET_PARAMS,
} from "../src/urls.js";

test("scrub_removes_secret_query_parameters_and_keeps_the_rest", () => {
  assert.equal(
    scrubUrl("https://example.com/a?token=abc&q=rust&api_key=k&Session=s&x=1"),
    "https://example.com/a?q=rust&x=1",
  );
});

test("scrub_removes_every_listed_secret_name", () => {
  for (const name of ["token", "access_token", "key", "api_key", "password", "session", "sid", "auth", "code", "sig", "signature", "secret", "jwt"]) {
    assert.equal(scrubUrl(`https://example.com/?${name}=v&keep=1`), "https://example.com/?keep=1", name);
  }
});

test("scrub_removes_names_ending_in_secret_suffixes", () => {
  assert.equal(scrubUrl("https://e.com/?github_token=1&client_secret=2&my_password=3&ok=4"), "https://e.com/?ok=4");
});

test("scrub_drops_userinfo_and_the_query_mark_when_nothing_is_left", () => {
  assert.equal(scrubUrl("https://user:pw@example.com/p?token=1"), "https://example.com/p");
});

test("scrub_treats_a_fragment_with_parameters_as_parameters", () => {
  assert.equal(scrubUrl("https://app.example.com/cb#access_token=xyz&state=7"), "https://app.example.com/cb#state=7");
  assert.equal(scrubUrl("https://example.com/doc#section-2"), "https://example.com/doc#section-2");
});

test("scrub_removes_session_parameters_in_path_segments", () => {
  assert.equal(scrubUrl("https://shop.example/cart;jsessionid=ABC123?x=1"), "https://shop.example/cart?x=1");
});

test("scrub_keeps_percent_encoded_parameters_and_checks_their_decoded_names", () => {
  assert.equal(scrubUrl("https://e.com/?to%6Ben=1&q=a%20b"), "https://e.com/?q=a%20b");
});

test("scrub_refuses_non_web_urls", () => {
  for (const url of ["chrome://settings", "about:blank", "file:///etc/passwd", "javascript:alert(1)", "data:text/html,x", "chrome-extension://abc/x.html", "", "https://", 42]) {
    assert.equal(scrubUrl(url), null, String(url));
    assert.equal(isCapturableUrl(url), false, String(url));
  }
});

test("urls_longer_than_8192_characters_are_not_capturable", () => {
  assert.equal(isCapturableUrl(`https://e.com/${"a".repeat(8200)}`), false);
});

test("canonical_url_drops_fragment_and_tracking_and_sorts_parameters", () => {
  assert.equal(
    canonicalUrl("HTTPS://Example.COM:443/Path?b=2&utm_source=x&a=1&fbclid=z#frag"),
    "https://example.com/Path?a=1&b=2",
  );
});

test("normalize_domain_lowercases_and_punycodes", () => {
  assert.equal(normalizeDomain("Bücher.DE."), "xn--bcher-kva.de");
  assert.equal(normalizeDomain("*.Example.com"), "example.com");
  assert.equal(normalizeDomain("https://sub.example.com/x"), "sub.example.com");
  assert.equal(normalizeDomain("not a domain"), null);
});

const DATA = new URL("../../tests/data/", import.meta.url);

function docCorpusUrls() {
  let base = "";
  const urls = [];
  for (const line of gunzipSync(readFileSync(new URL("doc_corpus_paths.txt.gz", DATA))).toString("utf8").split("\n")) {
    if (line.startsWith("# ")) base = line.slice(2);
    else if (line) urls.push(base + line);
  }
  return urls;
}

function signInUrls() {
  return readFileSync(new URL("signin_urls.txt", DATA), "utf8")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith("#"));
}

test("no_page_of_the_real_documentation_corpus_is_excluded_by_default", { skip: !existsSync(DATA) }, () => {
  const rules = effectiveRules({ use_defaults: true, rules: [] });
  const urls = docCorpusUrls();
  assert.equal(urls.length, 35_048);
  assert.deepEqual(urls.map((url) => [url, matchRule(url, rules)]).filter(([, rule]) => rule !== null), []);
});

test("every_real_sign_in_recovery_mail_password_and_checkout_url_is_excluded", { skip: !existsSync(DATA) }, () => {
  const rules = effectiveRules({ use_defaults: true, rules: [] });
  const urls = signInUrls();
  assert.ok(urls.length >= 100);
  assert.deepEqual(urls.filter((url) => matchRule(url, rules) === null), []);
});

test("default_rules_name_the_step_not_a_substring", () => {
  const rules = effectiveRules({ use_defaults: true, rules: [] });
  const cases = {
    "https://example.com/users/login?next=/": "*/login",
    "https://example.com/Login.aspx": "*/login.*",
    "https://example.com/signin": "*/signin",
    "https://example.com/oauth/authorize": "*/authorize",
    "https://shop.example.com/checkout/shipping": "*/checkout/shipping*",
    "https://www.paypal.com/myaccount": "www.paypal.com/*",
    "https://github.com/settings/tokens": "github.com/settings/*",
  };
  for (const [url, rule] of Object.entries(cases)) assert.equal(matchRule(url, rules), rule, url);
});

test("default_rules_do_not_exclude_localhost_ordinary_pages_or_docs_about_sign_in", () => {
  const rules = effectiveRules({ use_defaults: true, rules: [] });
  for (const url of [
    "http://127.0.0.1:8000/page.html", "http://localhost:3000/docs", "https://en.wikipedia.org/wiki/Rust",
    "https://github.com/rust-lang/rust", "https://docs.djangoproject.com/en/3.2/topics/signing.html",
    "https://example.com/blog/login-tips", "https://git-scm.com/docs/git-checkout", "https://oauth.net/2/",
    "https://secure.example.org/docs/", "https://auth.example.dev/guide", "https://login.example.com/docs/",
  ]) {
    assert.equal(matchRule(url, rules), null, url);
  }
});

test("domain_rule_matches_subdomains_but_not_lookalikes", () => {
  const rules = compileRules(["example.com"]);
  assert.equal(matchRule("https://a.b.example.com/x", rules), "example.com");
  assert.equal(matchRule("https://example.com.evil.net/", rules), null);
  assert.equal(matchRule("https://notexample.com/", rules), null);
});

test("host_glob_path_glob_and_url_glob_rules_match_their_subjects", () => {
  const rules = compileRules(["*.internal", "*/private/*", "https://docs.example.com/drafts/*"]);
  assert.equal(matchRule("https://wiki.internal/page", rules), "*.internal");
  assert.equal(matchRule("https://site.org/private/a", rules), "*/private/*");
  assert.equal(matchRule("https://site.org/public/a", rules), null);
  assert.equal(matchRule("https://docs.example.com/drafts/x?y=1", rules), "https://docs.example.com/drafts/*");
  assert.equal(matchRule("http://docs.example.com/drafts/x", rules), null);
});

test("rules_are_case_insensitive", () => {
  const rules = compileRules(["*/Private/*", "Example.ORG"]);
  assert.equal(matchRule("https://site.org/PRIVATE/a", rules), "*/private/*");
  assert.equal(matchRule("https://EXAMPLE.org/", rules), "example.org");
});

test("invalid_rules_are_reported_and_skipped", () => {
  const compiled = compileRules(["good.com", "has space", "", 7]);
  assert.equal(compiled.rules.length, 1);
  assert.equal(compiled.invalid.length, 3);
  assert.throws(() => validateRule("a b"), /spaces/);
});

test("user_rules_apply_without_the_defaults_when_defaults_are_off", () => {
  const rules = effectiveRules({ use_defaults: false, rules: ["news.example"] });
  assert.equal(matchRule("https://accounts.google.com/", rules), null);
  assert.equal(matchRule("https://news.example/today", rules), "news.example");
});

const PYTHON_URLS = new URL("../../python/backtrail/urls.py", import.meta.url);

function pythonTuple(source, name) {
  const start = source.indexOf(`${name}`);
  const open = source.indexOf("(", start);
  const close = source.indexOf("\n)", open);
  return [...source.slice(open, close).matchAll(/"([^"]+)"/g)].map((m) => m[1]);
}

test("default_exclusions_and_secret_params_equal_the_python_host_lists", { skip: !existsSync(PYTHON_URLS) }, () => {
  const source = readFileSync(PYTHON_URLS, "utf8");
  assert.deepEqual([...DEFAULT_EXCLUSIONS], pythonTuple(source, "DEFAULT_EXCLUSIONS: tuple[str, ...] ="));
  assert.deepEqual([...SECRET_PARAMS].sort(), pythonTuple(source, "SECRET_PARAMS = frozenset(").sort());
});

test("a_title_holding_a_url_loses_the_url_s_secrets_and_nothing_else_as_in_python", { skip: !existsSync(DATA) }, () => {
  const cases = JSON.parse(readFileSync(new URL("title_cases.json", DATA), "utf8"));
  assert.ok(cases.length >= 20);
  for (const [title, expected] of cases) assert.equal(scrubTitle(title), expected, title);
});
