// Varaverk dock page. Plain JavaScript, no dependencies, works offline.
// Safety rule: text from the model or from documents is only ever shown through textContent.
// The one exception is the "html" field the server sends, which it rendered from Markdown with
// raw HTML disabled and then sanitised with nh3 (an allow-list of tags and URL schemes), and
// the Markdown render.js renders while an answer streams (markdown-it, then DOMPurify).
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const messagesEl = $("messages");
  const questionEl = $("question");
  const profileEl = $("profile");
  // turn: the turn this page follows now (turns.js), or null. view: bumped whenever the
  // page changes conversation, so a late reply for an earlier view is dropped.
  const state = { chatId: null, turn: null, view: 0, profiles: {}, logsLoadedFor: null,
                  bugDraft: null, memoryStatus: null, memoryEnabled: false };
  const R = window.VaraverkRender;
  let turns = null;  // turns.js: asking, following, stopping (wired at the end)
  let memoryView = null;  // memory.js: the long-term memory dialog (wired at the end)

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  async function api(path, options) {
    const resp = await fetch(path, Object.assign({ credentials: "same-origin" }, options || {}));
    if (resp.status === 401) { window.location.href = "/login"; throw new Error("login required"); }
    return resp;
  }

  async function apiJson(path, options) {
    const resp = await api(path, options);
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (!resp.ok) throw new Error((body && body.error) || ("HTTP " + resp.status));
    return body;
  }

  function fmtNum(n) {
    if (n === null || n === undefined || n === "") return "–";
    return Number(n).toLocaleString("en-US");
  }

  function fmtSeconds(s) {
    if (s === null || s === undefined || isNaN(Number(s))) return null;
    const v = Number(s);
    return v < 1 ? Math.round(v * 1000) + " ms" : v.toFixed(2) + " s";
  }

  function scrollDown() { messagesEl.scrollTop = messagesEl.scrollHeight; }

  // Whether the reader is at the end of the messages (then a streaming answer is followed;
  // a reader who scrolled up to read stays where they are).
  function atBottom() {
    return messagesEl.scrollHeight - messagesEl.scrollTop - messagesEl.clientHeight < 80;
  }

  function hideHint() { const h = $("empty-hint"); if (h) h.hidden = true; }

  // ── messages ───────────────────────────────────────────────────────────────────────────

  function addUser(text) {
    hideHint();
    const wrap = el("div", "msg user");
    wrap.appendChild(el("div", "bubble", text));
    messagesEl.appendChild(wrap);
    scrollDown();
  }

  function addAssistant() {
    hideHint();
    const wrap = el("div", "msg assistant");
    const parts = {
      wrap: wrap,
      badges: el("div", "badges"),
      reasoning: null,
      capabilities: el("ul", "capabilities"),
      answer: el("div", "answer streaming"),
      findings: el("div", "findings"),
      sources: el("div", "sources"),
      meta: el("div", "meta"),
      actions: el("div", "actions"),
      error: el("div", "error"),
      text: "",
      thinking: "",
      sourceList: [],
      findingList: [],
      pending: false,
    };
    parts.actions.appendChild(R.copyButton("copy answer", () => parts.text));
    parts.capabilities.hidden = true;
    parts.findings.hidden = true;
    parts.sources.hidden = true;
    parts.error.hidden = true;
    wrap.append(parts.badges, parts.capabilities, parts.answer, parts.findings, parts.sources,
                parts.meta, parts.actions, parts.error);
    messagesEl.appendChild(wrap);
    scrollDown();
    return parts;
  }

  function addBadge(parts, text, cls) {
    parts.badges.appendChild(el("span", "badge " + (cls || ""), text));
  }

  // What long-term memory recalled for an answer: one badge each ("remembered from ...").
  function renderMemory(parts, recalled) {
    (recalled || []).forEach((r) => addBadge(parts, r.label || "remembered", "memory"));
  }

  function ensureReasoning(parts) {
    if (!parts.reasoning) {
      const det = el("details", "reasoning");
      det.appendChild(el("summary", null, "Reasoning"));
      const pre = el("pre", "reasoning-text");
      det.appendChild(pre);
      parts.reasoning = { det: det, pre: pre };
      parts.wrap.insertBefore(det, parts.answer);
    }
    return parts.reasoning;
  }

  function sourceLabel(s) {
    if (s.citation) return s.citation;
    if (s.label) return s.label;
    return [s.path, s.section, s.title || s.heading].filter(Boolean).join(" › ");
  }

  // record: a reopened answer's stored sources ({index_head}); shown as they were then, since
  // the documentation may have changed since.
  function renderSources(parts, sources, record) {
    parts.sources.replaceChildren();
    parts.sourceList = sources || [];
    if (!sources || !sources.length) { parts.sources.hidden = true; return; }
    parts.sources.hidden = false;
    const title = el("div", "sources-title", record ? "Sources at the time" : "Sources");
    if (record && record.index_head) {
      // The commit id keeps its real case (the title is upper-cased): it can be pasted.
      title.append(" (index at ", el("span", "commit", record.index_head.slice(0, 12)), ")");
    }
    parts.sources.appendChild(title);
    const list = el("ol", "source-list");
    sources.forEach((s) => {
      const li = el("li", "source");
      // A stored record holds no chunk text: its line is a plain row, not an expandable one.
      const hasText = typeof s.text === "string";
      const sum = el(hasText ? "summary" : "div", hasText ? null : "source-summary");
      sum.appendChild(el("span", "source-label", sourceLabel(s)));
      if (s.lines || (s.start_line && s.end_line)) {
        const lines = s.lines || (s.start_line + "–" + s.end_line);
        sum.appendChild(el("span", "source-lines", "lines " + lines));
      }
      // No score: fused ranks mean nothing to a reader; the order already says it.
      if (hasText) {
        const det = el("details");
        det.append(sum, el("pre", "source-text", s.text));
        det.dataset.index = String(list.children.length);
        li.appendChild(det);
      } else {
        li.appendChild(sum);
      }
      if (s.path) li.appendChild(similarButton(s));
      if (s.path) summaryEntry(s, li);
      list.appendChild(li);
    });
    parts.sources.appendChild(list);
  }

  // "similar": the nearest sections from other files, listed under the source (no model).
  function similarButton(s) {
    const wrap = el("div", "similar");
    const btn = el("button", "similar-btn", "similar");
    btn.type = "button";
    btn.title = "sections like this one, from other files";
    btn.addEventListener("click", async () => {
      btn.disabled = true;
      const target = s.path + (s.title ? "#" + s.title : "");
      const out = el("ul", "similar-list");
      try {
        const r = await apiJson("/api/similar?k=5&target=" + encodeURIComponent(target));
        if (!r.results.length) out.appendChild(el("li", "muted", "nothing similar"));
        r.results.forEach((h) => {
          const item = el("li", "similar-item", h.citation);
          item.title = h.text;  // cosine scores are on another scale than the sources': none
          out.appendChild(item);
        });
      } catch (e) {
        out.appendChild(el("li", "warn", "similar: " + e.message));
      }
      wrap.replaceChildren(out);
    });
    wrap.appendChild(btn);
    return wrap;
  }

  // "summary": the document's stored summary (AI_SUMMARIES), fetched when first opened.
  let summariesOn = null;
  async function summaryEntry(s, li) {
    summariesOn = summariesOn || apiJson("/api/summary").then((r) => r.enabled, () => false);
    if (!(await summariesOn)) return;
    const det = el("details", "doc-summary");
    det.appendChild(el("summary", "summary-btn", "summary"));
    det.addEventListener("toggle", async () => {
      if (!det.open || det.dataset.loaded) return;
      det.dataset.loaded = "1";
      try {
        const r = await apiJson("/api/summary?path=" + encodeURIComponent(s.path));
        det.append(el("pre", "summary-text", r.summary), el("div", "muted",
          r.model + ", " + r.made_at + (r.stale ? " (stale)" : "")));
      } catch (e) {
        det.appendChild(el("div", "warn", "summary: " + e.message));
      }
    });
    li.appendChild(det);
  }

  // A citation clicked in the answer: open that source's text and bring it into view.
  function openSource(parts, index) {
    const det = parts.sources.querySelector("details[data-index='" + index + "']");
    const item = parts.sources.querySelectorAll(".source")[index];
    if (!item) return;
    if (det) det.open = true;
    item.classList.add("cited");
    setTimeout(() => item.classList.remove("cited"), 1600);
    item.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }

  // The answer as Markdown: while it streams (at most once a frame, its last block only),
  // and once done (all of it, from the server's HTML, with citations and findings).
  function answerContext(parts) {
    return { sources: parts.sourceList, findings: parts.findingList,
             onCite: (i) => openSource(parts, i) };
  }

  function showAnswer(parts, html) {
    R.renderAnswer(parts.answer, parts.text, answerContext(parts), html);
  }

  function scheduleAnswer(parts) {
    if (parts.pending) return;
    parts.pending = true;
    requestAnimationFrame(() => {
      parts.pending = false;
      if (parts.final) return;  // "done" rendered the server's HTML meanwhile
      const follow = atBottom();
      R.streamAnswer(parts.answer, parts.text, answerContext(parts));
      if (follow) scrollDown();
    });
  }

  function renderFindings(parts, findings) {
    parts.findings.replaceChildren();
    if (!findings || !findings.length) { parts.findings.hidden = true; return; }
    parts.findings.hidden = false;
    parts.findings.appendChild(el("div", "sources-title", "Scanner findings"));
    const list = el("ul");
    parts.findingList = findings;
    const blocks = R.codeBlockLines(parts.text);
    findings.forEach((f) => {
      const li = el("li");
      // The scanner counts the answer's lines; a reader counts the code block's.
      const at = R.placeFinding(Number(f.line), blocks);
      const where = !at ? "line " + (f.line ?? "?")
        : (blocks.length > 1 ? "code block " + at.block + ", " : "") + "line " + at.line;
      li.appendChild(el("strong", null, where + ": "));
      li.appendChild(document.createTextNode(f.reason || ""));
      if (f.snippet) li.appendChild(el("code", null, f.snippet));
      list.appendChild(li);
    });
    parts.findings.appendChild(list);
  }

  function renderMeta(parts, d) {
    const bits = [];
    if (d.profile) bits.push(d.profile);
    if (d.prompt_tokens !== undefined) bits.push("prompt " + fmtNum(d.prompt_tokens));
    if (d.completion_tokens !== undefined) bits.push("completion " + fmtNum(d.completion_tokens));
    if (d.tok_s !== null && d.tok_s !== undefined) bits.push(Number(d.tok_s).toFixed(1) + " tok/s");
    const t = d.timings || {};
    const names = { retrieval_s: "retrieval", first_token_s: "first token", total_s: "total",
                    elapsed_s: "generation", search_s: "search" };
    Object.keys(t).forEach((k) => {
      const v = fmtSeconds(t[k]);
      if (v) bits.push((names[k] || k.replace(/_s$/, "").replace(/_/g, " ")) + " " + v);
    });
    parts.meta.textContent = bits.join(" · ");
  }

  function showError(parts, message) {
    parts.error.hidden = false;
    parts.error.textContent = message;
    parts.answer.classList.remove("streaming");
    if (parts.text) parts.answer.classList.add("partial");
    parts.error.scrollIntoView({ block: "nearest" });
  }

  function showCapability(parts, d) {
    parts.capabilities.hidden = false;
    const li = el("li");
    li.appendChild(el("strong", null, (d.name || "capability") + ": "));
    li.appendChild(document.createTextNode(d.summary || ""));
    parts.capabilities.appendChild(li);
  }

  function handleEvent(parts, ev, question) {
    const d = ev.data || {};
    switch (ev.type) {
      case "start":
        break;
      case "profile":
        addBadge(parts, "escalated to " + (d.profile || "varaverk") +
                 (d.reason ? " — " + d.reason : ""), "escalated");
        break;
      case "capability":
        showCapability(parts, d);
        break;
      case "sources":
        renderSources(parts, d.sources);
        break;
      case "memory":
        renderMemory(parts, d.recalled);
        break;
      case "thinking": {
        const r = ensureReasoning(parts);
        parts.thinking += d.text || "";
        r.pre.textContent = parts.thinking;
        break;
      }
      case "content":
        parts.text += d.text || "";
        scheduleAnswer(parts);
        break;
      case "findings":
        renderFindings(parts, d.findings);
        break;
      case "done":
        parts.answer.classList.remove("streaming");
        parts.final = true;
        if (typeof d.answer === "string") parts.text = d.answer;
        // The scanner counted the final answer's lines: place its findings in that text.
        if (parts.findingList.length) renderFindings(parts, parts.findingList);
        if (d.reasoning) { const r = ensureReasoning(parts); r.pre.textContent = d.reasoning; }
        if (d.sources) renderSources(parts, d.sources);
        showAnswer(parts, d.html);  // server-sanitised, sanitised again
        if (d.not_covered) addBadge(parts, "not covered by the documentation", "warn");
        if (d.prompt_cut) {
          addBadge(parts, "the model server cut the prompt: the model did not see all the " +
                          "documentation (raise AI_GEN_NUM_CTX)", "warn");
        }
        renderMeta(parts, d);
        break;
      case "saved":
        if (d.chat_id && !d.error) {
          state.chatId = d.chat_id;
          history.replaceState(null, "", "#chat=" + encodeURIComponent(d.chat_id));
          $("chat-title").textContent = d.title || "Conversation";
        } else if (d.error) {
          showError(parts, "The answer was not saved: " + d.error);
        }
        loadChats();
        break;
      case "error":
        showError(parts, d.message || "The turn failed.");
        break;
      default:
        break;
    }
  }

  // A reopened answer, shown from its saved record as the turn showed it (record: reasoning,
  // timings, tokens, escalation, findings; sources with their text as retrieved then).
  function showSaved(parts, m) {
    const rec = m.record || {};
    parts.answer.classList.remove("streaming");
    parts.final = true;
    parts.text = m.content;
    if (rec.escalated_to) {
      addBadge(parts, "escalated to " + rec.escalated_to +
               (rec.escalation_reason ? " — " + rec.escalation_reason : ""), "escalated");
    }
    (rec.capabilities || []).forEach((c) => showCapability(parts, c));
    renderMemory(parts, rec.memory);
    if (rec.reasoning) ensureReasoning(parts).pre.textContent = rec.reasoning;
    renderSources(parts, m.sources, { index_head: m.index_head });
    if (rec.findings) renderFindings(parts, rec.findings);
    showAnswer(parts, m.html);
    if (rec.not_covered) addBadge(parts, "not covered by the documentation", "warn");
    if (rec.prompt_cut) addBadge(parts, "the model server cut the prompt", "warn");
    renderMeta(parts, rec);
  }

  // ── conversations ──────────────────────────────────────────────────────────────────────

  function clearMessages() {
    messagesEl.replaceChildren();
    const hint = el("div", "empty-hint");
    hint.id = "empty-hint";
    hint.appendChild(el("p", null, "Ask about this installation. Answers come from the " +
                                   "repository's own documentation, with their sources."));
    messagesEl.appendChild(hint);
  }

  function newChat() {
    turns.detach();  // the turn goes on, and is saved in its own conversation
    state.view += 1;
    state.chatId = null;
    history.replaceState(null, "", location.pathname);
    $("chat-title").textContent = "New conversation";
    clearMessages();
    markActive();
    turns.shown();
    questionEl.focus();
  }

  function markActive() {
    document.querySelectorAll("#chat-list li[data-id]").forEach((li) => {
      li.classList.toggle("active", li.dataset.id === state.chatId);
    });
  }

  async function openChat(id) {
    if (state.turn && id === state.chatId) return;  // already shown, its answer streaming
    turns.detach();
    const view = ++state.view;
    try {
      const body = await apiJson("/api/chats/" + encodeURIComponent(id));
      if (view !== state.view) return;  // the user moved on meanwhile
      state.chatId = body.chat.id;
      history.replaceState(null, "", "#chat=" + encodeURIComponent(body.chat.id));
      $("chat-title").textContent = body.chat.title;
      if (body.chat.profile && state.profiles[body.chat.profile]) profileEl.value = body.chat.profile;
      syncProfileControls();
      clearMessages();
      body.messages.forEach((m) => {
        if (m.role === "user") { addUser(m.content); return; }
        const parts = addAssistant();
        showSaved(parts, m);
        if (m.stopped) addBadge(parts, "stopped: the answer is partial", "warn");
      });
      markActive();
      turns.shown();
    } catch (e) {
      if (view !== state.view) return;
      newChat();
      loadChats();
    }
  }

  async function deleteChat(id, title) {
    if (!window.confirm("Delete the conversation “" + title + "”?")) return;
    const forget = (await memoryStatus()) &&
      window.confirm("Also forget what long-term memory kept from it?");
    if (state.chatId === id) {  // stop its answer first, so nothing is saved into it
      if (turns.busyIn(id)) await turns.stop();
      newChat();
    }
    try {
      await api("/api/chats/" + encodeURIComponent(id) + (forget ? "?forget_memory=1" : ""),
                { method: "DELETE" });
    } catch (e) { /* the list below shows the truth */ }
    loadChats();
  }

  async function loadChats() {
    const list = $("chat-list");
    let body;
    try { body = await apiJson("/api/chats"); } catch (e) {
      list.replaceChildren(el("li", "muted", "Cannot load: " + e.message));
      return;
    }
    list.replaceChildren();
    if (!body.chats.length) list.appendChild(el("li", "muted", "No conversations yet."));
    body.chats.forEach((c) => {
      const li = el("li");
      li.dataset.id = c.id;
      const open = el("button", "chat-open");
      open.type = "button";
      open.appendChild(el("span", "chat-name", c.title));
      open.appendChild(el("span", "chat-when", (c.updated || "").replace("T", " ").replace("Z", "") +
                                             " · " + c.turns + (c.turns === 1 ? " turn" : " turns")));
      open.addEventListener("click", () => openChat(c.id));
      const del = el("button", "chat-delete", "×");
      del.type = "button";
      del.title = "Delete this conversation";
      del.setAttribute("aria-label", "Delete " + c.title);
      del.addEventListener("click", () => deleteChat(c.id, c.title));
      li.append(open, del);
      list.appendChild(li);
    });
    const kept = $("chat-kept");
    kept.hidden = !body.kept;
    kept.textContent = "The " + body.kept + " newest conversations are kept; older ones are " +
                       "deleted (AI_CHAT_HISTORY_MAX).";
    const probs = $("chat-problems");
    probs.hidden = !body.problems.length;
    probs.textContent = body.problems.join("\n");
    markActive();
  }

  // ── side panels ────────────────────────────────────────────────────────────────────────

  function kv(dl, key, value, cls) {
    dl.appendChild(el("dt", null, key));
    dl.appendChild(el("dd", cls || null, value));
  }

  async function loadStatus() {
    const dl = $("index-status");
    let s;
    try { s = await apiJson("/api/status"); } catch (e) {
      dl.replaceChildren(); kv(dl, "status", "unavailable: " + e.message, "warn"); return;
    }
    dl.replaceChildren();
    if (!s.present) {
      kv(dl, "status", s.message || "no index", "warn");
      if (s.indexing) showIndexing(dl, s.indexing);
      return;
    }
    const pick = (...keys) => { for (const k of keys) if (s[k] !== undefined && s[k] !== null) return s[k]; return null; };
    const files = pick("files", "file_count");
    const chunks = pick("chunks", "chunk_count");
    if (files !== null) kv(dl, "files", fmtNum(files));
    if (chunks !== null) kv(dl, "chunks", fmtNum(chunks));
    const model = pick("model", "embed_model");
    const backend = pick("backend", "embed_backend");
    if (model || backend) kv(dl, "model", [backend, model].filter(Boolean).join(" / "));
    const built = pick("built_at", "last_build", "updated_at", "created_at");
    if (built) kv(dl, "built", String(built).replace("T", " ").replace(/\.\d+/, "").replace("+00:00", "Z"));
    if (s.indexing) {
      showIndexing(dl, s.indexing);
    } else {
      kv(dl, "repository", s.behind ? "index is behind HEAD — run ai-index" : "up to date",
         s.behind ? "warn" : "ok");
    }
    if (s.sources && s.sources.length > 1) {
      s.sources.forEach((src) => kv(dl, "source " + src.name,
        src.type + ": " + fmtNum(src.files) + " files, " + fmtNum(src.chunks) + " chunks"));
    }
  }

  // A re-index running now (the index's progress file, via /api/status): its phase and, while
  // embedding, how many chunks of how many; the panel polls until it ends.
  function showIndexing(dl, run) {
    const dd = el("dd", "warn");
    let text = "re-indexing: " + (run.phase || "running");
    if (run.total) text += " " + fmtNum(run.done) + " / " + fmtNum(run.total) + " chunks";
    dd.appendChild(el("span", "indexing-text", text));
    if (run.total) {
      const bar = el("progress", "progress");
      bar.max = run.total;
      bar.value = run.done || 0;
      dd.appendChild(bar);
    }
    dl.append(el("dt", null, "repository"), dd);
    clearTimeout(state.statusTimer);
    state.statusTimer = setTimeout(loadStatus, 2000);
  }

  function tokenCell(period) {
    if (!period) return el("td", null, "–");
    const td = el("td", null, fmtNum(period.total_tokens));
    td.title = period.rows + " asks · prompt " + fmtNum(period.prompt_tokens) + " · completion " +
               fmtNum(period.completion_tokens) +
               (period.unknown_prompt || period.unknown_completion ? " · some counts unknown" : "");
    return td;
  }

  async function loadTokens() {
    const tbody = $("token-table").querySelector("tbody");
    let t;
    try { t = await apiJson("/api/tokens"); } catch (e) {
      tbody.replaceChildren(); const tr = el("tr"); const td = el("td", "muted", "unavailable: " + e.message);
      td.colSpan = 4; tr.appendChild(td); tbody.appendChild(tr); return;
    }
    tbody.replaceChildren();
    Object.keys(t.hosts || {}).forEach((host) => {
      const h = t.hosts[host];
      const tr = el("tr");
      tr.appendChild(el("th", null, host));
      if (h.status) {
        const td = el("td", "muted", "not collected here"); td.colSpan = 3; tr.appendChild(td);
      } else {
        tr.append(tokenCell(h.today), tokenCell(h.last_7_days), tokenCell(h.all_time));
      }
      tbody.appendChild(tr);
    });
    if (t.fleet && Object.keys(t.hosts || {}).length > 1) {
      const tr = el("tr", "total");
      tr.appendChild(el("th", null, "all hosts"));
      tr.append(tokenCell(t.fleet.today), tokenCell(t.fleet.last_7_days), tokenCell(t.fleet.all_time));
      tbody.appendChild(tr);
    }
    const probs = $("token-problems");
    probs.hidden = !(t.problems && t.problems.length);
    probs.textContent = (t.problems || []).length + " malformed ledger line(s) skipped";
  }

  // The log path field and the bug report button appear only for a profile holding the
  // scoped-log and bug-filing capabilities; the server enforces the same grants.
  function holds(name, capability) {
    const p = state.profiles[name];
    return !!(p && p.capabilities.indexOf(capability) >= 0);
  }

  async function loadLogOptions(profile) {
    if (state.logsLoadedFor === profile) return;
    state.logsLoadedFor = profile;
    const list = $("log-options");
    try {
      const body = await apiJson("/api/logs?profile=" + encodeURIComponent(profile));
      list.replaceChildren();
      (body.logs || []).forEach((l) => {
        const opt = document.createElement("option");
        opt.value = l.path;
        opt.label = l.name;
        list.appendChild(opt);
      });
    } catch (e) { state.logsLoadedFor = null; }
  }

  function syncProfileControls() {
    const profile = profileEl.value;
    const logs = holds(profile, "scoped_log");
    $("log-path").hidden = !logs;
    $("bug-report").hidden = !holds(profile, "bug_filing");
    if (logs) loadLogOptions(profile);
  }

  // ── bug reports (troubleshoot): draft, review, then file on explicit confirmation ──────

  function draftText(d) {
    const parts = ["Title: " + (d.title || ""), "", "What happened:", d.what_happened || ""];
    if (d.log_excerpt) parts.push("", "Log (" + (d.log_source || "log") + "):", d.log_excerpt);
    if (d.versions) {
      const v = typeof d.versions === "string" ? d.versions
        : Object.keys(d.versions).map((k) => k + " " + d.versions[k]).join(", ");
      parts.push("", "Versions: " + v);
    }
    return parts.join("\n");
  }

  function openBugDialog() {
    const users = document.querySelectorAll(".msg.user .bubble");
    const answers = document.querySelectorAll(".msg.assistant .answer");
    const lastQ = users.length ? users[users.length - 1].textContent : "";
    const lastA = answers.length ? answers[answers.length - 1].textContent : "";
    $("bug-title").value = lastQ.slice(0, 200);
    $("bug-what").value = lastQ ? "Asked: " + lastQ + "\n\nAnswer: " + lastA : "";
    $("bug-preview").hidden = true;
    $("bug-status").textContent = "";
    $("bug-file").disabled = true;
    state.bugDraft = null;
    $("bug-dialog").showModal();
  }

  async function draftBug() {
    const body = { profile: profileEl.value, title: $("bug-title").value,
                   what_happened: $("bug-what").value };
    const logPath = $("log-path").value.trim();
    if (logPath) body.log_path = logPath;
    try {
      const resp = await apiJson("/api/bug-reports/draft", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      state.bugDraft = resp.draft;
      $("bug-preview").textContent = draftText(resp.draft);
      $("bug-preview").hidden = false;
      $("bug-status").textContent = "Review the draft, then file it.";
      $("bug-file").disabled = false;
    } catch (e) { $("bug-status").textContent = "Not drafted: " + e.message; }
  }

  async function fileBug() {
    if (!state.bugDraft) return;
    try {
      const resp = await apiJson("/api/bug-reports", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ profile: profileEl.value, draft: state.bugDraft, confirm: true }) });
      $("bug-status").textContent = "Filed as " + resp.file + ".";
      $("bug-file").disabled = true;
    } catch (e) { $("bug-status").textContent = "Not filed: " + e.message; }
  }

  async function loadProfiles() {
    try {
      const body = await apiJson("/api/profiles");
      body.profiles.forEach((p) => { state.profiles[p.name] = p; });
    } catch (e) { /* the select already lists them */ }
    syncProfileControls();
    state.memoryEnabled = await memoryStatus();
    memoryView.enable(state.memoryEnabled);
  }

  // Whether long-term memory is on, asked once: a chat deleted before the answer arrives
  // waits for it, so its "also forget" question is never skipped.
  function memoryStatus() {
    if (!state.memoryStatus) {
      state.memoryStatus = apiJson("/api/memory").then((b) => b.enabled, () => false);
    }
    return state.memoryStatus;
  }

  // ── wiring ─────────────────────────────────────────────────────────────────────────────

  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const q = questionEl.value.trim();
    if (!q || state.turn) return;
    questionEl.value = "";
    turns.ask(q);
  });
  questionEl.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("new-chat").addEventListener("click", newChat);
  profileEl.addEventListener("change", syncProfileControls);
  $("bug-report").addEventListener("click", openBugDialog);
  $("bug-draft").addEventListener("click", draftBug);
  $("bug-file").addEventListener("click", fileBug);
  $("refresh-status").addEventListener("click", loadStatus);

  turns = window.VaraverkTurns({ $: $, el: el, api: api, state: state, addUser: addUser,
                                 addAssistant: addAssistant, addBadge: addBadge,
                                 handleEvent: handleEvent, showError: showError,
                                 loadTokens: loadTokens });
  memoryView = window.VaraverkMemory({ $: $, el: el, apiJson: apiJson });
  loadProfiles();
  loadChats();
  loadStatus();
  // A re-index started from cron or a shell shows up within a minute (while the page is seen).
  setInterval(() => { if (document.visibilityState === "visible") loadStatus(); }, 60000);
  loadTokens();
  const m = /^#chat=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (m) openChat(m[1]);
  const t = /^#turn=([0-9a-f]{32})$/.exec(location.hash);
  if (t) turns.attach(t[1]);
  questionEl.focus();
})();
