// Every default and limit of the extension, in one place. Settings the user can change
// live in DEFAULT_SETTINGS (the document sent to the host with `settings_set`); the rest
// are fixed limits of the extension or of the protocol (native-host/PROTOCOL.md).

export const HOST_NAME = "com.backtrail.host";
export const PROTOCOL_VERSION = 1;

const MIB = 1024 * 1024;

/** The user's settings, as stored in chrome.storage.local and sent to the host. */
export const DEFAULT_SETTINGS = Object.freeze({
  exclusions: Object.freeze({
    use_defaults: true, // apply DEFAULT_EXCLUSIONS (urls.js) besides the user's rules
    rules: Object.freeze([]),
  }),
  capture: Object.freeze({
    min_dwell_ms: 5000, // visible time before a page is captured
    max_html_bytes: 2_000_000, // cleaned HTML above this is sent as text instead
    max_text_bytes: 2_000_000, // text is cut to this (and marked truncated)
    skip_password_pages: true, // a page whose DOM holds a password field is not captured
  }),
  history: Object.freeze({
    backfill_days: 90, // range of the history import run on install
  }),
  actions: Object.freeze({
    // Browser actions an assistant may ask for (PROTOCOL.md section 5).
    // Only grouping is on until the user turns the others on in the options page.
    group_tabs: true,
    close_tabs: false,
    capture_tab: false,
    create_bookmark: false,
  }),
});

/** Bounds on what the user may set in the options page. */
export const SETTING_BOUNDS = Object.freeze({
  min_dwell_ms: [0, 600_000],
  max_html_bytes: [10_000, 15 * MIB],
  max_text_bytes: [10_000, 15 * MIB],
  backfill_days: [1, 3650],
  max_rules: 1000,
  max_rule_chars: 1024,
});

export const LIMITS = Object.freeze({
  // Outbound queue (chrome.storage.local): bounded by count and by serialised bytes.
  queueMaxItems: 5000,
  queueMaxBytes: 64 * MIB,
  // Chrome refuses to send a frame above 64 MiB; the host's default cap is 16 MiB.
  maxFrameBytes: 64 * MIB,
  hostDefaultMaxRequestBytes: 16 * MIB,
  maxResponseBytes: MIB,
  // Delivery.
  responseTimeoutMs: 120_000, // no answer to the in-flight queued request → reconnect
  directTimeoutMs: 15_000, // search/status/settings_get/export
  helloTimeoutMs: 10_000,
  internalErrorMaxAttempts: 5, // error 14 is retried this many times in total
  backoffBaseMs: 1000,
  backoffMaxMs: 5 * 60_000,
  backoffJitter: 0.2,
  // Field limits (PROTOCOL.md).
  maxUrlChars: 8192,
  maxTitleChars: 1000,
  maxHighlightChars: 20_000,
  maxNoteChars: 100_000,
  maxQueryChars: 1000,
  // Batches.
  bookmarkBatch: 1000,
  historyBatchItems: 500,
  historyBatchVisits: 5000,
  historyVisitsPerUrl: 200,
  historyMaxResults: 1_000_000,
  maxSnapshotTabs: 5000,
  // Dead letters: rejected highlights/notes kept for the user to see and resend.
  deadLetterMax: 200,
  // The dwell script reports active time at least this often while a page is visible.
  dwellReportMs: 30_000,
  // Search results per page asked by the popup.
  searchLimit: 10,
});

/**
 * Why a visited page was not captured, besides an exclusion rule or "password field"
 * (rules.js): counted like skipped pages (stats.skipped, the host's `skipped`).
 */
export const NOT_CAPTURED = Object.freeze({
  short: "visit too short", // the visit ended before min_dwell_ms had passed
  hidden: "not in view long enough", // long enough, but the tab was mostly in the background
  unreadable: "could not be read", // the page could not be scripted or extracted
});

/** Storage keys (chrome.storage.local unless noted). */
export const KEYS = Object.freeze({
  settings: "settings",
  paused: "paused",
  profile: "profile", // {profile_id, live_since}
  stats: "stats",
  visits: "visits", // open visits by tab id
  deadLetters: "deadLetters",
  queueIndex: "q:index",
  queueItemPrefix: "q:item:",
  backoff: "backoff", // chrome.storage.session
  pending: "pendingHighlight:", // chrome.storage.session, prefix
});
