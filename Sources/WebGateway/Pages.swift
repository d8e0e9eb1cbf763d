/// The pages, served from the binary: two HTML shells, one stylesheet and one script. The
/// shells carry no secret: the script holds the page's token (see `script`). The
/// script draws everything from the gateway's events, setting every text with
/// `textContent`; the only HTML it inserts is a reply's markdown, which the gateway
/// rendered (MarkdownHTML). No inline script or style: the Content-Security-Policy is
/// `default-src 'self'`.
public enum Pages {
    public static let contentSecurityPolicy = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    static func shell(title: String, body: String, attributes: String) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>\(HTMLText.escape(title))</title>
        <link rel="stylesheet" href="/app.css">
        <script src="/app.js" defer></script>
        </head>
        <body \(attributes)>
        \(body)
        </body>
        </html>

        """
    }

    public static let list = shell(title: "confab", body: """
        <header><h1>confab</h1><span id="status" class="status">connecting…</span></header>
        <main><div id="notice" class="notice" role="status"></div><ul id="conversations" class="conversations"></ul><p id="empty" class="empty" hidden>No conversations yet.</p></main>
        """, attributes: "data-page=\"list\"")

    /// A conversation's page; `id` must already be checked (12 characters of the id alphabet).
    public static func conversation(id: String) -> String {
        shell(title: "confab", body: """
            <header><a href="/" id="back" class="back" aria-label="All conversations">&#8592;</a><h1 id="title">…</h1><span id="presence" class="presence"></span><span id="status" class="status">connecting…</span></header>
            <main id="messages" class="messages"></main>
            <footer>
            <div id="notice" class="notice" role="status"></div>
            <div id="actions" class="actions"><button id="cancel" type="button" hidden>Stop</button><button id="retry" type="button" hidden>Retry</button><button id="continue" type="button" hidden>Continue</button></div>
            <form id="composer" class="composer"><textarea id="input" rows="2" placeholder="Message: Enter sends, Shift-Enter starts a new line"></textarea><button id="send" type="submit">Send</button></form>
            </footer>
            """, attributes: "data-page=\"conversation\" data-conversation=\"\(HTMLText.escape(id))\"")
    }

    public static let unauthorized = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>confab: not found</title></head>
        <body><h1>Not found</h1><p>There is nothing here, or this link no longer works.</p></body></html>

        """

    public static let unavailable = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>confab: not available</title></head>
        <body><h1>Not available</h1><p>confabd could not hand over the file just now: try again in a moment.</p></body></html>

        """

    public static let stylesheet = """
        :root { --fg: #1d1f21; --bg: #fafafa; --muted: #6a6f75; --line: #d9dce0; --user: #e8f0fe; --card: #fff8e6; --accent: #1a73e8; }
        * { box-sizing: border-box; }
        html, body { margin: 0; height: 100%; }
        body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); display: flex; flex-direction: column; }
        header { display: flex; align-items: center; gap: .6em; padding: .5em .8em; border-bottom: 1px solid var(--line); background: #fff; position: sticky; top: 0; }
        header h1 { font-size: 1.05em; margin: 0; flex: 1; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
        .back { text-decoration: none; font-size: 1.2em; color: var(--accent); }
        .status { font-size: .8em; color: var(--muted); white-space: nowrap; }
        .status.down { color: #b3261e; font-weight: 600; }
        .presence { font-size: .8em; color: var(--muted); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; max-width: 40%; }
        main { flex: 1; overflow-y: auto; padding: .6em .8em; }
        .conversations { list-style: none; margin: 0; padding: 0; }
        .conversations li a { display: block; padding: .6em .4em; border-bottom: 1px solid var(--line); text-decoration: none; color: inherit; }
        .conversations .title { font-weight: 600; display: block; overflow-wrap: anywhere; }
        .conversations .meta, .empty { font-size: .8em; color: var(--muted); }
        .conversations .live-reply { font-size: .8em; color: #1e8e3e; font-weight: 600; margin-left: .5em; }
        .msg { margin: 0 0 .8em; padding: .5em .7em; border-radius: 8px; background: #fff; border: 1px solid var(--line); overflow-wrap: anywhere; }
        .msg.user { background: var(--user); }
        .msg.tool { background: var(--card); }
        .msg.superseded { opacity: .5; }
        .msg .meta { font-size: .75em; color: var(--muted); margin-bottom: .2em; }
        .msg .plain { white-space: pre-wrap; }
        .msg.streaming .body::after { content: "▍"; color: var(--muted); }
        .msg .attachment { font-size: .85em; color: var(--muted); font-family: ui-monospace, monospace; white-space: pre-wrap; }
        .msg .error { color: #b3261e; font-size: .85em; white-space: pre-wrap; }
        .body p { margin: .3em 0; white-space: pre-wrap; }
        .body pre { background: #f0f1f3; padding: .5em; overflow-x: auto; border-radius: 4px; white-space: pre; }
        .body pre[data-lang]::before { content: attr(data-lang); display: block; font-size: .75em; color: var(--muted); }
        .body pre.raw { white-space: pre-wrap; }
        .body code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .92em; }
        .body .table { overflow-x: auto; }
        .body table { border-collapse: collapse; margin: .4em 0; }
        .body th, .body td { border: 1px solid var(--line); padding: .2em .5em; }
        .body .al { text-align: left; } .body .ac { text-align: center; } .body .ar { text-align: right; }
        .body .unsafe-link { color: var(--muted); }
        .body .local-mark { font-size: .8em; font-weight: 600; color: #b3261e; }
        .thought { font-size: .85em; color: var(--muted); margin: .2em 0 .4em; }
        .thought summary { cursor: pointer; }
        .thought .thought-text { white-space: pre-wrap; border-left: 2px solid var(--line); padding-left: .6em; margin-top: .3em; }
        .calls { font-size: .85em; color: var(--muted); font-family: ui-monospace, monospace; white-space: pre-wrap; }
        .card .tool-name { font-weight: 600; font-family: ui-monospace, monospace; }
        .card pre { white-space: pre-wrap; background: #fff; padding: .3em; margin: .3em 0; }
        .card .answered { font-size: .85em; font-weight: 600; }
        .card button, .quick button, .actions button { margin: .2em .3em .2em 0; }
        button { font: inherit; padding: .3em .8em; border-radius: 6px; border: 1px solid var(--line); background: #fff; cursor: pointer; }
        button.approve { background: #1e8e3e; color: #fff; border-color: #1e8e3e; }
        button.deny { background: #fff; color: #b3261e; border-color: #b3261e; }
        footer { border-top: 1px solid var(--line); background: #fff; padding: .4em .8em; }
        .notice { font-size: .85em; color: #b3261e; }
        .notice:empty { display: none; }
        .composer { display: flex; gap: .4em; }
        .composer textarea { flex: 1; font: inherit; padding: .4em; border: 1px solid var(--line); border-radius: 6px; resize: vertical; min-height: 2.6em; }
        .readonly .composer, .readonly .actions, .readonly .quick { display: none; }
        .msg:not(:last-child) .quick { display: none; }
        @media (max-width: 480px) { body { font-size: 14px; } main { padding: .4em; } .presence { display: none; } }

        """

    public static let script = #"""
        "use strict";
        (function () {
          const page = document.body.dataset.page;
          const conversation = document.body.dataset.conversation || "";
          const statusEl = document.getElementById("status");
          let socket = null;
          let retryDelay = 300;
          let role = "read";
          let stopped = false;
          const views = new Map();
          // Where the tokens live: this origin's storage, which no other port of the host can
          // read (a cookie would go to all of them). The owner's token and each share link's
          // are kept apart, so opening a share link never replaces the owner's; a tab opened
          // through a share link follows its conversation as that link (sessionStorage).
          const OWNER_KEY = "confab.owner";
          const LINKS_KEY = "confab.links";
          const VIA_KEY = "confab.via";
          let opened = false;

          function links() {
            try {
              const map = JSON.parse(localStorage.getItem(LINKS_KEY) || "{}");
              return map && typeof map === "object" ? map : {};
            } catch (e) { return {}; }
          }

          function credential() {
            const owner = localStorage.getItem(OWNER_KEY);
            const link = conversation ? links()[conversation] : undefined;
            if (typeof link === "string" && sessionStorage.getItem(VIA_KEY) === conversation) return link;
            return owner || (typeof link === "string" ? link : null);
          }

          function forget(token) {
            if (localStorage.getItem(OWNER_KEY) === token) localStorage.removeItem(OWNER_KEY);
            const map = links();
            for (const key of Object.keys(map)) if (map[key] === token) delete map[key];
            localStorage.setItem(LINKS_KEY, JSON.stringify(map));
          }

          function stop(text) {
            stopped = true;
            setStatus("closed", true);
            notice(text);
            document.body.classList.add("readonly");
          }

          // A first visit: `#token=…`, which no server saw. The gateway says what it gives.
          function enter(token) {
            history.replaceState(null, "", location.pathname);
            setStatus("signing in…");
            fetch("/api/access", { headers: { "Authorization": "Bearer " + token }, cache: "no-store", credentials: "omit" })
              .then(function (response) { return response.ok ? response.json() : Promise.reject(response.status); })
              .then(function (access) {
                if (access.role === "owner") {
                  localStorage.setItem(OWNER_KEY, token);
                  sessionStorage.removeItem(VIA_KEY);
                  location.replace("/");
                } else if (typeof access.conversation === "string") {
                  const map = links();
                  map[access.conversation] = token;
                  localStorage.setItem(LINKS_KEY, JSON.stringify(map));
                  sessionStorage.setItem(VIA_KEY, access.conversation);
                  location.replace("/c/" + encodeURIComponent(access.conversation));
                }
              })
              .catch(function () { stop("This link does not work: it was revoked, expired or replaced."); });
          }

          function setStatus(text, down) {
            statusEl.textContent = text;
            statusEl.classList.toggle("down", !!down);
          }

          function connect() {
            const token = credential();
            if (!token) {
              stop("This page needs the link `confab web --url` prints, or a share link that still works.");
              return;
            }
            const scheme = location.protocol === "https:" ? "wss://" : "ws://";
            // The token goes as a subprotocol: a WebSocket can carry no header of the page's.
            socket = new WebSocket(scheme + location.host + "/ws" + (conversation ? "?c=" + encodeURIComponent(conversation) : ""),
                                   ["confab", "confab-token." + token]);
            opened = false;
            socket.onopen = function () { retryDelay = 300; opened = true; };
            socket.onmessage = function (event) {
              let message;
              try { message = JSON.parse(event.data); } catch (e) { return; }
              handle(message);
            };
            socket.onclose = function (event) {
              socket = null;
              if (event.code === 4403) forget(token);
              if (event.code === 4403 || event.code === 4404 || event.code === 4410) {
                stop(event.reason || "This page can no longer follow the conversation.");
                return;
              }
              if (stopped) return;
              setStatus("reconnecting…", true);
              if (event.code === 4429) {
                // Too many pages open on this link or in all: said, and tried again later.
                notice(event.reason);
                setTimeout(connect, 10000);
                return;
              }
              if (!opened) {
                // Refused before it opened: a token that no longer works stops the page.
                fetch("/api/access", { headers: { "Authorization": "Bearer " + token }, cache: "no-store", credentials: "omit" })
                  .then(function (response) {
                    if (response.status === 401) {
                      forget(token);
                      stop("This link no longer works.");
                    } else {
                      setTimeout(connect, retryDelay);
                    }
                  })
                  .catch(function () { setTimeout(connect, retryDelay); });
              } else {
                setTimeout(connect, retryDelay);
              }
              retryDelay = Math.min(retryDelay * 2, 4000);
            };
          }

          function send(object) {
            if (socket && socket.readyState === WebSocket.OPEN) {
              socket.send(JSON.stringify(object));
              return true;
            }
            notice("Not connected: try again in a moment.");
            return false;
          }

          function notice(text) {
            const el = document.getElementById("notice");
            if (el) el.textContent = text || "";
          }

          function element(tag, className, text) {
            const el = document.createElement(tag);
            if (className) el.className = className;
            if (text !== undefined && text !== null) el.textContent = String(text);
            return el;
          }

          function handle(event) {
            switch (event.type) {
              case "list": drawList(event.conversations || []); setStatus("live"); break;
              case "state": drawState(event); setStatus("live"); break;
              case "message": drawMessage(event.message); updateControls(); break;
              case "clients": drawPresence(event.clients || []); break;
              case "info": if (event.conversation) document.getElementById("title").textContent = event.conversation.title; break;
              case "retrying": notice("The model server refused; trying again (attempt " + event.attempt + ")."); break;
              case "notice": notice(event.text); break;
              case "download":
                // A one-use address the gateway made for this page (`/d/…`): fetched as a download.
                if (typeof event.url === "string" && event.url.startsWith("/d/")) {
                  const anchor = element("a");
                  anchor.href = event.url;
                  anchor.setAttribute("download", "");
                  anchor.rel = "noreferrer";
                  document.body.appendChild(anchor);
                  anchor.click();
                  anchor.remove();
                }
                break;
              case "gone":
                stopped = true;
                notice(event.reason);
                document.body.classList.add("readonly");
                break;
            }
          }

          function drawList(conversations) {
            const list = document.getElementById("conversations");
            list.replaceChildren();
            document.getElementById("empty").hidden = conversations.length > 0;
            for (const c of conversations) {
              const item = element("li");
              const link = element("a");
              link.href = "/c/" + encodeURIComponent(c.id);
              link.appendChild(element("span", "title", c.title));
              let meta = c.model + " · " + c.messages + " messages · " + c.updated.replace("T", " ").slice(0, 16);
              if (c.clients && c.clients.length) meta += " · here: " + c.clients.join(", ");
              link.appendChild(element("span", "meta", meta));
              if (c.streaming) link.appendChild(element("span", "live-reply", "replying…"));
              item.appendChild(link);
              list.appendChild(item);
            }
          }

          function drawPresence(names) {
            const el = document.getElementById("presence");
            el.textContent = names.length ? "here: " + names.join(", ") : "";
          }

          function orderKey(id) {
            const parts = id.slice(1).split(".");
            return [parseInt(parts[0], 10) || 0, parseInt(parts[1] || "0", 10) || 0];
          }

          function before(a, b) {
            const x = orderKey(a), y = orderKey(b);
            return x[0] < y[0] || (x[0] === y[0] && x[1] < y[1]);
          }

          function drawState(event) {
            role = event.role;
            document.body.classList.toggle("readonly", role === "read");
            if (event.conversation) document.getElementById("title").textContent = event.conversation.title;
            const box = document.getElementById("messages");
            box.replaceChildren();
            views.clear();
            for (const m of event.messages) drawMessage(m);
            drawPresence(event.clients || []);
            notice("");
            updateControls();
            box.scrollTop = box.scrollHeight;
          }

          function drawMessage(m) {
            if (!m) return;
            const box = document.getElementById("messages");
            const nearBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
            let el = views.get(m.id);
            // A delta changes only the text: everything else of the message is kept as drawn.
            const shape = JSON.stringify(Object.assign({}, m, { html: null, text: null, reasoning: !!m.reasoning }));
            if (el && el.dataset.shape === shape && !m.tool) {
              drawThought(el, m);
              const body = el.querySelector(".body");
              if (m.html !== undefined) body.innerHTML = m.html; // rendered and escaped by the gateway
              else body.textContent = m.text;
              if (nearBottom) box.scrollTop = box.scrollHeight;
              return;
            }
            if (!el) {
              el = element("article");
              el.id = "msg-" + m.id;
              views.set(m.id, el);
              let next = null;
              for (const child of box.children) {
                if (before(m.id, child.dataset.id)) { next = child; break; }
              }
              box.insertBefore(el, next);
            }
            el.dataset.id = m.id;
            el.dataset.status = m.status;
            el.dataset.cut = m.cut_off ? "1" : "";
            el.dataset.shape = shape;
            el.className = "msg " + m.role + " " + m.status + (m.superseded ? " superseded" : "") + (m.tool ? " card" : "");
            const opened = el.querySelector(":scope > details.thought[open]") !== null;
            el.replaceChildren();
            let meta = m.role === "user" ? (m.author || "user") : m.role === "tool" ? "tool" : "assistant";
            if (m.status !== "complete") meta += " · " + m.status;
            if (m.cancelled_by) meta += " by " + m.cancelled_by;
            if (m.superseded) meta += " · replaced";
            el.appendChild(element("div", "meta", meta));
            drawThought(el, m, opened);
            if (m.tool) {
              drawCard(el, m);
            } else if (m.html !== undefined) {
              const body = element("div", "body");
              body.innerHTML = m.html; // rendered and escaped by the gateway (MarkdownHTML)
              el.appendChild(body);
            } else {
              el.appendChild(element("div", "body plain", m.text));
            }
            if (m.attachments) {
              m.attachments.forEach(function (line, index) {
                const row = element("div", "attachment");
                row.appendChild(element("span", "line", line));
                // Asked for over the WebSocket: the gateway answers with a one-use address.
                const link = element("a", "save", "save");
                link.href = "#";
                link.addEventListener("click", function (event) {
                  event.preventDefault();
                  send({ op: "download", message: m.id, index: index });
                });
                row.appendChild(document.createTextNode(" "));
                row.appendChild(link);
                el.appendChild(row);
              });
            }
            if (m.tool_calls) {
              for (const call of m.tool_calls) el.appendChild(element("div", "calls", "→ " + call.name + " " + call.arguments));
            }
            if (m.error) el.appendChild(element("div", "error", m.error));
            if (m.quick_replies && !m.superseded) {
              const quick = element("div", "quick");
              for (const text of m.quick_replies) {
                const button = element("button", "", text);
                button.type = "button";
                button.addEventListener("click", function () { send({ op: "send", text: text }); });
                quick.appendChild(button);
              }
              el.appendChild(quick);
            }
            if (nearBottom) box.scrollTop = box.scrollHeight;
          }

          // A reply's thought: a folded block under its header, "Thinking… N s" while the model
          // thinks (counted on here between pieces), "Thought for N s" after; opened by a click.
          function drawThought(el, m, opened) {
            let block = el.querySelector(":scope > details.thought");
            if (!m.reasoning) { if (block) block.remove(); return; }
            if (!block) {
              block = element("details", "thought");
              if (opened) block.open = true;
              block.appendChild(element("summary"));
              block.appendChild(element("div", "thought-text"));
              const meta = el.querySelector(":scope > .meta");
              el.insertBefore(block, meta ? meta.nextSibling : el.firstChild);
            }
            block.dataset.seconds = String(m.reasoning.seconds);
            block.dataset.since = String(Date.now());
            block.dataset.thinking = m.reasoning.thinking ? "1" : "";
            block.querySelector(".thought-text").textContent = m.reasoning.text; // the model's text, as text
            thoughtSummary(block);
          }

          function thoughtSummary(block) {
            const thinking = block.dataset.thinking === "1";
            const seconds = Number(block.dataset.seconds) + (thinking ? Math.floor((Date.now() - Number(block.dataset.since)) / 1000) : 0);
            block.querySelector("summary").textContent = (thinking ? "Thinking… " : "Thought for ") + seconds + " s";
          }

          setInterval(function () {
            document.querySelectorAll("details.thought[data-thinking='1']").forEach(thoughtSummary);
          }, 1000);

          function drawCard(el, m) {
            const t = m.tool;
            const head = element("div");
            head.appendChild(element("span", "tool-name", t.name || "tool"));
            let facts = "";
            if (t.http_status !== undefined) facts += " · HTTP " + t.http_status;
            if (t.duration_ms !== undefined) facts += " · " + t.duration_ms + " ms";
            if (t.approval) facts += " · " + t.approval;
            head.appendChild(element("span", "facts", facts));
            el.appendChild(head);
            if (t.arguments !== undefined) el.appendChild(element("pre", "arguments", t.arguments));
            if (t.answered) el.appendChild(element("div", "answered", t.answered));
            if (t.approval === "pending" && m.status === "streaming" && role === "owner") {
              const approve = element("button", "approve", "Approve");
              approve.type = "button";
              approve.addEventListener("click", function () { send({ op: "approve", call: t.call, allow: true }); });
              const deny = element("button", "deny", "Deny");
              deny.type = "button";
              deny.addEventListener("click", function () { send({ op: "approve", call: t.call, allow: false }); });
              el.appendChild(approve);
              el.appendChild(deny);
            }
            if (m.status !== "streaming") {
              const details = element("details", "result");
              details.appendChild(element("summary", "", "result" + (t.truncated ? " (cut)" : "")));
              details.appendChild(element("pre", "", t.result));
              el.appendChild(details);
            }
          }

          function updateControls() {
            if (page !== "conversation") return;
            const canWrite = role === "owner" || role === "write";
            let streaming = false;
            let last = null;
            for (const el of document.getElementById("messages").children) {
              if (el.dataset.status === "streaming") streaming = true;
              if (!el.classList.contains("superseded")) last = el;
            }
            const lastIsReply = !!last && last.classList.contains("assistant");
            document.getElementById("cancel").hidden = !canWrite || !streaming;
            document.getElementById("retry").hidden = !canWrite || streaming || !lastIsReply;
            const cut = lastIsReply && !streaming && last.dataset.cut === "1";
            document.getElementById("continue").hidden = !canWrite || !cut;
          }

          if (page === "conversation") {
            const input = document.getElementById("input");
            const form = document.getElementById("composer");
            form.addEventListener("submit", function (event) {
              event.preventDefault();
              const text = input.value;
              if (!text.trim()) return;
              if (send({ op: "send", text: text })) input.value = "";
            });
            input.addEventListener("keydown", function (event) {
              if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
                event.preventDefault();
                form.requestSubmit();
              }
            });
            document.getElementById("cancel").addEventListener("click", function () { send({ op: "cancel" }); });
            document.getElementById("retry").addEventListener("click", function () { send({ op: "retry" }); });
            document.getElementById("continue").addEventListener("click", function () { send({ op: "continue" }); });
          }
          if (location.hash.startsWith("#token=")) {
            enter(decodeURIComponent(location.hash.slice("#token=".length)));
          } else if (page === "list" && !localStorage.getItem(OWNER_KEY) && sessionStorage.getItem(VIA_KEY)) {
            // A share link's tab has one conversation and no list.
            location.replace("/c/" + encodeURIComponent(sessionStorage.getItem(VIA_KEY)));
          } else {
            connect();
          }
        })();

        """#
}
