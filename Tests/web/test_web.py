"""confab-web in a real browser: headless Chromium (Debian's) through Playwright."""
import http.client
import json
import os
import sys
import time

from conftest import wait_for

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


def upgrade_headers(world, origin, cookie=None):
    headers = {"Host": "127.0.0.1:%d" % world.port, "Connection": "Upgrade", "Upgrade": "websocket",
               "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    if origin:
        headers["Origin"] = origin
    if cookie:
        headers["Cookie"] = "confab_token=" + cookie
    return headers


def owner_token(world):
    return world.owner_url.split("token=", 1)[1]


def test_no_token_is_401(world):
    for path in ["/", "/c/k3v9q2m8x7ad", "/?token=wrong"]:
        response, _ = raw_request(world, path)
        assert response.status == 401, path
    # The WebSocket upgrade is refused before it happens (the server library answers a
    # refused upgrade 400).
    response, _ = raw_request(world, "/ws", upgrade_headers(world, world.base))
    assert response.status != 101 and response.status >= 400
    response, _ = raw_request(world, "/", {"Cookie": "confab_token=" + owner_token(world)})
    assert response.status == 200
    assert response.getheader("Content-Security-Policy").startswith("default-src 'self'")


def test_foreign_origin_websocket_is_refused(world, owner):
    token = owner_token(world)
    response, _ = raw_request(world, "/ws", upgrade_headers(world, "http://evil.example", token))
    assert response.status != 101 and response.status >= 400
    response, _ = raw_request(world, "/ws", upgrade_headers(world, None, token))
    assert response.status != 101 and response.status >= 400
    response, _ = raw_request(world, "/ws", upgrade_headers(world, world.base, token))
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
    assert link.startswith(world.base + "/s/")
    context = browser.new_context()
    page = context.new_page()
    page.goto(link)
    page.wait_for_url("**/c/" + conversation)
    page.wait_for_selector(".msg.assistant .body:has-text('visible to the share')")
    assert not page.is_visible("#composer")
    # The server refuses a send even when the page is made to try.
    page.evaluate("""url => { const ws = new WebSocket(url); window.probe = [];
        ws.onmessage = e => window.probe.push(JSON.parse(e.data));
        ws.onopen = () => ws.send(JSON.stringify({op: "send", text: "sneaky"})); }""",
                  "ws://127.0.0.1:%d/ws?c=%s" % (world.port, conversation))
    wait_for(lambda: any(e.get("type") == "notice" and "read-only" in e.get("text", "")
                         for e in page.evaluate("window.probe")), "the refusal")
    # The gateway sends the refusal instead of the call, so once it is here no send follows.
    terminal.poll()
    assert not any(e["method"] == "message.created" and e["params"]["message"]["content"] == "sneaky" for e in terminal.events)
    # Another conversation does not exist for it, nor does the list.
    assert page.goto(world.base + "/c/" + other).status == 404
    outcome = page.evaluate("""url => new Promise(done => { const ws = new WebSocket(url);
        ws.onopen = () => done("open"); ws.onerror = () => done("refused"); })""",
                            "ws://127.0.0.1:%d/ws?c=%s" % (world.port, other))
    assert outcome == "refused"
    page.goto(world.base + "/")
    page.wait_for_url("**/c/" + conversation)
    page.wait_for_selector("#status:text('live')")
    # Revoked: the open page is closed and the link stops working.
    share_id = [line.split()[0] for line in world.web("shares").splitlines() if conversation in line][0]
    world.web("revoke", share_id)
    page.wait_for_selector("#status:text('closed')")
    assert "no longer works" in page.text_content("#notice")
    assert page.goto(world.base + "/c/" + conversation).status == 401
    # Expired: a link of one second.
    # (an id may be shortened to a unique prefix, as confab takes it)
    short = world.web("share", conversation[:6], "--expires", "1s").strip()
    token = short.rsplit("/", 1)[1]
    wait_for(lambda: raw_request(world, "/c/" + conversation, {"Cookie": "confab_token=" + token})[0].status == 401,
             "the link to expire", timeout=30)
    assert page.goto(short).status == 401
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
    phone_page.wait_for_url(world.base + "/")
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
        page.goto("http://127.0.0.1:%d/?token=%s" % (port, owner_token(world)))
        # The first visit's page moves on to / by itself (with the cookie): wait for it rather
        # than navigate again, which would race it.
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
    page.evaluate("""([url, call]) => { const ws = new WebSocket(url); window.probe = [];
        ws.onmessage = e => window.probe.push(JSON.parse(e.data));
        ws.onopen = () => ws.send(JSON.stringify({op: "approve", call: call, allow: true})); }""",
                  ["ws://127.0.0.1:%d/ws?c=%s" % (world.port, conversation), requested["params"]["call"]])
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
    path = "/c/%s/file/%s/0" % (conversation, message)
    link = world.web("share", conversation, "--read-only", "--expires", "2h").strip()
    token = link.rsplit("/", 1)[1]
    # Without a token, or with a wrong one: nothing.
    assert raw_request(world, path)[0].status == 401
    assert raw_request(world, path, {"Cookie": "confab_token=wrong"})[0].status == 401
    # With the share's: the bytes, as a download of no type a browser would render.
    response, body = raw_request(world, path, {"Cookie": "confab_token=" + token})
    assert response.status == 200
    assert body == contents
    assert response.getheader("Content-Type") == "application/octet-stream"
    assert response.getheader("X-Content-Type-Options") == "nosniff"
    assert response.getheader("Content-Disposition") == "attachment; filename=\"page_.html\"; filename*=UTF-8''page%22.html"
    # Another conversation's file, a message or a file that is not there: as if none existed.
    for other_path in ["/c/%s/file/%s/0" % (other, hidden), "/c/%s/file/%s/1" % (conversation, message),
                       "/c/%s/file/m999/0" % conversation, "/c/%s/file/..%%2F/0" % conversation]:
        assert raw_request(world, other_path, {"Cookie": "confab_token=" + token})[0].status == 404, other_path
    # And from the page: the save link is a download.
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.goto(link)
    page.wait_for_url("**/c/" + conversation)
    page.wait_for_selector(".msg.user .attachment a.save")
    with page.expect_download() as download:
        page.click(".msg.user .attachment a.save")
    with open(download.value.path(), "rb") as saved:
        assert saved.read() == contents
    context.close()
    terminal.close()
