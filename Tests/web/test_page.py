"""The page as people use it: light and dark, the list's own controls, copy, highlighted code,
tool cards by their state, telling the person, and the screenshots of docs/screenshots."""
import os

from conftest import sign_in, wait_for
from test_web import new_conversation, open_conversation

SCREENSHOTS = os.environ.get("CONFAB_PAGE_SCREENSHOTS")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

CODE_REPLY = ("[[reply:Here is how:\n\n```python\n# say hello\ndef greet(name):\n    return \"hi \" + name\n```\n\n"
              "| item | quantity | note |\n|---|--:|---|\n| apples | 3 | unbelievably-crunchy-ones |\n| pears | 12 | ripe |\n]]")


def background(page, selector):
    return page.eval_on_selector(selector, "e => getComputedStyle(e).backgroundColor")


def test_light_and_dark_follow_the_system(world, browser):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "themes")
    terminal.call("conversation.attach", {"conversation": conversation})
    reply = terminal.call("message.send", {"conversation": conversation, "content": CODE_REPLY})["reply"]
    terminal.wait_event(lambda e: e["method"] == "message.completed" and e["params"]["message"]["id"] == reply, "the reply")
    colours = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(color_scheme=scheme, viewport={"width": 1366, "height": 800})
        sign_in(context, world.owner_url, world.base).close()
        page = open_conversation(context, world, conversation)
        page.wait_for_selector(".msg.assistant.complete .hl-key")
        colours[scheme] = (background(page, "body"), background(page, ".msg.assistant"),
                           page.eval_on_selector("body", "e => getComputedStyle(e).color"))
        # The column stays readable on a wide screen: about 80 characters, not the window's width.
        width = page.eval_on_selector(".msg.assistant", "e => e.getBoundingClientRect().width")
        assert 400 < width < 900, width
        context.close()
    assert colours["light"][0] != colours["dark"][0], colours
    assert colours["light"][1] != colours["dark"][1], colours
    assert colours["light"][2] != colours["dark"][2], colours
    terminal.close()


def test_start_rename_and_delete_from_the_list(world, owner):
    terminal = world.terminal()
    doomed = new_conversation(terminal, "to be deleted")
    kept = new_conversation(terminal, "to be renamed")
    page = owner.new_page()
    page.goto(world.base + "/")
    page.wait_for_selector("#status:text('live')")
    # Rename in place.
    row = ".conversations li[data-id='%s']" % kept
    page.click(row + " .rename-button")
    page.fill(row + " .rename input", "renamed from the page")
    page.click(row + " .rename button[type=submit]")
    page.wait_for_selector(row + " .title:text('renamed from the page')")
    assert terminal.call("conversation.get", {"conversation": kept})["conversation"]["title"] == "renamed from the page"
    # Delete asks first: keeping it changes nothing.
    row = ".conversations li[data-id='%s']" % doomed
    page.click(row + " .delete-button")
    page.wait_for_selector(row + " .confirm-delete")
    page.click(row + " .keep")
    page.wait_for_selector(row + " .delete-button")
    assert any(c["id"] == doomed for c in terminal.call("conversation.list", {})["conversations"])
    page.click(row + " .delete-button")
    page.click(row + " .confirm-delete")
    page.wait_for_selector(row, state="detached")
    assert not any(c["id"] == doomed for c in terminal.call("conversation.list", {})["conversations"])
    # Start: a new conversation, and its page.
    before = {c["id"] for c in terminal.call("conversation.list", {})["conversations"]}
    page.click("#new")
    page.wait_for_url("**/c/*")
    created = page.url.rsplit("/", 1)[1]
    assert created not in before
    assert any(c["id"] == created for c in terminal.call("conversation.list", {})["conversations"])
    page.close()
    terminal.close()


def test_rename_from_the_conversation_page(world, owner):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "before")
    page = open_conversation(owner, world, conversation)
    other = open_conversation(owner, world, conversation)
    page.wait_for_selector("#title:text('before')")
    # Escape leaves it as it was.
    page.click("#rename")
    page.fill("#retitle-input", "not this")
    page.press("#retitle-input", "Escape")
    page.wait_for_selector("#title:text('before')")
    assert not page.is_visible("#retitle")
    page.click("#rename")
    assert page.input_value("#retitle-input") == "before"
    page.fill("#retitle-input", "after <b>all</b>")
    page.press("#retitle-input", "Enter")
    # Every page of it shows the new title, as text.
    for p in (page, other):
        p.wait_for_selector("#title:text('after <b>all</b>')")
        assert p.query_selector("#title b") is None
        assert p.is_visible("#rename")
    assert terminal.call("conversation.get", {"conversation": conversation})["conversation"]["title"] == "after <b>all</b>"
    page.close()
    other.close()
    terminal.close()


def test_a_summary_is_one_line_where_it_stands_and_goes_when_undone(world, owner):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "long")
    terminal.call("conversation.attach", {"conversation": conversation})
    page = open_conversation(owner, world, conversation)
    replies = []
    for text in ("[[reply:one]] q1", "[[reply:two]] q2"):
        reply = terminal.call("message.send", {"conversation": conversation, "content": text})["reply"]
        terminal.wait_event(lambda e: e["method"] == "message.completed" and e["params"]["message"]["id"] == reply, "a reply")
        replies.append(reply)
    summary = "They said <b>one</b> and two."
    done = terminal.call("conversation.compact", {"conversation": conversation, "focus": "[[reply:%s]]" % summary})
    assert done["compaction"]["last"] == replies[-1]
    # One line after the summary's last message, its text folded under it, as text.
    page.wait_for_selector("#summary-line summary:text('summarised (')")
    line = page.text_content("#summary-line summary")
    assert line.startswith("m1…%s summarised (" % replies[-1]) and line.endswith(" tokens)"), line
    after = page.evaluate("() => document.getElementById('summary-line').previousElementSibling.id")
    assert after == "msg-" + replies[-1], after
    assert not page.is_visible("#summary-line .summary-text")
    page.click("#summary-line summary")
    assert page.text_content("#summary-line .summary-text") == summary
    assert page.query_selector("#summary-line b") is None
    # Every message stays; a later one goes after the line; a page opened now shows it too.
    later = terminal.call("message.send", {"conversation": conversation, "content": "[[reply:three]] q3"})["reply"]
    page.wait_for_selector("#msg-%s.complete" % later)
    order = page.evaluate("() => Array.from(document.getElementById('messages').children).map(e => e.id)")
    assert order.index("summary-line") == order.index("msg-" + replies[-1]) + 1, order
    assert order.index("msg-" + later) > order.index("summary-line"), order
    assert all(("msg-" + r) in order for r in replies)
    other = open_conversation(owner, world, conversation)
    other.wait_for_selector("#summary-line summary:text('summarised (')")
    # Undone: the line goes from every page.
    terminal.call("conversation.uncompact", {"conversation": conversation})
    for p in (page, other):
        p.wait_for_selector("#summary-line", state="detached")
    page.close()
    other.close()
    terminal.close()


def test_a_share_link_page_has_no_list_controls_and_the_gateway_refuses_them(world, browser):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "shared, not to be deleted")
    link = world.web("share", conversation, "--expires", "2h").strip()
    token = link.split("#token=", 1)[1]
    context = browser.new_context()
    page = context.new_page()
    page.goto(link)
    page.wait_for_url("**/c/" + conversation)
    page.wait_for_selector("#status:text('live')")
    for selector in ("#new", ".rename-button", ".delete-button", "#rename"):
        assert page.query_selector(selector) is None or not page.is_visible(selector), selector
    # Its back arrow does not lead to a list it cannot have.
    assert not page.is_visible("#back")
    # Made to try anyway, on its conversation's socket: nothing is deleted or renamed.
    page.evaluate("""([url, token, id]) => new Promise(done => {
        const ws = new WebSocket(url, ["confab", "confab-token." + token]);
        ws.onopen = () => { ws.send(JSON.stringify({op: "delete", conversation: id}));
                            ws.send(JSON.stringify({op: "rename", conversation: id, title: "taken"}));
                            ws.send(JSON.stringify({op: "create"}));
                            setTimeout(() => { ws.close(); done(); }, 500); };
        ws.onerror = () => done(); })""",
                  ["ws://127.0.0.1:%d/ws?c=%s" % (world.port, conversation), token, conversation])
    # And the list's socket is the owner's alone.
    outcome = page.evaluate("""([url, token]) => new Promise(done => { const ws = new WebSocket(url, ["confab", "confab-token." + token]);
        ws.onopen = () => done("open"); ws.onerror = () => done("refused"); })""",
                            ["ws://127.0.0.1:%d/ws" % world.port, token])
    assert outcome == "refused"
    info = terminal.call("conversation.get", {"conversation": conversation})["conversation"]
    assert info["title"] == "shared, not to be deleted"
    context.close()
    terminal.close()


def test_copy_buttons_and_a_highlighted_block(world, browser):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "code")
    terminal.call("conversation.attach", {"conversation": conversation})
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    sign_in(context, world.owner_url, world.base).close()
    page = open_conversation(context, world, conversation)
    reply = terminal.call("message.send", {"conversation": conversation, "content": CODE_REPLY})["reply"]
    block = "#msg-%s .body .code" % reply
    page.wait_for_selector("#msg-%s.complete" % reply)
    page.wait_for_selector(block + " .hl-key")
    # Keywords, strings and comments each in their own colour; the text itself unchanged.
    assert page.text_content(block + " .hl-key") == "def"
    assert page.text_content(block + " .hl-str") == "\"hi \""
    assert page.text_content(block + " .hl-com") == "# say hello"
    assert page.eval_on_selector(block + " .hl-key", "e => getComputedStyle(e).color") != \
        page.eval_on_selector(block + " .hl-str", "e => getComputedStyle(e).color")
    page.click(block + " button.copy")
    page.wait_for_selector(block + " button.copy:text('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == "# say hello\ndef greet(name):\n    return \"hi \" + name\n"
    page.click("#msg-%s .copy-reply" % reply)
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("Here is how:") and "apples" in copied
    # The reply says when, and with which model.
    assert page.text_content("#msg-%s .meta .model" % reply) == "fake-model"
    assert page.query_selector("#msg-%s .meta time" % reply).get_attribute("datetime")
    context.close()
    terminal.close()


def test_the_caret_is_inline_and_errors_are_in_words(world, owner):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "caret")
    terminal.call("conversation.attach", {"conversation": conversation})
    page = open_conversation(owner, world, conversation)
    reply = terminal.call("message.send", {"conversation": conversation, "content": "[[words:200]] [[delay:30]]"})["reply"]
    page.wait_for_selector("#msg-%s .caret" % reply)
    # At the end of the last paragraph's text, not a block of its own.
    assert page.eval_on_selector("#msg-%s .caret" % reply, "e => e.parentElement.tagName") == "P"
    terminal.call("generation.cancel", {"conversation": conversation})
    page.wait_for_selector("#msg-%s .caret" % reply, state="detached")
    failed = terminal.call("message.send", {"conversation": conversation, "content": "[[status:500]]"})["reply"]
    page.wait_for_selector("#msg-%s .error" % failed)
    text = page.text_content("#msg-%s .error" % failed)
    assert text.startswith("The model server answered with an error (HTTP 500)"), text
    assert "upstream_http" not in text
    page.close()
    terminal.close()


def test_tool_cards_by_state_and_who_decided_after_a_reload(world, owner):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "tool states", profile="helper")
    terminal.call("conversation.attach", {"conversation": conversation})
    page = open_conversation(owner, world, conversation)
    terminal.call("message.send", {"conversation": conversation, "content": "[[tool:guarded {\"city\":\"Paris\"}]]"})
    page.wait_for_selector(".card .state:text('waiting for approval')")
    page.click(".card button.approve")
    page.wait_for_selector(".card .state:text('done')")
    page.wait_for_selector(".card .answered:text('approved by web:browser')")
    terminal.call("message.send", {"conversation": conversation, "content": "[[tool:guarded {\"city\":\"Lyon\"}]]"})
    page.wait_for_selector(".card .state:text('waiting for approval')")
    page.click(".card button.deny")
    page.wait_for_selector(".card .state:text('denied')")
    terminal.wait_event(lambda e: e["method"] == "message.completed" and not e["params"]["message"].get("tool_calls")
                        and e["params"]["message"]["role"] == "assistant" and
                        any(x["method"] == "tool.denied" for x in terminal.events), "the second reply's end")
    # A reload (a new page, a new gateway session): who decided is still there.
    page.reload()
    page.wait_for_selector("#status:text('live')")
    states = page.eval_on_selector_all(".card .state", "els => els.map(e => e.textContent)")
    assert states == ["done", "denied"], states
    answers = page.eval_on_selector_all(".card .answered", "els => els.map(e => e.textContent)")
    # The stored author: the name the page's connection chose, with the login beside it.
    assert [a.split(" (")[0] for a in answers] == ["approved by web:browser", "denied by web:browser"], answers
    page.close()
    terminal.close()


NOTIFICATION_STUB = """
Object.defineProperty(document, "visibilityState", {get: () => window.__hidden ? "hidden" : "visible"});
window.__notes = [];
const Real = window.Notification;
window.Notification = function (title, options) { window.__notes.push([title, (options || {}).body]); return {close() {}}; };
Object.defineProperty(window.Notification, "permission", {get: () => Real.permission});
window.Notification.requestPermission = () => Real.requestPermission();
"""


def test_the_title_and_a_notification_say_when_a_call_waits_or_a_reply_ends(world, browser):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "tell me", profile="helper")
    terminal.call("conversation.attach", {"conversation": conversation})
    context = browser.new_context()
    sign_in(context, world.owner_url, world.base).close()
    context.grant_permissions(["notifications"], origin=world.base)
    context.add_init_script(NOTIFICATION_STUB)
    page = open_conversation(context, world, conversation)
    assert page.evaluate("Notification.permission") == "granted"
    # Seen while the tab is in front: nothing counted.
    reply = terminal.call("message.send", {"conversation": conversation, "content": "[[reply:in front]]"})["reply"]
    page.wait_for_selector("#msg-%s.complete" % reply)
    assert not page.title().startswith("(")
    assert page.evaluate("window.__notes") == []
    # Hidden: a call waiting for approval, then the reply's end.
    page.evaluate("window.__hidden = true")
    terminal.call("message.send", {"conversation": conversation, "content": "[[tool:guarded {\"city\":\"Oslo\"}]]"})
    wait_for(lambda: page.title().startswith("(1) "), "the title's count")
    notes = page.evaluate("window.__notes")
    assert len(notes) == 1 and "approval" in notes[0][1] and "guarded" in notes[0][1], notes
    request = terminal.wait_event(lambda e: e["method"] == "tool.approval_requested", "the request")
    terminal.call("tool.approve", {"conversation": conversation, "call": request["params"]["call"], "allow": True})
    wait_for(lambda: page.title().startswith("(2) "), "the count after the reply's end")
    notes = page.evaluate("window.__notes")
    assert len(notes) == 2 and notes[1][1] == "The reply is ready", notes
    assert notes[0][0].startswith("tell me")
    # Back in front: the count goes.
    page.evaluate("window.__hidden = false; document.dispatchEvent(new Event('visibilitychange'))")
    wait_for(lambda: not page.title().startswith("("), "the title without its count")
    context.close()
    terminal.close()


LIST_NOTIFICATION_STUB = NOTIFICATION_STUB.replace(
    "window.__notes.push([title, (options || {}).body]); return {close() {}};",
    "const note = {close() {}}; window.__notes.push([title, (options || {}).body]); (window.__made = window.__made || []).push(note); return note;")


def test_the_list_page_tells_of_any_conversation_it_lists(world, browser):
    terminal = world.terminal()
    asking = new_conversation(terminal, "asks for a tool", profile="helper")
    replying = new_conversation(terminal, "answers later")
    terminal.call("conversation.attach", {"conversation": asking})
    terminal.call("conversation.attach", {"conversation": replying})
    context = browser.new_context()
    sign_in(context, world.owner_url, world.base).close()
    context.grant_permissions(["notifications"], origin=world.base)
    context.add_init_script(LIST_NOTIFICATION_STUB)
    page = context.new_page()
    page.goto(world.base + "/")
    page.wait_for_selector("#conversations li[data-id='%s']" % replying)
    assert page.evaluate("Notification.permission") == "granted"
    base_title = page.title()
    # Seen while the list is in front: nothing counted, nothing shown.
    reply = terminal.call("message.send", {"conversation": replying, "content": "[[reply:in front]]"})["reply"]
    terminal.wait_event(lambda e: e["method"] == "message.completed" and e["params"]["message"]["id"] == reply, "the reply")
    wait_for(lambda: "2 messages" in page.text_content("#conversations li[data-id='%s']" % replying), "the list's update")
    assert page.title() == base_title
    assert page.evaluate("window.__notes") == []
    # Hidden: a call waiting in one conversation, a reply ending in another.
    page.evaluate("window.__hidden = true")
    terminal.call("message.send", {"conversation": asking, "content": "[[tool:guarded {\"city\":\"Oslo\"}]]"})
    wait_for(lambda: page.title() == "(1) " + base_title, "the title's count")
    notes = page.evaluate("window.__notes")
    assert notes == [["asks for a tool · confab", "A tool call waits for your approval: guarded"]], notes
    terminal.call("message.send", {"conversation": replying, "content": "[[reply:done while away]]"})
    wait_for(lambda: page.title() == "(2) " + base_title, "the count after the reply's end")
    notes = page.evaluate("window.__notes")
    assert notes[1] == ["answers later · confab", "The reply is ready"], notes
    # A click on a notification opens its conversation.
    page.evaluate("window.__made[1].onclick()")
    page.wait_for_url(world.base + "/c/" + replying)
    page.wait_for_selector("#status:text('live')")
    context.close()
    terminal.close()


def test_the_list_page_offers_to_notify(world, browser):
    context = browser.new_context()
    sign_in(context, world.owner_url, world.base).close()
    context.add_init_script("""window.__asked = 0; const ask = Notification.requestPermission.bind(Notification);
        Notification.requestPermission = () => { window.__asked += 1; return ask(); };""")
    page = context.new_page()
    page.goto(world.base + "/")
    page.wait_for_selector("#status:text('live')")
    assert page.evaluate("window.__asked") == 0
    if page.evaluate("Notification.permission") == "default":
        assert page.is_visible("#notify")
        page.click("#notify")
        wait_for(lambda: page.evaluate("window.__asked") == 1, "the question")
    context.close()


def test_the_notify_button_asks_only_when_clicked(world, browser):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "ask first")
    context = browser.new_context()
    sign_in(context, world.owner_url, world.base).close()
    context.add_init_script("""window.__asked = 0; const ask = Notification.requestPermission.bind(Notification);
        Notification.requestPermission = () => { window.__asked += 1; return ask(); };""")
    page = open_conversation(context, world, conversation)
    assert page.evaluate("window.__asked") == 0
    if page.evaluate("Notification.permission") == "default":
        page.click("#notify")
        wait_for(lambda: page.evaluate("window.__asked") == 1, "the question")
    context.close()
    terminal.close()


def test_the_phone_shows_who_is_here_and_scrolls_tables_sideways(world, browser):
    terminal = world.terminal("ana-terminal")
    conversation = new_conversation(terminal, "on a phone")
    terminal.call("conversation.attach", {"conversation": conversation})
    reply = terminal.call("message.send", {"conversation": conversation, "content": CODE_REPLY})["reply"]
    terminal.wait_event(lambda e: e["method"] == "message.completed" and e["params"]["message"]["id"] == reply, "the reply")
    phone = browser.new_context(viewport={"width": 390, "height": 760}, has_touch=True, is_mobile=True)
    sign_in(phone, world.owner_url, world.base).close()
    page = open_conversation(phone, world, conversation)
    page.wait_for_selector("#msg-%s.complete table" % reply)
    assert page.is_visible("#presence")
    assert "ana-terminal" in page.text_content("#presence")
    assert "Shift" not in page.get_attribute("#input", "placeholder")
    # A cell's words are whole: the table scrolls in its box instead.
    cell = page.eval_on_selector("td:text('unbelievably-crunchy-ones')", "e => e.getBoundingClientRect().height")
    line = page.eval_on_selector("td:text('ripe')", "e => e.getBoundingClientRect().height")
    assert cell == line, (cell, line)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    phone.close()
    terminal.close()


def test_without_a_link_the_page_says_how_to_get_one(world, browser):
    context = browser.new_context()
    page = context.new_page()
    page.goto(world.base + "/")
    page.wait_for_selector(".need-link")
    assert "confab web --url" in page.text_content(".need-link")
    page.goto(world.base + "/c/not-an-id")
    assert "confab web --url" in page.text_content("body")
    assert page.eval_on_selector(".card-page", "e => getComputedStyle(e).borderRadius") != "0px"
    response = page.request.get(world.base + "/favicon.svg")
    assert response.status == 200 and response.headers["content-type"] == "image/svg+xml"
    assert page.eval_on_selector("link[rel=icon]", "e => e.href").endswith("/favicon.svg")
    context.close()


def test_screenshots(world, browser):
    """docs/screenshots: the desktop and the phone, light and dark (when asked for)."""
    if not SCREENSHOTS:
        return
    terminal = world.terminal("ana")
    conversation = new_conversation(terminal, "Weekend trip", profile="helper")
    terminal.call("conversation.attach", {"conversation": conversation})
    reply = terminal.call("message.send", {"conversation": conversation, "content": CODE_REPLY})["reply"]
    terminal.wait_event(lambda e: e["method"] == "message.completed" and e["params"]["message"]["id"] == reply, "the reply")
    terminal.call("message.send", {"conversation": conversation, "content": "[[tool:guarded {\"city\":\"Paris\"}]] [[tool-text:Let me check the weather.]]"})
    terminal.wait_event(lambda e: e["method"] == "tool.approval_requested", "the request")
    for scheme in ("light", "dark"):
        for width, height, name in ((1366, 860, "desktop"), (390, 844, "phone")):
            context = browser.new_context(color_scheme=scheme, viewport={"width": width, "height": height},
                                          has_touch=width < 600, is_mobile=width < 600)
            sign_in(context, world.owner_url, world.base).close()
            page = open_conversation(context, world, conversation)
            page.wait_for_selector(".card .state:text('waiting for approval')")
            page.screenshot(path=os.path.join(SCREENSHOTS, "%s-%s.png" % (name, scheme)))
            context.close()
    terminal.close()
