"""Accessibility basics of the page: landmarks, labelled controls, text contrast (WCAG AA, 4.5:1)."""

from __future__ import annotations

from playwright.sync_api import Page, expect
from served import served

from rollout_adapters.web_dashboard import Feed
from rollout_cli.demo_scenario import builtin_scenario
from rollout_planner.service.attention_rows import attention_rows
from rollout_planner.service.status_document import status_document
from rollout_planner.simulation.runner import Simulator

MIN_CONTRAST = 4.5

# the contrast of every element with its own text against the first opaque background behind it
_CONTRAST = """() => {
  const rgb = (text) => (text.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (let node = el; node; node = node.parentElement) {
      const c = rgb(getComputedStyle(node).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const worst = [];
  for (const el of document.querySelectorAll("body *")) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || el.closest("svg") || !el.getClientRects().length) continue;
    const fg = lum(rgb(getComputedStyle(el).color)), bg = lum(background(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    worst.push([Math.round(ratio * 100) / 100, el.tagName + "." + el.className, el.textContent.trim().slice(0, 30)]);
  }
  return worst.sort((a, b) => a[0] - b[0]).slice(0, 5);
}"""


def _feed() -> Feed:
    sim = Simulator(builtin_scenario())
    sim.start()
    while (t := sim.next_time()) is not None and t <= 3900:
        sim.step()
    feed = Feed()
    feed.publish(status_document(sim.state, batch=1), attention_rows(sim.state))
    return feed


def test_landmarks_labels_and_contrast(page: Page) -> None:
    with served(_feed()) as url:
        page.goto(url)
        expect(page.get_by_role("banner")).to_have_count(1)
        expect(page.get_by_role("main")).to_have_count(1)
        expect(page.get_by_role("contentinfo")).to_have_count(1)
        expect(page.get_by_role("search")).to_have_count(1)
        for name in ("Name", "Label", "Stage", "Status"):
            expect(page.get_by_label(name, exact=True)).to_have_count(1)
        expect(page.get_by_role("navigation", name="pages of clusters")).to_have_count(1)
        expect(page.get_by_role("img", name="When each stage and track started and finished")).to_have_count(1)
        headings = page.locator("h1, h2").all_text_contents()
        assert headings[:3] == ["rollout test", "Sequence demo", "Pipeline"]
        worst = page.evaluate(_CONTRAST)
        assert worst and worst[0][0] >= MIN_CONTRAST, worst
