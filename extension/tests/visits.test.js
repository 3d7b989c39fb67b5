import test from "node:test";
import assert from "node:assert/strict";
import { VisitBook, referrerFor } from "../src/visits.js";

const page = (url, extra = {}) => ({ url, title: "T", time: 1000, window_id: 1, transition: "link", ...extra });

test("starting_a_visit_ends_the_previous_one_of_the_same_tab", () => {
  const book = new VisitBook();
  const first = book.start(5, page("https://a.com/")).visit;
  const { visit, ended } = book.start(5, page("https://b.com/"));
  assert.equal(ended.visit_id, first.visit_id);
  assert.equal(book.get(5).visit_id, visit.visit_id);
  assert.notEqual(visit.visit_id, first.visit_id);
});

test("dwell_reports_only_move_the_clocks_forward", () => {
  const book = new VisitBook();
  const { visit } = book.start(1, page("https://a.com/"));
  book.report(1, visit.visit_id, { visible_ms: 5000, active_ms: 3000 });
  book.report(1, visit.visit_id, { visible_ms: 4000, active_ms: 1000 });
  assert.equal(book.get(1).visible_ms, 5000);
  assert.equal(book.get(1).dwell_ms, 3000);
});

test("reports_for_an_old_visit_are_ignored", () => {
  const book = new VisitBook();
  const old = book.start(1, page("https://a.com/")).visit;
  book.start(1, page("https://b.com/"));
  assert.equal(book.report(1, old.visit_id, { visible_ms: 9000, active_ms: 9000 }), null);
  assert.equal(book.get(1).dwell_ms, 0);
});

test("the_book_survives_json_round_trips", () => {
  const book = new VisitBook();
  const { visit } = book.start(3, page("https://a.com/"));
  book.markCaptured(3, visit.visit_id);
  const again = new VisitBook(JSON.parse(JSON.stringify(book)));
  assert.equal(again.get(3).captured, true);
  assert.equal(again.get(3).visit_id, visit.visit_id);
});

test("end_all_returns_every_open_visit", () => {
  const book = new VisitBook();
  book.start(1, page("https://a.com/"));
  book.start(2, page("https://b.com/"));
  assert.equal(book.endAll().length, 2);
  assert.equal(book.all().length, 0);
});

test("discard_where_drops_matching_visits_without_returning_them", () => {
  const book = new VisitBook();
  book.start(1, page("https://a.com/"));
  book.start(2, page("https://b.com/"));
  assert.equal(book.discardWhere((v) => v.url.includes("a.com")), 1);
  assert.equal(book.get(1), null);
});

test("a_given_visit_id_is_used", () => {
  assert.equal(new VisitBook().start(1, page("https://a.com/", { visit_id: "fixed" })).visit.visit_id, "fixed");
});

test("referrer_is_the_previous_page_for_link_like_transitions_only", () => {
  const previous = { url: "https://a.com/" };
  assert.equal(referrerFor(previous, "link"), "https://a.com/");
  assert.equal(referrerFor(previous, "history_state"), "https://a.com/");
  assert.equal(referrerFor(previous, "typed"), null);
  assert.equal(referrerFor(null, "link"), null);
});
