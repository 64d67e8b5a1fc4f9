"""The report shell: one page with the header, tab bar and every tab's section, data escaped."""

from __future__ import annotations

from accelbuild.report import html


def test_page_holds_the_tabs_and_escapes_the_data() -> None:
    body = html.section("summary", "Summary", html.card("Models", html.table(["name"], [[html.esc("<det>")]])))
    page = html.page("p<1>", ["mx3 &amp; 2 chips"], True, [("summary", "Summary")], body)
    assert page.startswith("<!DOCTYPE html>\n") and page.endswith("</html>\n")
    assert "p&lt;1&gt; — benchmark report" in page and "&lt;det&gt;" in page and "<det>" not in page
    assert '<a href="#summary">Summary</a>' in page and html.SIMULATED in page
    assert html.SIMULATED not in html.page("p", [], False, [], "")
