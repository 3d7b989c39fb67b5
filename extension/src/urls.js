// URL hygiene, mirroring python/backtrail/urls.py so the extension and the host agree on
// what is capturable, what is secret and what is excluded:
// - isCapturableUrl: http(s) with a host, at most 8,192 characters;
// - scrubUrl: no userinfo, no secret-bearing query/fragment/;path parameters;
// - scrubTitle: the same for every URL inside a text, with or without a scheme (Chromium
//   titles a page without <title>, or a .txt file, with its raw URL);
// - canonicalUrl: scrubbed, no fragment, no tracking parameters, parameters sorted;
// - compileRules / matchRule: the exclusion rule syntax of ExclusionRules.
// The WHATWG URL parser (browser and Node alike) does the normalisation: lower-case
// scheme and host, punycode, default port dropped, dot segments resolved.

import { LIMITS } from "./config.js";

export const SECRET_PARAMS = new Set([
  "token", "access_token", "refresh_token", "id_token", "auth_token", "oauth_token",
  "oauth_verifier", "key", "api_key", "apikey", "api-key", "password", "passwd",
  "pwd", "pass", "session", "sessionid", "session_id", "sid", "phpsessid",
  "jsessionid", "auth", "authorization", "code", "sig", "signature", "secret",
  "client_secret", "jwt", "credential", "credentials", "ticket", "otp", "csrf",
  "csrf_token", "csrftoken", "xsrf", "x-amz-signature", "x-amz-credential",
  "x-amz-security-token", "x-goog-signature", "x-goog-credential", "awsaccesskeyid",
  "private_token", "access_key", "secret_key", "saml", "samlresponse",
  "samlrequest",
]);
const SECRET_SUFFIXES = ["token", "secret", "password", "passwd", "signature", "apikey", "api_key"];

export const TRACKING_PARAMS = new Set([
  "fbclid", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "msclkid", "yclid",
  "ysclid", "igshid", "twclid", "ttclid", "li_fat_id", "mc_eid", "mc_cid", "mkt_tok",
  "_ga", "_gl", "_ke", "s_cid", "ref_src", "ref_url", "wickedid", "rb_clickid",
  "srsltid", "_openstat", "oly_anon_id", "oly_enc_id", "vero_id", "vero_conv",
  "hsctatracking", "trk", "trkcampaign", "spm", "epik", "cmpid", "ncid",
]);
const TRACKING_PREFIXES = ["utm_", "pk_", "mtm_", "matomo_", "hsa_", "_hs", "__hs"];

/** Same list as backtrail.urls.DEFAULT_EXCLUSIONS (a test keeps them equal). */
export const DEFAULT_EXCLUSIONS = Object.freeze([
  // Extension stores.
  "chromewebstore.google.com", "chrome.google.com/webstore*",
  "microsoftedge.microsoft.com/addons*",
  // Identity providers and account pages.
  "accounts.google.com", "myaccount.google.com", "login.microsoftonline.com",
  "login.microsoft.com", "login.live.com", "account.live.com", "account.microsoft.com",
  "appleid.apple.com", "idmsa.apple.com", "iforgot.apple.com", "signin.aws.amazon.com",
  "id.atlassian.com", "login.okta.com", "duosecurity.com", "login.yahoo.com",
  "accounts.firefox.com", "login.gov", "login.salesforce.com", "auth.pingone.*",
  "cloudflareaccess.com", "auth.openai.com", "accounts.spotify.com", "signin.ebay.com",
  "portal.azure.com/signin/*", "*.okta.com/signin/*", "github.com/login*",
  "github.com/session*", "github.com/settings/*",
  // Mail and private messaging.
  "mail.google.com", "outlook.live.com", "outlook.office.com", "outlook.office365.com",
  "mail.yahoo.com", "mail.proton.me", "app.fastmail.com", "mail.aol.com", "mail.zoho.com",
  "app.tuta.com", "mail.tutanota.com", "www.icloud.com/mail*", "app.hey.com",
  "web.whatsapp.com", "messages.google.com", "web.telegram.org",
  // Password managers.
  "passwords.google.com", "passwords.google", "vault.bitwarden.com", "vault.bitwarden.eu",
  "my.1password.com", "my.1password.eu", "lastpass.com/vault*", "app.dashlane.com",
  "keepersecurity.com/vault*", "app.nordpass.com", "pass.proton.me",
  // Payments.
  "checkout.stripe.com", "billing.stripe.com", "dashboard.stripe.com", "pay.google.com",
  "payments.google.com", "paypal.com/*", "www.paypal.com/*", "pay.amazon.com",
  "pay.shopify.com", "checkout.square.site",
  // Sign-in steps on any site: the last path segment names the step.
  "*/login", "*/login/", "*/login.*", "*/login2", "*/login2/", "*/log-in", "*/log-in/",
  "*/logon", "*/logon/", "*/logon.*", "*/signin", "*/signin/", "*/sign-in", "*/sign-in/",
  "*/sign_in", "*/sign_in/", "*/signup", "*/signup/", "*/sign-up", "*/sign-up/",
  "*/u/login*", "*/wp-login.php", "*/wp-admin", "*/wp-admin/*", "*/special:userlogin*",
  "*/special:passwordreset*", "*://*title=special:userlogin*",
  "*://*/ucp.php?*mode=login*",
  // Single sign-on and delegated authorisation endpoints.
  "*/authorize", "*/o/oauth2/*", "*/protocol/openid-connect/auth", "*/adfs/ls*",
  "*/idp/profile/saml2/*", "*/saml/login*", "*/saml/sso*", "*/saml2/sso*",
  // Account recovery and second factors.
  "*/forgot", "*/forgot/", "*/forgot-password*", "*/forgot_password*",
  "*/forgotpassword*", "*/reset-password*", "*/reset_password*", "*/password-reset*",
  "*/password_reset*", "*/request-password-reset*", "*/password/reset*", "*/password/new",
  "*/user/password", "*/account/recover*", "*/account-recovery*", "*/recover/initiate*",
  "*/loginhelp", "*/helpwithlogininfo", "*/sessions/two-factor*", "*/two-factor",
  "*/two-factor/verify*", "*/2fa", "*/2fa/", "*/2fa/verify*", "*/mfa", "*/mfa/",
  "*/mfa/challenge*",
  // Checkout steps of shops: on the shop's own host or under its cart (documentation about
  // checkout is kept; a checkout page anywhere else is known by its card fields).
  "www.*/checkout", "www.*/checkout/", "shop.*/checkout", "store.*/checkout",
  "*/cart/checkout", "*/cart/checkout/", "*/shop/checkout", "*/shop/checkout/",
  "*/store/checkout", "*/basket/checkout", "*/checkout/onepage*", "*/checkout/cart*",
  "*/checkout/shipping*", "*/checkout/pay*", "*/checkout/entry/*", "*/checkouts/*",
  "*/chk/xo*", "*/gp/buy/*",
]);

const CAPTURE_SCHEMES = new Set(["http:", "https:"]);

/** Parse an http(s) URL with a host, or return null. */
export function parseWebUrl(url) {
  if (typeof url !== "string" || url.length === 0 || url.length > LIMITS.maxUrlChars) {
    return null;
  }
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  if (!CAPTURE_SCHEMES.has(parsed.protocol) || !parsed.hostname) return null;
  if (parsed.href.length > LIMITS.maxUrlChars) return null;
  return parsed;
}

export function isCapturableUrl(url) {
  return parseWebUrl(url) !== null;
}

/** The scheme of any URL-ish string, lower-case without the colon ("" if none). */
export function schemeOf(url) {
  const match = typeof url === "string" ? /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url.trim()) : null;
  return match ? match[1].toLowerCase() : "";
}

function paramName(pair) {
  const name = pair.split("=", 1)[0];
  try {
    return decodeURIComponent(name.replace(/\+/g, " ")).toLowerCase();
  } catch {
    return name.toLowerCase();
  }
}

export function isSecretParam(name) {
  const lower = name.toLowerCase();
  return SECRET_PARAMS.has(lower) || SECRET_SUFFIXES.some((suffix) => lower.endsWith(suffix));
}

function isTrackingParam(name) {
  return TRACKING_PARAMS.has(name) || TRACKING_PREFIXES.some((prefix) => name.startsWith(prefix));
}

function filterParams(query, { tracking, sort }) {
  const pairs = query.split("&").filter((pair) => pair !== "");
  const kept = pairs.filter((pair) => {
    const name = paramName(pair);
    return !isSecretParam(name) && !(tracking && isTrackingParam(name));
  });
  if (sort) {
    // Array.prototype.sort is stable: repeated names keep their order.
    kept.sort((a, b) => (paramName(a) < paramName(b) ? -1 : paramName(a) > paramName(b) ? 1 : 0));
  }
  return kept.join("&");
}

function scrubPath(path) {
  if (!path.includes(";")) return path;
  return path
    .split("/")
    .map((segment) => {
      const [head, ...params] = segment.split(";");
      return [head, ...params.filter((param) => !isSecretParam(paramName(param)))].join(";");
    })
    .join("/");
}

function scrubParsed(parsed) {
  const out = new URL(parsed.href);
  out.username = "";
  out.password = "";
  out.pathname = scrubPath(out.pathname);
  const query = filterParams(out.search.slice(1), { tracking: false, sort: false });
  out.search = query ? `?${query}` : "";
  const fragment = out.hash.slice(1);
  if (fragment.includes("=")) {
    // OAuth implicit flows put tokens in the fragment: treat it as parameters.
    const kept = filterParams(fragment.replace(/^[!/?]+/, ""), { tracking: false, sort: false });
    out.hash = kept ? `#${kept}` : "";
  }
  return out;
}

/** The URL without credentials or secret parameters, or null if it is not capturable. */
export function scrubUrl(url) {
  const parsed = parseWebUrl(url);
  return parsed ? scrubParsed(parsed).href : null;
}

const URLISH = /[^\s"'<>()[\]{}]+/g;
const SCHEMED = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;

function withoutSecrets(params) {
  const pairs = params.split("&");
  const kept = pairs.filter((pair) => !(pair && isSecretParam(paramName(pair))));
  return kept.length === pairs.length ? params : kept.filter(Boolean).join("&");
}

function partition(text, mark) {
  const at = text.indexOf(mark);
  return at < 0 ? [text, "", ""] : [text.slice(0, at), mark, text.slice(at + 1)];
}

function scrubUrlish(token) {
  const scheme = SCHEMED.exec(token);
  const head = scheme ? scheme[0] : "";
  let rest = token.slice(head.length);
  const ends = ["/", "?", "#"].map((mark) => rest.indexOf(mark)).filter((at) => at >= 0);
  const authority = ends.length ? Math.min(...ends) : rest.length;
  const at = rest.lastIndexOf("@", authority - 1);
  if (at >= 0 && at < authority && (scheme || rest.slice(0, at).includes(":"))) rest = rest.slice(at + 1); // user:password@
  const [beforeHash, hashed, fragment] = partition(rest, "#");
  const [path, asked, query] = partition(beforeHash, "?");
  let out = head + scrubPath(path);
  if (asked) {
    const kept = withoutSecrets(query);
    out += kept === query ? `?${query}` : kept ? `?${kept}` : "";
  }
  if (hashed) {
    const params = fragment.includes("=");
    const body = params ? fragment.replace(/^[!/?]+/, "") : fragment;
    const kept = params ? withoutSecrets(body) : fragment;
    out += kept === body ? `#${fragment}` : kept ? `#${kept}` : "";
  }
  return out;
}

/**
 * `text` with every URL in it scrubbed as scrubUrl scrubs URLs (userinfo, secret query,
 * fragment and ;param path parameters), with or without a scheme; the rest is kept as it
 * is (same rules as backtrail.urls.scrub_title; tests/data/title_cases.json holds both).
 */
export function scrubTitle(text) {
  if (typeof text !== "string" || !/[?#;@]/.test(text)) return text;
  return text.replace(URLISH, scrubUrlish);
}

/** The identity of a page: scrubbed, no fragment or tracking parameters, params sorted. */
export function canonicalUrl(url) {
  const parsed = parseWebUrl(url);
  if (!parsed) return null;
  const out = scrubParsed(parsed);
  out.hash = "";
  const query = filterParams(out.search.slice(1), { tracking: true, sort: true });
  out.search = query ? `?${query}` : "";
  return out.href;
}

/** A user-typed domain as hosts are spelled ("Bücher.DE." → "xn--bcher-kva.de"), or null. */
export function normalizeDomain(domain) {
  if (typeof domain !== "string") return null;
  let text = domain.trim();
  if (text.includes("://")) {
    const parsed = parseWebUrl(text);
    return parsed ? parsed.hostname : null;
  }
  if (text.startsWith("*.")) text = text.slice(2);
  text = text.replace(/^\.+/, "").replace(/\.+$/, "");
  if (!text || /[/@\s]/.test(text)) return null;
  const parsed = parseWebUrl(`http://${text}/`);
  return parsed ? parsed.hostname : null;
}

function domainMatches(host, domain) {
  return host === domain || host.endsWith(`.${domain}`);
}

/**
 * Check an exclusion rule and return it normalised, or throw an Error saying why not.
 * Syntax: "example.com" (host and subdomains), "login.*" (host glob), "*\/login*" (glob
 * over host/path), "https://example.com/x/*" (glob over the canonical URL).
 */
export function validateRule(rule) {
  if (typeof rule !== "string") throw new Error("a rule must be a string");
  const text = rule.trim();
  if (!text) throw new Error("a rule must not be empty");
  if (text.length > 1024) throw new Error("a rule must be at most 1024 characters");
  if (/[\s\u0000-\u001f\u007f]/.test(text)) throw new Error(`rule "${text}" contains spaces`);
  if (!text.includes("*") && !text.includes("/")) {
    const domain = normalizeDomain(text);
    if (!domain) throw new Error(`"${text}" is not a domain name`);
    return domain;
  }
  if (!text.includes("*") && text.includes("://")) {
    const canonical = canonicalUrl(text);
    if (!canonical) throw new Error(`"${text}" is not an http(s) URL`);
    return canonical;
  }
  return text.toLowerCase();
}

function globToRegExp(glob) {
  const body = glob
    .split("*")
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${body}$`, "i");
}

/** Compile rules (invalid ones are skipped and listed in `invalid`). */
export function compileRules(rules) {
  const compiled = [];
  const invalid = [];
  for (const rule of rules) {
    let text;
    try {
      text = validateRule(rule);
    } catch (error) {
      invalid.push({ rule, reason: error.message });
      continue;
    }
    if (!text.includes("*") && !text.includes("/")) {
      compiled.push({ text, kind: "domain", value: text });
    } else {
      const kind = text.includes("://") ? "url_glob" : text.includes("/") ? "path_glob" : "host_glob";
      compiled.push({ text, kind, pattern: globToRegExp(text) });
    }
  }
  return { rules: compiled, invalid };
}

/** The first compiled rule that `url` matches, or null. Non-capturable URLs match "*". */
export function matchRule(url, compiled) {
  const canonical = canonicalUrl(url);
  if (!canonical) return "*";
  const parsed = new URL(canonical);
  const host = parsed.hostname;
  const hostPath = host + parsed.pathname;
  for (const rule of compiled.rules) {
    let hit;
    if (rule.kind === "domain") hit = domainMatches(host, rule.value);
    else if (rule.kind === "host_glob") hit = rule.pattern.test(host);
    else if (rule.kind === "path_glob") hit = rule.pattern.test(hostPath);
    else hit = rule.pattern.test(canonical);
    if (hit) return rule.text;
  }
  return null;
}

/** The rules in force for an exclusions setting: the defaults (if on) plus the user's. */
export function effectiveRules(exclusions) {
  const user = Array.isArray(exclusions?.rules) ? exclusions.rules : [];
  const base = exclusions?.use_defaults === false ? [] : DEFAULT_EXCLUSIONS;
  return compileRules([...base, ...user]);
}

/** The host of a capturable URL (lower-case, punycode), or null. */
export function hostOf(url) {
  const parsed = parseWebUrl(url);
  return parsed ? parsed.hostname : null;
}

export { domainMatches };
