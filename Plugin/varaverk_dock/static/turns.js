// Varaverk dock: turns that live on the server. A question starts a turn (POST /api/turns);
// the page follows it as Server-Sent Events, which the browser resumes after a dropped
// connection from the last event it saw (Last-Event-ID). A reload (#turn=ID or #chat=ID) or a
// second tab attaches to the same turn; Stop (button or Esc) stops it for every page; leaving
// the conversation only detaches. Also: regenerate the last answer, edit and resend the last
// question, retry after an error with the question kept in the box.
// Safety rule as in dock.js: text is shown through textContent; rendering is dock.js's.
"use strict";

window.VaraverkTurns = function (dock) {
  const { $, el, api, state } = dock;
  const questionEl = $("question");
  const askBtn = $("ask");
  const stopBtn = $("stop");
  const editNote = $("edit-note");
  const POLL_MS = 1000;  // how often a shown conversation is checked for another tab's turn
  let live = null;       // the turn attached now: {id, es, parts, question, seq}
  let editing = false;   // the next question replaces the last one (edit and resend)
  let pollTimer = null;

  function setBusy(turn) {
    state.turn = turn;
    askBtn.disabled = !!turn;
    stopBtn.hidden = !turn;
    if (turn) clearActions();
  }

  function setEditing(on) {
    editing = on;
    editNote.hidden = !on;
  }

  // ── starting a turn ────────────────────────────────────────────────────────────────────

  async function ask(question, replaceLast) {
    if (live) return;
    const replace = replaceLast === undefined ? editing : replaceLast;
    const body = { question: question, profile: $("profile").value };
    if (state.chatId) body.chat_id = state.chatId;
    if (replace && state.chatId) body.replace_last = true;
    const logPath = $("log-path");
    if (!logPath.hidden && logPath.value.trim()) body.log_path = logPath.value.trim();
    setEditing(false);
    setBusy({ id: null });  // no second ask while this one is being accepted
    const view = state.view;
    let resp, reply = null;
    try {
      resp = await api("/api/turns", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body) });
      try { reply = await resp.json(); } catch (e) { reply = null; }
    } catch (e) {
      refused(question, "Request failed: " + e.message);
      return;
    }
    if (state.view !== view) {  // the page moved on meanwhile: the turn goes on without it
      setBusy(null);
      return;
    }
    if (resp.status === 202 && reply && reply.turn_id) { attach(reply.turn_id); return; }
    if (resp.status === 409 && reply && reply.turn_id) {
      // Another tab is answering in this conversation: show that turn, keep this question.
      questionEl.value = question;
      attach(reply.turn_id);
      return;
    }
    refused(question, (reply && reply.error) || ("HTTP " + resp.status));
  }

  // The turn was never started: say why under the conversation, the question back in the box.
  function refused(question, message) {
    setBusy(null);
    const parts = dock.addAssistant();
    dock.showError(parts, message);
    addRetry(parts, question);
    if (!questionEl.value) questionEl.value = question;
  }

  // ── following a turn ───────────────────────────────────────────────────────────────────

  function attach(turnId) {
    detach();
    const turn = { id: turnId, es: null, parts: null, question: "", seq: 0 };
    live = turn;
    setBusy(turn);
    if (!state.chatId) history.replaceState(null, "", "#turn=" + encodeURIComponent(turnId));
    const es = new EventSource("/api/turns/" + encodeURIComponent(turnId) + "/events");
    turn.es = es;
    es.onmessage = (m) => {
      if (live !== turn) return;
      let ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (ev.seq <= turn.seq) return;  // never shown twice
      turn.seq = ev.seq;
      onEvent(turn, ev);
    };
    es.onerror = () => {
      // CONNECTING: the browser reconnects by itself, from the last event it saw.
      if (live !== turn || es.readyState !== EventSource.CLOSED) return;
      const parts = turn.parts || dock.addAssistant();
      dock.showError(parts, "This answer can no longer be followed (the dock refused the " +
                            "stream or no longer keeps it).");
      finish(turn);
    };
  }

  function onEvent(turn, ev) {
    const d = ev.data || {};
    if (ev.type === "start") {
      if (d.replace_last) removeLastPair();
      dock.addUser(d.question || "");
      turn.question = d.question || "";
      turn.parts = dock.addAssistant();
      return;
    }
    const parts = turn.parts || (turn.parts = dock.addAssistant());
    if (ev.type === "stopped") {
      dock.handleEvent(parts, { type: "done", data: d }, turn.question);
      parts.wrap.classList.add("stopped");
      dock.addBadge(parts, "stopped: the answer is partial", "warn");
      return;
    }
    dock.handleEvent(parts, ev, turn.question);
    if (ev.type === "error") {
      addRetry(parts, turn.question);
      if (!questionEl.value) questionEl.value = turn.question;
      finish(turn);
    } else if (ev.type === "saved") {
      finish(turn);
    }
  }

  function finish(turn) {
    if (turn.es) turn.es.close();
    if (live !== turn) return;
    live = null;
    setBusy(null);
    showActions();
    if (dock.loadTokens) dock.loadTokens();
    follow();
  }

  // Leaving the conversation: the turn goes on (and is saved in its own conversation).
  function detach() {
    const turn = live;
    if (!turn) return;
    live = null;
    if (turn.es) turn.es.close();
    setBusy(null);
  }

  async function stop() {
    const turn = live;
    if (!turn || !turn.id) return;
    stopBtn.disabled = true;
    try {
      await api("/api/turns/" + encodeURIComponent(turn.id) + "/stop", { method: "POST" });
    } catch (e) { /* the stream still says how the turn ended */ }
    stopBtn.disabled = false;
  }

  // While a saved conversation is shown and nothing is attached, pick up a turn another
  // tab (or this one, before a reload) started in it.
  function follow(delay) {
    if (pollTimer) { clearTimeout(pollTimer); pollTimer = null; }
    if (live || !state.chatId) return;
    const chatId = state.chatId;
    const view = state.view;
    pollTimer = setTimeout(async () => {
      pollTimer = null;
      if (live || state.chatId !== chatId || state.view !== view) return;
      try {
        const resp = await api("/api/turns?chat_id=" + encodeURIComponent(chatId));
        const body = resp.ok ? await resp.json() : null;
        if (body && body.running && !live && state.chatId === chatId && state.view === view) {
          attach(body.running);
          return;
        }
      } catch (e) { /* try again at the next poll */ }
      follow(POLL_MS);
    }, delay || 0);
  }

  // ── regenerate, edit and resend, retry ─────────────────────────────────────────────────

  function removeLastPair() {
    const msgs = document.querySelectorAll("#messages .msg");
    const last = msgs[msgs.length - 1];
    const before = msgs[msgs.length - 2];
    if (last && before && last.classList.contains("assistant") &&
        before.classList.contains("user")) {
      last.remove();
      before.remove();
    }
  }

  function clearActions() {
    document.querySelectorAll("#messages .turn-actions").forEach((n) => n.remove());
  }

  function lastPair() {
    const msgs = document.querySelectorAll("#messages .msg");
    const a = msgs[msgs.length - 1];
    const u = msgs[msgs.length - 2];
    if (!a || !u || !a.classList.contains("assistant") || !u.classList.contains("user")) {
      return null;
    }
    const bubble = u.querySelector(".bubble");
    return { user: u, assistant: a, question: bubble ? bubble.textContent : "" };
  }

  // The last answer of a saved conversation can be regenerated, its question edited.
  function showActions() {
    clearActions();
    const pair = lastPair();
    if (live || !pair || !state.chatId || pair.assistant.querySelector(".error:not([hidden])")) {
      return;
    }
    const bar = el("div", "turn-actions");
    const regen = el("button", "link regenerate", "↻ Regenerate");
    regen.type = "button";
    regen.title = "Answer the last question again, replacing this answer";
    regen.addEventListener("click", () => ask(pair.question, true));
    const edit = el("button", "link edit-last", "✎ Edit question");
    edit.type = "button";
    edit.title = "Put the last question in the box; sending it replaces the last answer";
    edit.addEventListener("click", () => {
      questionEl.value = pair.question;
      setEditing(true);
      questionEl.focus();
    });
    bar.append(regen, edit);
    pair.assistant.appendChild(bar);
  }

  function addRetry(parts, question) {
    const btn = el("button", "secondary retry", "Retry");
    btn.type = "button";
    btn.title = "Ask the same question again";
    btn.addEventListener("click", () => {
      if (live) return;
      if (questionEl.value === question) questionEl.value = "";
      // The failed attempt gives way to the new one (it was never saved).
      const asked = parts.wrap.previousElementSibling;
      if (asked && asked.classList.contains("user") &&
          asked.querySelector(".bubble").textContent === question) asked.remove();
      parts.wrap.remove();
      ask(question, false);
    });
    parts.error.appendChild(document.createTextNode(" "));
    parts.error.appendChild(btn);
  }

  // ── wiring ─────────────────────────────────────────────────────────────────────────────

  stopBtn.addEventListener("click", stop);
  $("edit-cancel").addEventListener("click", () => { setEditing(false); questionEl.value = ""; });
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Escape" || e.isComposing || document.querySelector("dialog[open]")) return;
    if (live) { e.preventDefault(); stop(); } else if (editing) { setEditing(false); }
  });

  return {
    ask: ask,
    attach: attach,
    detach: detach,
    stop: stop,
    // After a conversation was shown (or left): its actions, and any turn running in it.
    shown: () => { setEditing(false); showActions(); follow(); },
    busyIn: (chatId) => !!(live && state.chatId === chatId),
  };
};
