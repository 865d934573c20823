"""The dashboard in a real browser (Debian's chromium through Playwright), served from this
process: sign-in, memories written here and elsewhere, search, history diffs, a build, the
reader's view, the XSS record, CSP. Few tests, each walking a page as a user would."""

from __future__ import annotations

import json
import sqlite3
from contextlib import contextmanager
from urllib.parse import quote

import pytest

from tests.plugins.auth.helpers import create_token, server_config
from tests.plugins.ui.conftest import PLUGINS, Page
from tests.support import LocalServer

XSS = '<img src=x onerror="document.title=\'pwned\'">'


def memories(server, pid):
    return f"/v1/projects/{pid}/memories"


def test_signed_in_by_a_one_time_code_that_leaves_no_trace(tab, local):
    t = tab()
    page = t.signed_in()
    assert page.url.endswith("/ui#/projects")  # the code left the address bar at once
    assert "script-src 'self'" in t.response.headers["content-security-policy"]
    assert page.evaluate("sessionStorage.getItem('neuralmind.token')") == local.token
    assert page.locator("#me").text_content() == "local · admin"
    page.wait_for_selector("dl.facts")  # the selected project's stats
    assert page.evaluate("document.querySelectorAll('script:not([src]), [style]').length") == 0
    assert t.problems == [] and t.dialogs == []
    used = t.page.context.new_page()  # the same link again: refused, the paste form shown
    code = local.post("/v1/ui/sign-in-codes").json["path"]
    local.post("/v1/ui/sign-in", {"code": code.split("=", 1)[1]}, auth=False)
    used.goto(local.url + code)
    used.wait_for_selector("form input[type=password]")
    assert "did not work" in used.locator(".notice").text_content()


def test_memories_created_here_and_elsewhere_searched_and_diffed(tab, local):
    t = tab()
    page = t.signed_in("#/memories")
    page.wait_for_selector("text=No memories match.")
    page.click("button:has-text('New memory')")
    page.fill("form.card input >> nth=0", "Use SQLite WAL")
    page.fill("form.card textarea", "Readers never block writers.")
    page.fill("form.card input >> nth=1", "sqlite")
    page.click("form.card button:has-text('Create')")
    page.wait_for_selector("ol.history")
    mid = page.url.rsplit("/", 1)[1]
    assert page.locator(".detail h2").text_content() == "Use SQLite WAL"
    # another client writes: the list shows it through the event stream, without a reload
    local.post(memories(local, local.pid), {"title": "Prices are integers of cents",
                                            "rationale": "Floats lost a cent on refunds."})
    page.wait_for_selector("table.memories a:has-text('Prices are integers of cents')")
    # and amends the open record: its history shows the change word by word
    r = local.patch(f"{memories(local, local.pid)}/{mid}", {"rationale": "Readers never block the writer."})
    assert r.status == 200
    page.wait_for_selector("ol.history li >> nth=1")
    assert page.locator("ol.history del").first.text_content() == "writers."
    assert page.locator("ol.history ins").first.text_content() == "the writer."
    for mode, query in (("keyword", "cents"), ("semantic", "money rounding errors"), ("hybrid", "WAL")):
        page.fill("input[name=query]", query)
        page.check(f"input[name=mode][value={mode}]")
        page.click("form[role=search] button:has-text('Search')")
        page.wait_for_selector(f"text=/results?, {mode} search/")
        top = page.locator("table.memories tbody tr").first
        assert top.locator("a").text_content() == {"keyword": "Prices are integers of cents",
                                                   "semantic": "Prices are integers of cents",
                                                   "hybrid": "Use SQLite WAL"}[mode]
        float(top.locator("td.num").text_content())  # the score is shown
    assert t.problems == []


def test_a_build_shows_its_progress_and_the_index_it_made(tab, local):
    t = tab()
    page = t.signed_in()
    page.click("button:has-text('Full rebuild')")
    page.wait_for_selector("text=/done: 2 files/")
    assert page.locator("progress").is_visible()
    page.click("nav >> text=Code")
    page.fill("input[type=search]", "sales tax")
    page.click("form[role=search] button")
    page.click("a:has-text('tax.py:1')")
    page.wait_for_selector("ol.source li.target")
    assert page.locator("ol.source li.target").text_content() == "def sales_tax(cents):"
    assert page.evaluate("document.activeElement.id") == "L1"


def test_the_xss_record_renders_as_text(tab, local):
    made = local.post(memories(local, local.pid), {"title": XSS, "rationale": "<script>alert(1)</script>"})
    t = tab()
    page = t.signed_in(f"#/memories/{made.json['id']}")
    page.wait_for_selector(".detail h2")
    assert page.locator(".detail h2").text_content() == XSS
    assert page.locator(".rationale").text_content() == "<script>alert(1)</script>"
    assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
    assert page.title() != "pwned" and t.dialogs == [] and t.problems == []


def test_ask_streams_an_answer_with_linked_sources(tab, local):
    page = tab().signed_in("#/ask")
    page.fill("textarea", "how long do refunds take?")
    page.click("form.card button[type=submit]")
    page.wait_for_selector("ol.sources li.cited")
    assert "five working days" in page.locator(".answer").text_content()
    cited = page.locator("ol.sources li.cited a").first
    assert cited.text_content() == "README.md:5"
    page.locator(".answer a.cite").first.click()
    assert page.evaluate("document.activeElement.id").startswith("source-")


@contextmanager
def team_server(root):
    """A team server (server mode, the dashboard on) with an admin and a reader token."""
    config = server_config(root, {"a": root / "a"}, "[ui]\nenabled = true\n")
    with LocalServer(root / "home", config=config, plugins=PLUGINS) as server:
        cfg = server.home / "config.toml"
        server.admin = create_token(server.home, cfg, "ada", "admin")["token"]
        server.reader = create_token(server.home, cfg, "rita", "reader")["token"]
        assert server.post(memories(server, "a"), {"title": "Only admins delete",
                                                  "rationale": "r"}, token=server.admin).status == 201
        yield server


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    with team_server(tmp_path_factory.mktemp("ui-team")) as server:
        yield server


def test_a_reader_pastes_a_token_sees_no_edit_buttons_and_a_write_is_refused(browser, team):
    t = Page(browser, team, width=390, height=844)  # a phone
    try:
        t.page.goto(t.server.url + "/ui")  # a mistyped token is said to be one, not "revoked"
        t.page.fill("input[type=password]", "bogus")
        t.page.press("input[type=password]", "Enter")
        t.page.wait_for_selector("text=That token is not valid: check it")
        assert team.post(memories(team, "a"), {"title": "L" * 300, "rationale": "r"},
                         token=team.admin).status == 201  # one word wider than the phone
        page = t.pasted(team.reader, "rita · reader")
        t.go("#/memories")
        page.click("a:has-text('Only admins delete')")
        page.wait_for_selector("ol.history")
        # the record is below the list here: the tap brings it, and the keyboard, to it
        assert page.evaluate("""(() => { const el = document.activeElement,
            r = el.getBoundingClientRect();
            return [el.tagName, r.top >= 0 && r.bottom <= innerHeight]; })()""") == ["H2", True]
        for label in ("New memory", "Edit", "Invalidate", "Delete", "Restore", "Helpful"):
            assert page.locator(f"button:has-text('{label}')").count() == 0, label
        status = page.evaluate("""async () => (await fetch('/v1/projects/a/memories', {method: 'POST',
            headers: {'Content-Type': 'application/json', Authorization:
            'Bearer ' + sessionStorage.getItem('neuralmind.token')},
            body: JSON.stringify({title: 't', rationale: 'r'})})).status""")
        assert status == 403
        assert page.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scroll
        assert page.evaluate("""[...document.querySelectorAll('.scroll')]
            .every((s) => s.scrollWidth <= s.clientWidth + 1)""")
        t.go("#/activity")
        page.wait_for_selector("table.events")
        assert page.locator("text=Audit trail").count() == 0  # admins only
    finally:
        t.close()


def test_the_keyboard_reaches_the_pages_and_the_record_controls(tab, local):
    local.post(memories(local, local.pid), {"title": "Reached by keyboard", "rationale": "r"})
    page = tab().signed_in("#/memories")
    page.wait_for_selector("a:has-text('Reached by keyboard')")
    page.evaluate("document.activeElement.blur(); window.scrollTo(0, 0)")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    reached = []
    for _ in range(60):  # Tab on, from the page's start, until the record's link
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.textContent.trim()"))
        if reached[-1] == "Reached by keyboard":
            break
    assert "New memory" in reached and "Search" in reached and reached[-1] == "Reached by keyboard"
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") == "solid"
    page.keyboard.press("Enter")  # the focus ring shows where the keyboard is; Enter opens
    page.wait_for_selector(".detail h2:has-text('Reached by keyboard')")


def confirm_delete(page, record) -> None:
    """Delete, then confirm. An event still on its way (the restore's, on a loaded machine)
    redraws the record and disarms its button as the confirmation is clicked: arm it again."""
    from playwright.sync_api import TimeoutError as Late
    for _ in range(5):
        page.click("button:text-is('Delete')")
        assert record().status == 200  # it asks twice
        try:
            page.click("button:text-is('Really delete?')", timeout=5_000)
            return
        except Late:
            continue
    pytest.fail("the Delete button never stayed armed")


def test_a_record_edited_invalidated_restored_exported_and_deleted(tab, local):
    made = local.post(memories(local, local.pid), {"title": "Edit me", "rationale": "First."}).json
    page = tab().signed_in(f"#/memories/{made['id']}")
    page.click("button:has-text('Edit')")
    page.fill("form.card textarea >> nth=0", "Second, better.")
    page.click("form.card button:has-text('Save')")
    page.wait_for_selector(".rationale:has-text('Second, better.')")
    assert page.locator("ol.history del").first.text_content() == "First."
    page.click("button:has-text('Invalidate')")
    page.press("form.card input", "Escape")  # cancels, as the Cancel button does
    assert page.locator("form.card").count() == 0
    page.click("button:has-text('Invalidate')")
    page.fill("form.card input", "superseded")
    page.click("form.card button:has-text('Invalidate')")
    page.wait_for_selector("dd:has-text('INVALIDATED')")
    page.click("button:has-text('Restore')")
    page.wait_for_selector("dd:has-text('ACTIVE')")
    with page.expect_download() as download:
        page.click("button:has-text('Export JSONL')")
    lines = open(download.value.path()).read().splitlines()
    assert made["id"] in {json.loads(line)["memory"]["id"] for line in lines}
    confirm_delete(page, lambda: local.get(f"{memories(local, local.pid)}/{made['id']}"))
    page.wait_for_selector("text=Pick a memory")
    assert local.get(f"{memories(local, local.pid)}/{made['id']}").status == 404
    kinds = [e["kind"] for e in local.get(f"{memories(local, local.pid)}/{made['id']}/history").json["items"]]
    assert kinds == ["created", "amended", "invalidated", "restored", "deleted"]


def test_an_emptied_confidence_is_never_saved_and_a_refused_search_says_why(tab, local):
    """Emptying Confidence in Edit saved 0 (Number("") is 0); a search the server refused
    left the list on "Loading…" with "the request did not validate" in a toast."""
    made = local.post(memories(local, local.pid), {"title": "Keep my confidence",
                                                    "rationale": "r", "confidence": 0.9}).json
    page = tab().signed_in(f"#/memories/{made['id']}")
    page.click("button:has-text('Edit')")
    page.fill("form.card input[type=number]", "")
    page.click("form.card button:has-text('Save')")
    assert page.locator("form.card input[type=number]:invalid").count() == 1
    assert local.get(f"{memories(local, local.pid)}/{made['id']}").json["confidence"] == 0.9
    page.goto(page.url.split("#")[0] + "#/memories")
    page.fill("input[name=query]", "x" * 2001)
    page.press("input[name=query]", "Enter")
    said = page.wait_for_selector(".list p.error").text_content()
    assert said.endswith("query: String should have at most 2000 characters"), said
    assert page.locator(".list [role=status]").count() == 0  # no spinner left turning


def test_an_edit_refused_as_stale_keeps_what_was_typed_over_the_record_as_it_is_now(tab, local):
    """A 412 redrew the record and dropped the form: what the user had typed was lost."""
    url = f"{memories(local, local.pid)}/"
    made = local.post(memories(local, local.pid), {"title": "Edited twice", "rationale": "First."}).json
    page = tab().signed_in(f"#/memories/{made['id']}")
    page.click("button:has-text('Edit')")
    page.fill("form.card textarea >> nth=0", "Mine, typed at length.")
    assert local.patch(url + made["id"], {"rationale": "Theirs.", "tags": ["other"]}).status == 200
    page.click("form.card button:has-text('Save')")
    page.wait_for_selector(".toast:has-text('Someone changed it meanwhile')")
    page.wait_for_selector(".rationale:has-text('Theirs.')")  # the record as it is now
    assert page.locator("form.card textarea >> nth=0").input_value() == "Mine, typed at length."
    # a field left alone shows the other write's value: saving again does not undo it
    assert page.locator("form.card input >> nth=1").input_value() == "other"
    assert local.get(url + made["id"]).json["rationale"] == "Theirs."  # nothing saved unasked
    page.click("form.card button:has-text('Save')")  # saving again is a decision, and holds
    page.wait_for_selector(".rationale:has-text('Mine, typed at length.')")
    assert page.locator("form.card").count() == 0
    assert local.get(url + made["id"]).json["tags"] == ["other"]


def test_an_overdue_record_is_edited_and_its_review_date_cleared(tab, local):
    """The form sent the shown review date back with every save — refused once it had passed
    (the record read STALE and could not be edited) — and an emptied date was never sent."""
    line = {"memory": {"id": "overdue-ui", "title": "Overdue", "rationale": "First.",
                       "review_by": "2020-06-01", "created_at": "2020-01-01T00:00:00.000Z",
                       "updated_at": "2020-01-01T00:00:00.000Z"}, "history": []}
    url = f"{memories(local, local.pid)}/overdue-ui"
    assert local.post(f"{memories(local, local.pid)}/import", body=json.dumps(line).encode(),
                      headers={"Content-Type": "application/x-ndjson"}).status == 200
    page = tab().signed_in("#/memories/overdue-ui")
    page.click("button:has-text('Edit')")
    page.fill("form.card textarea >> nth=0", "Edited while overdue.")
    page.click("form.card button:has-text('Save')")
    page.wait_for_selector(".rationale:has-text('Edited while overdue.')")
    assert page.locator("form.card").count() == 0
    assert local.get(url).json["review_by"] == "2020-06-01"
    assert page.locator("dl.facts dt:text-is('Status') + dd").text_content() == "STALE"
    page.click("button:has-text('Edit')")
    page.fill("form.card input[type=date]", "")
    page.click("form.card button:has-text('Save')")
    page.wait_for_selector("dl.facts dt:text-is('Status') + dd:text-is('ACTIVE')")
    rec = local.get(url).json
    assert (rec["review_by"], rec["effective_status"]) == (None, "ACTIVE")


def test_graph_links_and_savings_show_what_the_server_serves(browser, tmp_path):
    with LocalServer(tmp_path / "home", plugins=PLUGINS) as server:
        (tmp_path / "repo").mkdir()
        long_name = f"{'n' * 180}.py"  # a path no line of the page can hold
        (tmp_path / "repo" / long_name).write_text("def zanzibar_rates():\n    return 1\n")
        pid = server.register(tmp_path / "repo")  # not the folder holding the state home
        assert server.post(f"/v1/projects/{pid}/build", {"wait": True}).status == 200
        older = server.post(memories(server, pid), {"title": "<b>an older one</b>",
                                                    "rationale": "r"}).json
        made = server.post(memories(server, pid), {"title": "Linked", "rationale": "r2"}).json
        linked = server.post(f"{memories(server, pid)}/{made['id']}/links",
                             {"target": older["id"], "type": "supersedes"})
        assert linked.status == 201, linked.json
        t = Page(browser, server)
        try:
            page = t.signed_in()
            page.wait_for_selector("h3:has-text('Savings')")  # the index plugin's route
            assert "tokens_saved" in page.locator("dl.values").first.text_content()
            t.go(f"#/memories/{made['id']}")
            page.wait_for_selector("svg.graph circle >> nth=1")
            assert page.locator("svg.graph text", has_text="supersedes").count() == 1
            assert page.locator("svg.graph text", has_text="<b>an older one</b>").count() == 1
            assert page.locator("h3:has-text('Links')").count() == 1
        finally:
            t.close()
        phone = Page(browser, server, width=375, height=700)
        try:  # the long path wraps: the hit's columns and the opened file stay on screen
            page = phone.signed_in("#/code")
            page.fill("form[role=search] input[type=search]", "zanzibar rates")
            page.press("form[role=search] input[type=search]", "Enter")
            page.wait_for_selector(f"table a:has-text('{long_name}')")
            assert page.evaluate("""(() => { const s = document.querySelector('main .scroll');
                return s.scrollWidth <= s.clientWidth + 1; })()""")
            page.click(f"table a:has-text('{long_name}') >> nth=0")
            page.wait_for_selector("ol.source li.target")
            assert page.evaluate("document.documentElement.scrollWidth") <= 375
        finally:
            phone.close()


def test_an_admin_sees_tokens_seats_and_verifies_the_audit_trail(browser, tmp_path):
    with team_server(tmp_path) as team:  # its own: the test edits the audit trail
        admin_walkthrough(browser, team)


def admin_walkthrough(browser, team):
    spare = create_token(team.home, team.home / "config.toml", "sam", "reader")
    r = team.post(f"/v1/projects/{quote('é')}/memories", {"title": "t", "rationale": "r"},
                  token=team.admin)  # refused, and audited with a non-ASCII path
    assert r.status == 404
    t = Page(browser, team)
    try:
        page = t.pasted(team.admin, "ada · admin")
        t.go("#/activity")
        row = page.locator("tr", has=page.locator("code", has_text=spare["id"]))
        row.locator("button:has-text('Revoke')").click()
        row.locator("button:has-text('Really revoke?')").click()
        page.wait_for_selector(f"text=Revoked {spare['id']}")
        assert team.get("/v1/auth/whoami", token=spare["token"]).status == 401
        assert page.locator("h2:has-text('Seats') + div dt:has-text('active_actors')").count() == 1
        page.click("text=Verify chain")
        page.wait_for_selector("p.ok")
        trail = team.get("/v1/admin/audit?limit=200", token=team.admin).json["items"]
        assert any("/v1/projects/é/" in (r["target"] or "") for r in trail)
        count = len(trail)
        assert page.locator("p.ok").text_content().startswith(f"Verified {count} records")
        assert count >= 5 and t.problems == []
        page.fill("input[name=actor]", "nobody")  # a filter that matches nothing says so
        page.click("button:text-is('Filter')")
        page.wait_for_selector("text=No records match.")
        page.fill("input[name=actor]", "x" * 300)  # and one refused says why, in place
        page.click("button:text-is('Filter')")
        said = page.wait_for_selector("h2:text-is('Audit trail') ~ div p.error").text_content()
        assert said.endswith("actor: String should have at most 256 characters"), said
        assert page.locator("table.audit").count() == 0
        page.fill("input[name=actor]", "")
        page.click("button:text-is('Filter')")
        page.wait_for_selector("table.audit")
        with sqlite3.connect(team.home / "audit.db") as db:  # someone edits the trail
            db.execute("DROP TRIGGER audit_no_update")
            db.execute("UPDATE audit SET actor = 'mallory' WHERE seq = 2")
        page.click("text=Verify chain")
        page.wait_for_selector("p.error")
        assert page.locator("p.error").text_content() == "The chain is broken: record 2 was edited."
    finally:
        t.close()


def test_the_api_docs_page_renders_the_openapi_document(browser, local):
    """/v1/docs draws our OpenAPI 3.1 document offline (Swagger UI 4 could not read 3.1)."""
    page = browser.new_page()
    try:
        page.goto(f"{local.url}/v1/docs")
        page.wait_for_selector(".opblock-summary-path", timeout=15000)
        paths = {p.text_content().strip().replace("\u200b", "")
                 for p in page.locator(".opblock-summary-path").all()}
        assert {"/v1/health", "/v1/projects/{project_id}/memories/search"} <= paths
        assert page.locator("text=Unable to render this definition").count() == 0
    finally:
        page.close()


def imported(server, pid, *lines) -> None:
    body = "\n".join(json.dumps(line) for line in lines).encode()
    r = server.post(f"{memories(server, pid)}/import", body=body,
                    headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 200, r.json


def record(id_, title, history=(), **fields) -> dict:
    return {"memory": {"id": id_, "title": title, "rationale": "r", **fields,
                       "created_at": "2026-01-01T00:00:00.000Z",
                       "updated_at": "2026-01-01T00:00:00.000Z"},
            "history": [{"id": f"{id_}-{n}", "at": f"2026-01-01T00:00:{n // 10:02d}.{n % 10}00Z",
                         "kind": kind, "actor": "ada", "changes": {}, "note": f"event {n}"}
                        for n, kind in enumerate(history)]}


def test_a_record_opened_from_a_filtered_search_keeps_the_list_and_is_written_once(tab, local):
    """Tag filters were sent as strings (422); opening a record redrew the page and lost the
    search; a double submit wrote twice; a confidence of 0.87 blocked every edit; every
    record listed the project's contradictions; history stopped at 200 events; fields and
    focus went missing."""
    url = memories(local, local.pid)
    contra = record("contra-b", "Contra B")
    contra["contradictions"] = [{"id": "c_0123456789ab", "a": "contra-a", "b": "contra-b",
                                 "confidence": 0.9, "kind": "polarity", "explanation": "x",
                                 "status": "open", "detected_at": "2026-01-02T00:00:00.000Z"}]
    imported(local, local.pid, record("contra-a", "Contra A"), contra,
             record("busy-ui", "Zanzibar contract record", ["created"] + ["amended"] * 204,
                    kind="fact", confidence=0.87, tags=["ui-only"], session_id="s-42"),
             record("wide-ui", "W" * 300, tags=["ui-only"]))  # no history at all
    t = tab()
    page = t.signed_in("#/memories")
    page.fill("input[name=tag]", "ui-only")
    page.click("form.filters button:has-text('Filter')")
    page.wait_for_selector("table.memories a:has-text('WWWW')")
    assert page.locator("table.memories tbody tr").count() == 2
    wide = page.evaluate("(() => { const s = document.querySelector('.list .scroll');"
                         " return s.scrollWidth - s.clientWidth; })()")
    assert wide <= 1  # the 300-character word wraps in its column
    page.fill("input[name=query]", "zanzibar")
    page.check("input[name=mode][value=keyword]")
    page.press("input[name=query]", "Enter")
    page.wait_for_selector("text=1 result, keyword search")
    page.click("table.memories a:has-text('Zanzibar contract record')")
    page.wait_for_selector(".detail h2:has-text('Zanzibar contract record')")
    # the search, its filter and its result stay; the keyboard is on the record
    assert page.input_value("input[name=query]") == "zanzibar"
    assert page.input_value("input[name=tag]") == "ui-only"
    assert page.locator(".list").text_content().endswith("1 result, keyword search")
    assert page.evaluate("document.activeElement.textContent") == "Zanzibar contract record"
    facts = dict(zip(page.locator("dl.facts dt").all_text_contents(),
                     page.locator("dl.facts dd").all_text_contents()))
    assert (facts["Kind"], facts["Confidence"], facts["Session"], facts["Pinned"]) == (
        "fact", "0.87", "s-42", "no")
    assert {"Importance", "Strength", "Recalled"} <= facts.keys()
    page.wait_for_selector("h3:has-text('Contradictions') + div:not(:has([role=status]))")
    assert page.locator("h3:has-text('Contradictions') + div").text_content() == "none"
    assert page.locator("ol.history > li").count() == 200  # then the rest, to the newest
    page.click("button:has-text('Later events')")
    page.wait_for_selector("ol.history > li >> nth=204")
    assert page.locator("button:has-text('Later events')").is_hidden()
    # a confidence the step of 0.05 never reaches does not block the save, sent once
    page.click("button:text-is('Edit')")
    page.press("form.card textarea >> nth=0", "Escape")
    assert page.evaluate("document.activeElement.textContent") == "Edit"  # back where it was
    page.click("button:text-is('Edit')")
    page.fill("form.card input >> nth=1", "ui-only, edited")
    page.dblclick("form.card button:has-text('Save')")
    page.wait_for_selector("li:has-text('edited')")
    page.wait_for_selector("form.card", state="detached")
    rec = local.get(f"{url}/busy-ui").json
    assert (rec["tags"], rec["confidence"]) == (["ui-only", "edited"], 0.87)
    assert page.evaluate("document.activeElement.textContent") == "Edit"
    page.click("button:text-is('Invalidate')")
    page.fill("form.card input", "superseded")
    page.dblclick("form.card button:has-text('Invalidate')")
    page.wait_for_selector("dd:text-is('INVALIDATED')")
    page.dblclick("button:text-is('Delete')")  # a double click only arms it
    page.wait_for_selector("button:text-is('Really delete?')")
    history = local.get(f"{url}/busy-ui/history?limit=200&cursor="
                        + local.get(f"{url}/busy-ui/history?limit=200").json["next_cursor"]).json
    assert [e["kind"] for e in history["items"]] == ["amended"] * 5 + ["amended", "invalidated"]
    page.click("button:has-text('New memory')")
    page.fill("form.card textarea", "Typed once.")
    page.fill("form.card input >> nth=0", "Entered twice")
    page.focus("form.card input >> nth=0")
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    page.wait_for_selector(".detail h2:has-text('Entered twice')")
    made = local.get(f"{url}?limit=200").json["items"]
    assert [m["title"] for m in made].count("Entered twice") == 1
    page.click("button:has-text('New memory')")
    page.fill("form.card input >> nth=1", "x" * 65)  # a tag too long: named once
    page.fill("form.card input >> nth=0", "Refused")
    page.fill("form.card textarea", "r")
    page.click("form.card button:has-text('Create')")
    said = page.wait_for_selector(".toast.error").text_content()
    assert said.count("tags.0") == 1 and "at most 64 characters" in said, said
    page.keyboard.press("Escape")  # the keyboard stayed in the form; the record shows again
    page.wait_for_selector(".detail h2:has-text('Entered twice')")
    assert page.evaluate("document.activeElement.textContent") == "New memory"
    t.go("#/memories/wide-ui")
    page.wait_for_selector(".detail p:text-is('No events recorded.')")
    assert page.locator("ol.history").count() == 0
    assert [p for p in t.problems if "422" not in p] == []


def test_the_code_page_keeps_its_hits_and_odd_addresses_stops_and_outages_say_so(tab, local,
                                                                                 tmp_path):
    """Opening a hit dropped the results (Back did not bring them); a malformed address blanked
    the page; Stop left "Reading the sources…"; a server out of reach said "Failed to fetch"; a
    token of spaces did nothing; a removed project stayed in the picker and on Projects."""
    t = tab()
    page = t.signed_in("#/code")
    page.fill("form[role=search] input[type=search]", "sales tax")
    page.press("form[role=search] input[type=search]", "Enter")
    page.wait_for_selector("table a:text-is('tax.py:1')")
    hits = page.locator("table tbody tr").all_text_contents()
    page.click("table a:text-is('tax.py:1') >> nth=0")
    page.wait_for_selector("ol.source li.target")
    assert page.locator("table tbody tr").all_text_contents() == hits
    page.go_back()
    page.wait_for_selector("ol.source", state="detached")
    assert page.locator("table tbody tr").all_text_contents() == hits
    t.go("#/memories/%E0%A4%A")
    page.wait_for_selector("h1:text-is('Not found')")
    assert t.problems == []
    held = []  # the answer never comes: Stop ends the wait
    page.route("**/ask", lambda route: held.append(route))
    t.go("#/ask")
    page.fill("textarea", "how long do refunds take?")
    page.click("form.card button[type=submit]")
    page.click("button:text-is('Stop')")
    page.wait_for_selector(".answer :text-is('Stopped before any answer.')")
    page.unroute("**/ask")
    t.go("#/memories")
    page.wait_for_selector(".list:not(:has([role=status]))")
    t.context.set_offline(True)
    page.fill("input[name=query]", "anything")
    page.press("input[name=query]", "Enter")
    said = page.wait_for_selector(".list p.error").text_content()
    assert said.startswith("The server cannot be reached"), said
    t.context.set_offline(False)
    # a project registered and removed elsewhere: every page's picker follows
    extra = tmp_path / "extra-ui"
    extra.mkdir()
    pid = local.register(extra)
    page.wait_for_selector(f"#project option[value='{pid}']", state="attached")
    page.select_option("#project", pid)
    page.wait_for_selector("text=No memories match.")
    t.go("#/projects")
    page.wait_for_selector(f"main section h2:text-is('{extra.name}')")
    assert local.delete(f"/v1/projects/{pid}").status in (200, 204)
    page.wait_for_selector(f"#project option[value='{pid}']", state="detached")
    page.wait_for_selector(f"main section h2:not(:text-is('{extra.name}'))")
    assert page.input_value("#project") == local.pid
    signing = tab()  # a token of only spaces says so
    signing.page.goto(local.url + "/ui")
    signing.page.fill("input[type=password]", "   ")
    signing.page.press("input[type=password]", "Enter")
    signing.page.wait_for_selector(".notice:has-text('Paste a token first')")
