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
  // The page's title, and what happened while the tab was hidden (counted in the title).
  let baseTitle = document.title;
  let unseen = 0;
  // The list's row being renamed or asked about (drawing waits while one is open).
  let editing = null;
  let heldList = null;
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

  // No token here: what the page is, and how to get a link to it.
  function needLink() {
    const card = element("div", "card-page need-link");
    card.appendChild(element("h1", "", "This page needs a link"));
    const p1 = element("p");
    p1.append("On the machine confab runs on, ", element("code", "", "confab web --url"),
              " prints the owner's link; open it here once and this browser stays signed in.");
    const p2 = element("p");
    p2.append("A link to one conversation comes from ", element("code", "", "confab web share ID"), ".");
    card.append(p1, p2);
    const main = document.querySelector("main");
    main.replaceChildren(card);
    document.body.classList.add("plain-page");
  }

  function setStatus(text, down) {
    statusEl.textContent = text;
    statusEl.classList.toggle("down", !!down);
  }

  function connect() {
    const token = credential();
    if (!token) {
      stop("");
      needLink();
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
      case "list":
        heldList = event.conversations || [];
        if (!editing) drawList(heldList);
        document.getElementById("new").hidden = false;
        setStatus("live");
        break;
      case "attention": listAttention(event); break;
      case "created":
        if (typeof event.conversation === "string" && /^[a-z0-9]{12}$/.test(event.conversation)) {
          location.href = "/c/" + encodeURIComponent(event.conversation);
        }
        break;
      case "state": drawState(event); setStatus("live"); break;
      case "message": attention(event.message); drawMessage(event.message); updateControls(); break;
      case "clients": drawPresence(event.clients || []); break;
      case "info": if (event.conversation) showTitle(event.conversation.title); break;
      case "summary": drawSummary(event.summary); break;
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
      item.dataset.id = c.id;
      if (editing && editing.id === c.id && editing.kind === "rename") {
        item.appendChild(renameForm(c));
        list.appendChild(item);
        continue;
      }
      const link = element("a");
      link.href = "/c/" + encodeURIComponent(c.id);
      link.appendChild(element("span", "title", c.title));
      let meta = c.model + " · " + c.messages + " messages · " + when(c.updated);
      if (c.clients && c.clients.length) meta += " · here: " + c.clients.join(", ");
      link.appendChild(element("span", "meta", meta));
      if (c.streaming) link.appendChild(element("span", "live-reply", "replying…"));
      item.appendChild(link);
      item.appendChild(rowActions(c));
      list.appendChild(item);
    }
  }

  function button(text, className, onClick) {
    const b = element("button", className, text);
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }

  function endEdit() {
    editing = null;
    if (heldList) drawList(heldList);
  }

  // Rename and delete, the owner's (the list is the owner's page alone). Delete asks first.
  function rowActions(c) {
    const box = element("div", "row-actions");
    if (editing && editing.id === c.id && editing.kind === "delete") {
      box.appendChild(element("span", "meta", "Delete “" + c.title + "”?"));
      box.appendChild(button("Delete", "danger confirm-delete", function () {
        send({ op: "delete", conversation: c.id });
        endEdit();
      }));
      box.appendChild(button("Keep", "keep", endEdit));
      return box;
    }
    box.appendChild(button("Rename", "rename-button", function () {
      editing = { id: c.id, kind: "rename" };
      drawList(heldList || []);
      const input = document.querySelector(".conversations .rename input");
      if (input) { input.focus(); input.select(); }
    }));
    box.appendChild(button("Delete", "danger delete-button", function () {
      editing = { id: c.id, kind: "delete" };
      drawList(heldList || []);
    }));
    return box;
  }

  function renameForm(c) {
    const form = element("form", "rename");
    const input = element("input");
    input.value = c.title;
    input.maxLength = 200;
    input.setAttribute("aria-label", "New title");
    form.appendChild(input);
    form.appendChild(button("Cancel", "", endEdit));
    const save = element("button", "primary", "Save");
    save.type = "submit";
    form.appendChild(save);
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      const title = input.value.replace(/[\r\n]+/g, " ").trim();
      if (title && title !== c.title) send({ op: "rename", conversation: c.id, title: title });
      endEdit();
    });
    input.addEventListener("keydown", function (event) { if (event.key === "Escape") endEdit(); });
    return form;
  }

  // A time as people read it: today's as its hour, older ones with their day.
  function when(stamp) {
    const date = new Date(stamp);
    if (isNaN(date.getTime())) return String(stamp || "").replace("T", " ").slice(0, 16);
    const now = new Date();
    const time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    if (date.toDateString() === now.toDateString()) return time;
    return date.toLocaleDateString([], { month: "short", day: "numeric" }) + " " + time;
  }

  function showTitle(title) {
    document.getElementById("title").textContent = title;
    baseTitle = title + " · confab";
    retitle();
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
    if (event.conversation) showTitle(event.conversation.title);
    // A share link's tab has no list to go back to: the arrow goes; nor may it rename.
    document.getElementById("back").hidden = role !== "owner";
    document.getElementById("rename").hidden = role !== "owner" || !document.getElementById("retitle").hidden;
    const box = document.getElementById("messages");
    box.replaceChildren();
    views.clear();
    for (const m of event.messages) drawMessage(m);
    drawSummary(event.summary);
    drawPresence(event.clients || []);
    notice("");
    updateControls();
    box.scrollTop = box.scrollHeight;
  }

  // Where a summary stands for the messages before it (the model is sent it instead of them;
  // every message stays here): one line after its last message, its text folded under it.
  function drawSummary(s) {
    const old = document.getElementById("summary-line");
    if (old) old.remove();
    if (!s) return;
    const line = element("details", "summary-line");
    line.id = "summary-line";
    line.appendChild(element("summary", "", s.line));
    line.appendChild(element("div", "summary-text", s.text)); // the model's text, as text
    const box = document.getElementById("messages");
    const anchor = document.getElementById("msg-" + s.after);
    box.insertBefore(line, anchor ? anchor.nextSibling : box.firstChild);
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
      if (m.html !== undefined) {
        body.innerHTML = m.html; // rendered and escaped by the gateway
        decorate(body, m.status === "streaming");
      } else body.textContent = m.text;
      if (nearBottom) box.scrollTop = box.scrollHeight;
      return;
    }
    if (!el) {
      el = element("article");
      el.id = "msg-" + m.id;
      views.set(m.id, el);
      let next = null;
      for (const child of box.children) {
        if (!child.dataset.id) continue; // the summary's line
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
    // Who, with which model, when; then what is unusual about it.
    const meta = element("div", "meta");
    meta.appendChild(element("span", "who", m.role === "user" ? (m.author || "user") : m.role === "tool" ? "tool" : "assistant"));
    if (m.model) meta.appendChild(element("span", "model", m.model));
    if (m.created) {
      const time = element("time", "time", when(m.created));
      time.dateTime = m.created;
      time.title = new Date(m.created).toLocaleString();
      meta.appendChild(time);
    }
    let flags = "";
    if (m.status !== "complete" && !m.tool) flags += m.status === "streaming" ? "writing…" : m.status;
    if (m.cancelled_by) flags += " by " + m.cancelled_by;
    if (m.superseded) flags += (flags ? " · " : "") + "replaced";
    if (flags) meta.appendChild(element("span", "flags", flags));
    if (m.role === "assistant" && m.html !== undefined) {
      meta.appendChild(button("Copy", "copy-reply", function (event) {
        // The text as it reads, without the code blocks' own buttons.
        const body = el.querySelector(":scope > .body");
        body.classList.add("copying");
        const text = body.innerText.trim();
        body.classList.remove("copying");
        copy(text, event.currentTarget);
      }));
    }
    el.appendChild(meta);
    drawThought(el, m, opened);
    if (m.tool) {
      drawCard(el, m);
    } else if (m.html !== undefined) {
      const body = element("div", "body");
      body.innerHTML = m.html; // rendered and escaped by the gateway (MarkdownHTML)
      decorate(body, m.status === "streaming");
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
    block.querySelector(".thought-text").innerHTML = m.reasoning.html; // rendered and escaped by the gateway (MarkdownHTML)
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
    const head = element("div", "tool-head");
    head.appendChild(element("span", "tool-name", t.name || "tool"));
    const state = element("span", "state", t.state || m.status);
    state.dataset.state = t.state || m.status;
    head.appendChild(state);
    const facts = [];
    if (t.http_status !== undefined) facts.push("HTTP " + t.http_status);
    if (t.duration_ms !== undefined) facts.push(t.duration_ms + " ms");
    if (facts.length) head.appendChild(element("span", "facts", facts.join(" · ")));
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

  // ---- Code blocks: highlighted here, with a copy button; the caret at the text's end.

  // A small highlighter: per language its keywords, and how its strings and comments look.
  // It only wraps pieces of the code's own text in spans (set as text): it never parses HTML.
  const C_LIKE = { line: "//", block: true, strings: "\"'`" };
  const LANGUAGES = {
    js: Object.assign({ words: "await async break case catch class const continue default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while yield" }, C_LIKE),
    ts: Object.assign({ words: "abstract any as async await boolean break case catch class const continue declare default do else enum export extends false finally for from function if implements import in interface keyof let new null number private protected public readonly return static string super switch this throw true try type typeof undefined var void while" }, C_LIKE),
    python: { line: "#", strings: "\"'", words: "and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return self True try while with yield" },
    swift: Object.assign({ words: "actor any as async await break case catch class continue default defer do else enum extension false fileprivate for func guard if import in init inout internal is let nil private protocol public return self Self static struct switch throw throws true try var where while" }, C_LIKE, { strings: "\"" }),
    go: Object.assign({ words: "break case chan const continue default defer else fallthrough false for func go goto if import interface map nil package range return select struct switch true type var" }, C_LIKE),
    rust: Object.assign({ words: "as async await break const continue crate else enum false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while" }, C_LIKE, { strings: "\"" }),
    c: Object.assign({ words: "auto bool break case char class const continue default delete do double else enum extern false float for goto if include define int long namespace new nullptr private public return short signed sizeof static struct switch template this true typedef union unsigned using void volatile while" }, C_LIKE, { strings: "\"'" }),
    java: Object.assign({ words: "abstract boolean break case catch char class continue default do double else enum extends false final finally float for if implements import instanceof int interface long new null package private protected public return static super switch this throw throws true try void while" }, C_LIKE, { strings: "\"'" }),
    sh: { line: "#", strings: "\"'", words: "case do done elif else esac exit export fi for function if in local read return set then until while echo cd" },
    json: { strings: "\"", words: "true false null" },
    sql: { line: "--", block: true, strings: "'", words: "select from where and or not insert into values update set delete create table drop join left right inner outer on group by order limit as null is in like having distinct" },
  };
  const ALIASES = { javascript: "js", jsx: "js", mjs: "js", typescript: "ts", tsx: "ts", py: "python", python3: "python",
    golang: "go", rs: "rust", cpp: "c", "c++": "c", h: "c", hpp: "c", cc: "c", kotlin: "java", bash: "sh", shell: "sh", zsh: "sh", console: "sh" };
  const grammars = new Map();

  function escapeRegExp(text) { return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  function grammar(name) {
    const key = ALIASES[name] || name;
    const lang = LANGUAGES[key];
    if (!lang) return null;
    if (grammars.has(key)) return grammars.get(key);
    const parts = [];
    // Five groups, always, in CLASSES' order: one that cannot match stands for a missing kind.
    const never = "((?!))";
    parts.push(lang.block ? "(/\\*[\\s\\S]*?(?:\\*/|$))" : never);
    parts.push(lang.line ? "(" + escapeRegExp(lang.line) + "[^\\n]*)" : never);
    const quotes = lang.strings.split("").map(function (q) {
      const e = escapeRegExp(q);
      return e + "(?:\\\\[\\s\\S]|(?!" + e + ")[^\\\\" + (q === "`" ? "" : "\\n") + "])*(?:" + e + "|(?=\\n)|$)";
    });
    parts.push("(" + quotes.join("|") + ")");
    parts.push("(\\b(?:0x[0-9a-fA-F_]+|\\d[\\d_]*(?:\\.\\d+)?(?:[eE][+-]?\\d+)?)\\b)");
    parts.push("(\\b(?:" + lang.words.split(" ").map(escapeRegExp).join("|") + ")\\b)");
    const compiled = new RegExp(parts.join("|"), key === "sql" ? "gi" : "g");
    grammars.set(key, compiled);
    return compiled;
  }

  const CLASSES = [null, "hl-com", "hl-com", "hl-str", "hl-num", "hl-key"];

  function highlight(code, name) {
    const pattern = grammar(name);
    if (!pattern || code.dataset.highlighted === "1") return;
    const text = code.textContent;
    if (text.length > 200000) return;
    const out = document.createDocumentFragment();
    let at = 0;
    pattern.lastIndex = 0;
    let match;
    while ((match = pattern.exec(text)) !== null) {
      if (match[0].length === 0) { pattern.lastIndex++; continue; }
      let group = 1;
      while (group < CLASSES.length && match[group] === undefined) group++;
      if (match.index > at) out.appendChild(document.createTextNode(text.slice(at, match.index)));
      out.appendChild(element("span", CLASSES[group], match[0]));
      at = match.index + match[0].length;
    }
    if (at < text.length) out.appendChild(document.createTextNode(text.slice(at)));
    code.replaceChildren(out);
    code.dataset.highlighted = "1";
  }

  // Highlighted blocks by their text, so a reply growing delta by delta highlights each
  // finished block once.
  const highlighted = new Map();

  function decorate(body, streaming) {
    const blocks = body.querySelectorAll("pre");
    blocks.forEach(function (pre, index) {
      const code = pre.querySelector("code");
      const lang = pre.dataset.lang;
      // The block still being written is left plain until it ends.
      const open = streaming && index === blocks.length - 1;
      if (code && lang && !open) {
        const key = lang + "\u0000" + code.textContent;
        const done = highlighted.get(key);
        if (done) {
          code.replaceChildren(done.cloneNode(true));
          code.dataset.highlighted = "1";
        } else {
          highlight(code, lang);
          if (highlighted.size > 200) highlighted.clear();
          const copyOf = document.createDocumentFragment();
          code.childNodes.forEach(function (node) { copyOf.appendChild(node.cloneNode(true)); });
          highlighted.set(key, copyOf);
        }
      }
      const wrap = element("div", "code");
      pre.replaceWith(wrap);
      wrap.appendChild(pre);
      wrap.appendChild(button("Copy", "copy", function (event) {
        copy((code || pre).textContent, event.currentTarget);
      }));
    });
    if (streaming) {
      // The caret at the end of the last text, inline, not on a line of its own.
      const texts = body.querySelectorAll("p, li, h1, h2, h3, h4, h5, h6, td, th, pre > code, pre");
      const last = texts.length ? texts[texts.length - 1] : body;
      last.appendChild(element("span", "caret"));
    }
  }

  function copy(text, from) {
    const done = function () {
      from.textContent = "Copied";
      from.classList.add("copied");
      setTimeout(function () { from.textContent = "Copy"; from.classList.remove("copied"); }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { notice("The browser did not allow copying."); });
      return;
    }
    // A page on a LAN name over http has no clipboard API: the old way, through a selection.
    const area = element("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "offscreen";
    document.body.appendChild(area);
    area.select();
    try { if (document.execCommand("copy")) done(); } catch (e) { notice("The browser did not allow copying."); }
    area.remove();
  }

  // ---- Telling the person: the title counts what happened while the tab was hidden, and
  // the browser's notifications say it once they are allowed (asked on a click only).

  const announced = new Set();

  function retitle() {
    document.title = (unseen > 0 ? "(" + unseen + ") " : "") + baseTitle;
  }

  function hidden() { return document.visibilityState === "hidden"; }

  function attention(m) {
    if (!m || page !== "conversation") return;
    let what = null;
    if (m.tool && m.tool.state === "waiting for approval" && role === "owner") {
      what = "A tool call waits for your approval: " + (m.tool.name || "tool");
    } else if (m.role === "assistant" && m.status !== "streaming" && !m.tool_calls) {
      const before = views.get(m.id);
      if (before && before.dataset.status === "streaming") what = m.status === "complete" ? "The reply is ready" : "The reply ended: " + m.status;
    }
    const key = m.id + ":" + (m.tool ? m.tool.state : m.status);
    if (!what || announced.has(key)) return;
    announced.add(key);
    if (!hidden()) return;
    tell(baseTitle, what, "confab-" + conversation + "-" + m.id, null);
  }

  // The list page: a conversation it follows has a call waiting for approval, or a reply
  // that ended (the gateway says which, for conversations this link may see); a click on
  // the notification opens that conversation.
  function listAttention(event) {
    if (page !== "list" || typeof event.conversation !== "string" || !/^[a-z0-9]{12}$/.test(event.conversation)) return;
    const key = event.conversation + ":" + String(event.message) + ":" + String(event.text);
    if (announced.has(key)) return;
    announced.add(key);
    if (!hidden()) return;
    tell(String(event.title || "confab") + " · confab", String(event.text || ""),
      "confab-" + event.conversation + "-" + String(event.message), "/c/" + encodeURIComponent(event.conversation));
  }

  // One more thing unseen in the title, and the browser's notification once allowed.
  function tell(title, body, tag, opens) {
    unseen += 1;
    retitle();
    if ("Notification" in window && Notification.permission === "granted") {
      try {
        const note = new Notification(title, { body: body, tag: tag });
        note.onclick = function () {
          window.focus();
          note.close();
          if (opens) location.href = opens;
        };
      } catch (e) { /* a browser that allows notifications only from a service worker */ }
    }
  }

  document.addEventListener("visibilitychange", function () {
    if (!hidden() && unseen) { unseen = 0; retitle(); }
  });

  function offerNotifications() {
    const ask = document.getElementById("notify");
    if (!ask) return;
    ask.hidden = !("Notification" in window) || Notification.permission !== "default";
    ask.addEventListener("click", function () {
      Notification.requestPermission().then(function () { ask.hidden = true; });
    });
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
    // On a phone (a touch screen) Enter starts a new line and Send sends.
    const touch = window.matchMedia("(pointer: coarse)").matches;
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      const text = input.value;
      if (!text.trim()) return;
      if (send({ op: "send", text: text })) input.value = "";
    });
    input.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing && !touch) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    if (touch || window.matchMedia("(max-width: 600px)").matches) input.placeholder = "Message";
    offerNotifications();
    document.getElementById("cancel").addEventListener("click", function () { send({ op: "cancel" }); });
    document.getElementById("retry").addEventListener("click", function () { send({ op: "retry" }); });
    document.getElementById("continue").addEventListener("click", function () { send({ op: "continue" }); });
    // Renaming here, as in the list: the title becomes a field until saved or cancelled; the
    // new title comes back as every other page's does (an `info` event).
    const titleEl = document.getElementById("title");
    const renameButton = document.getElementById("rename");
    const retitle = document.getElementById("retitle");
    const retitleInput = document.getElementById("retitle-input");
    function editTitle(on) {
      retitle.hidden = !on;
      titleEl.hidden = on;
      renameButton.hidden = on || role !== "owner";
      if (on) { retitleInput.value = titleEl.textContent; retitleInput.focus(); retitleInput.select(); }
    }
    renameButton.addEventListener("click", function () { editTitle(true); });
    document.getElementById("retitle-cancel").addEventListener("click", function () { editTitle(false); });
    retitleInput.addEventListener("keydown", function (event) { if (event.key === "Escape") editTitle(false); });
    retitle.addEventListener("submit", function (event) {
      event.preventDefault();
      const title = retitleInput.value.replace(/[\r\n]+/g, " ").trim();
      if (title && title !== titleEl.textContent) send({ op: "rename", title: title });
      editTitle(false);
    });
  }
  if (page === "list") {
    const start = document.getElementById("new");
    start.addEventListener("click", function () { send({ op: "create" }); });
    offerNotifications();
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
