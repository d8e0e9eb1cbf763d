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
