// Varaverk dock: the long-term memory view (a dialog opened from the sidebar).
// Lists the remembered conversations; one opened shows its triplets' facts and
// recollections, each forgettable after a confirm. Memory text is untrusted (it quotes what
// anyone said): it is only ever shown through textContent, never as HTML.
"use strict";

window.VaraverkMemory = function (ctx) {
  const $ = ctx.$, el = ctx.el, apiJson = ctx.apiJson;
  const dialog = $("memory-dialog"), listEl = $("memory-list"), detailEl = $("memory-detail");
  let shown = null;  // {id, title} of the conversation shown, or null for the list
  let view = 0;      // bumped on each navigation: a late reply for an earlier view is dropped

  function when(iso) { return (iso || "").replace("T", " ").slice(0, 16); }
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
  function status(text) { $("memory-status").textContent = text || ""; }
  function titleOf(c) {
    const words = (c.opening || "").trim().split(/\s+/).slice(0, 12).join(" ");
    return words || c.id;
  }

  function conversationItem(c) {
    const title = titleOf(c);
    const li = el("li");
    li.dataset.id = c.id;
    const open = el("button", "chat-open");
    open.type = "button";
    open.appendChild(el("span", "chat-name", title));
    open.appendChild(el("span", "chat-when", when(c.last) + " · " +
                                            plural(c.triplets, "triplet")));
    open.addEventListener("click", () => showConversation(c.id, title));
    const forget = el("button", "chat-delete", "×");
    forget.type = "button";
    forget.title = "Forget this conversation";
    forget.setAttribute("aria-label", "Forget " + title);
    forget.addEventListener("click", () => forgetConversation(c.id, title));
    li.append(open, forget);
    return li;
  }

  async function showList() {
    const mine = ++view;
    shown = null;
    $("memory-heading").textContent = "Long-term memory";
    $("memory-back").hidden = true;
    $("memory-forget-conversation").hidden = true;
    detailEl.hidden = true;
    listEl.hidden = false;
    let body;
    try { body = await apiJson("/api/memory"); } catch (e) {
      if (mine === view) status("Cannot load: " + e.message);
      return;
    }
    if (mine !== view) return;
    listEl.replaceChildren();
    if (!body.conversations.length) listEl.appendChild(el("li", "muted", "Nothing remembered."));
    body.conversations.forEach((c) => listEl.appendChild(conversationItem(c)));
  }

  function tripletCard(t) {
    const card = el("article", "memory-triplet");
    card.dataset.id = t.id;
    const head = el("div", "memory-triplet-head");
    head.appendChild(el("span", "chat-when", when(t.said_at) + " · turns " + (t.turns[0] + 1) +
                                            "–" + (t.turns[1] + 1) + " · " + t.digest +
                                            (t.status === "retry" ? " (digest pending)" : "")));
    const forget = el("button", "secondary memory-forget", "Forget");
    forget.type = "button";
    forget.title = "Forget this exchange: its turns, facts and recollection";
    forget.addEventListener("click", () => forgetTriplet(t.id));
    head.appendChild(forget);
    card.appendChild(head);
    if (t.recollection) card.appendChild(el("p", "memory-recollection", t.recollection));
    const facts = el("ul", "memory-facts");
    t.facts.forEach((f) => {
      const li = el("li", null, f.statement);
      li.appendChild(el("span", "muted", " · " + f.speaker + (f.type ? ", " + f.type : "")));
      facts.appendChild(li);
    });
    if (t.facts.length) card.appendChild(facts);
    return card;
  }

  async function showConversation(id, title) {
    const mine = ++view;
    shown = { id: id, title: title };
    $("memory-heading").textContent = title;
    $("memory-back").hidden = false;
    $("memory-forget-conversation").hidden = false;
    listEl.hidden = true;
    detailEl.hidden = false;
    detailEl.replaceChildren(el("p", "muted", "Loading…"));
    let body;
    try { body = await apiJson("/api/memory/conversations/" + encodeURIComponent(id)); } catch (e) {
      if (mine === view) detailEl.replaceChildren(el("p", "problems", "Cannot load: " + e.message));
      return;
    }
    if (mine !== view) return;
    detailEl.replaceChildren();
    if (!body.triplets.length) detailEl.appendChild(el("p", "muted", "Nothing remembered."));
    body.triplets.forEach((t) => detailEl.appendChild(tripletCard(t)));
  }

  async function forget(path, question) {
    if (!window.confirm(question)) return false;
    try { await apiJson(path, { method: "DELETE" }); } catch (e) {
      status("Not forgotten: " + e.message);
      return false;
    }
    status("Forgotten.");
    return true;
  }

  async function forgetTriplet(id) {
    if (!await forget("/api/memory/triplets/" + id,
                      "Forget this exchange? Its turns, facts and recollection are deleted.")) return;
    if (shown) showConversation(shown.id, shown.title);
  }

  async function forgetConversation(id, title) {
    if (!await forget("/api/memory/conversations/" + encodeURIComponent(id),
                      "Forget everything memory kept of “" + title + "”?")) return;
    showList();
  }

  function open() {
    status("");
    showList();
    if (!dialog.open) dialog.showModal();
  }

  $("memory-open").addEventListener("click", open);
  $("memory-close").addEventListener("click", () => dialog.close());
  $("memory-back").addEventListener("click", () => { status(""); showList(); });
  $("memory-forget-conversation").addEventListener("click", () => {
    if (shown) forgetConversation(shown.id, shown.title);
  });

  // Shown only while AI_MEMORY_ENABLED is true (the page learns it from /api/memory).
  return { enable: (on) => { $("memory-panel").hidden = !on; } };
};
