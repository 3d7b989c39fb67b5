import test from "node:test";
import assert from "node:assert/strict";
import { createRouter, senderKind } from "../src/router.js";

const ID = "eeihccjhkpjgahjachnggfamlbdoeaio";
const ORIGIN = `chrome-extension://${ID}/`;
const popup = { id: ID, url: `${ORIGIN}src/ui/popup.html` };
const content = { id: ID, url: "https://example.com/", tab: { id: 3 } };

function router() {
  return createRouter(
    {
      echo: { from: "page", run: (request) => ({ echoed: request.value }) },
      dwell: { from: "content", run: (request, sender) => ({ tab: sender.tab.id }) },
      boom: { from: "page", run: () => { throw Object.assign(new Error("no way"), { code: 9 }); } },
      nothing: { from: "page", run: () => undefined },
    },
    { extensionId: ID, extensionOrigin: ORIGIN },
  );
}

test("router_dispatches_on_what_and_wraps_the_result", async () => {
  assert.deepEqual(await router()({ what: "echo", value: 4 }, popup), { ok: true, echoed: 4 });
  assert.deepEqual(await router()({ what: "nothing" }, popup), { ok: true });
});

test("router_answers_unknown_requests_with_an_error", async () => {
  for (const request of [{ what: "nope" }, { what: "toString" }, {}, null, "echo"]) {
    const answer = await router()(request, popup);
    assert.equal(answer.ok, false);
    assert.match(answer.error.message, /unknown request/);
  }
});

test("router_turns_exceptions_into_errors_with_their_code", async () => {
  assert.deepEqual(await router()({ what: "boom" }, popup), { ok: false, error: { message: "no way", code: 9 } });
});

test("web_pages_may_only_report_dwell", async () => {
  assert.equal((await router()({ what: "echo" }, content)).ok, false);
  assert.deepEqual(await router()({ what: "dwell" }, content), { ok: true, tab: 3 });
});

test("extension_pages_cannot_pretend_to_be_content", async () => {
  assert.equal((await router()({ what: "dwell" }, popup)).ok, false);
});

test("other_extensions_are_strangers", async () => {
  assert.equal(senderKind({ id: "other", url: "chrome-extension://other/x" }, ID, ORIGIN), "stranger");
  assert.equal((await router()({ what: "echo" }, { id: "other" })).ok, false);
  assert.equal(senderKind(undefined, ID, ORIGIN), "stranger");
});

test("an_extension_page_open_in_a_tab_is_a_page", () => {
  assert.equal(senderKind({ id: ID, url: `${ORIGIN}src/ui/options.html`, tab: { id: 9 } }, ID, ORIGIN), "page");
});
