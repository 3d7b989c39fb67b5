"""Checkout pages in real headless Chromium with the real extension and host (the rig of
``test_e2e_browser.py``): a page holding payment-card fields is not captured, whatever its
address, and documentation about checkout, at an address the old ``*/checkout`` rule
refused, is captured and searchable."""

from __future__ import annotations

import pytest

from e2e_readback_support import store_mentions
from e2e_support import CdpError, wait_for
from test_e2e_browser import Rig, _found, chromium, rig  # noqa: F401 - the rig's fixtures

pytestmark = pytest.mark.browser

SHOP = (
    "<!doctype html><html><head><title>Pay for your sea kayak</title></head><body>"
    "<h1>Checkout</h1><p>Your sea kayak order: a skeg, a spray deck and sixty litres of "
    "hatch space.</p><form><input name=email autocomplete=email>"
    "<input name=cardnumber inputmode=numeric autocomplete=cc-number>"
    "<input name=exp autocomplete=cc-exp><input name=cvc autocomplete=cc-csc>"
    "<button>Pay</button></form></body></html>"
)
DOCS = (
    "<!doctype html><html><head><title>Checkout fields</title></head><body><main>"
    "<h1>Checkout</h1><p>A coracle shop's checkout form should mark the card number "
    "field so that browsers can fill it in.</p>"
    '<pre>&lt;input autocomplete="cc-number" inputmode="numeric"&gt;</pre>'
    "<p>Coracles are round boats woven from willow and sealed with pitch.</p>"
    "</main></body></html>"
)


def test_a_page_with_card_fields_is_skipped_and_docs_about_checkout_are_kept(
    rig: Rig,  # noqa: F811 - the fixture imported above
) -> None:
    worker = rig.worker
    before = worker.state()["stats"].get("skipped", {}).get("password field", 0)
    shop = rig.pages.add("/kayaks/order/pay", SHOP)
    docs = rig.pages.add("/docs/payments/checkout", DOCS)
    shop_tab = rig.browser.open_tab(shop)
    docs_tab = rig.browser.open_tab(docs)
    rig.mcp.wait_search("coracle willow pitch", _found(docs), timeout=10)
    wait_for(lambda: worker.state()["stats"]["skipped"].get("password field", 0) == before + 1,
             10, "the checkout page to be counted as skipped")  # fmt: skip
    with pytest.raises(CdpError, match="password field"):
        worker.hook("captureTab", worker.tab_id(shop))
    shop_tab.close()
    docs_tab.close()
    worker.flush()
    assert store_mentions(rig.profile.data_dir, "sixty litres") == {}  # its text: never
    # Its URL was listed among the open tabs while it was open; the tab's removal reaches
    # the host when Chromium tells the extension, which can be after the flush above.
    wait_for(lambda: store_mentions(rig.profile.data_dir, "/kayaks/order/pay") == {}, 10,
             "the closed checkout tab to leave the store")  # fmt: skip
    assert rig.mcp.search("sea kayak skeg spray deck") == []
