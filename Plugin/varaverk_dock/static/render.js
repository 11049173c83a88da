// Varaverk dock: an answer's Markdown as the page shows it, while it streams and once it is done.
// Two layers, as the server's render.py: markdown-it with raw HTML disabled (a <script> in the
// text stays visible text), then DOMPurify keeping the same allow-list of tags, attributes and
// URL schemes as nh3 does on the server. Then the answer is decorated: code blocks get a
// language label, highlighting (highlight.js) and a copy button; citations link to the source
// they name, or are marked when they name none; scanner findings are placed in their block.
// Libraries: static/vendor/ (versions and licences in static/vendor/README.md), no CDN.
"use strict";

window.VaraverkRender = (function () {
  const md = window.markdownit("commonmark", { html: false, linkify: false, typographer: false });
  md.enable(["table", "strikethrough"]);

  const PURIFY = {
    ALLOWED_TAGS: ["p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del",
                   "s", "code", "pre", "blockquote", "ul", "ol", "li", "a", "table", "thead",
                   "tbody", "tr", "th", "td"],
    ALLOWED_ATTR: ["href", "title", "start", "class"],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  };
  window.DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A") node.setAttribute("rel", "noopener noreferrer");
  });

  function sanitise(html) { return window.DOMPurify.sanitize(html, PURIFY); }

  // Markdown text -> sanitised HTML (a string safe for innerHTML).
  function toHtml(text) { return sanitise(md.render(text || "")); }

  // The fenced and indented code blocks of a Markdown text, in order: [{first, last}], the
  // 1-based lines of the text the block's code spans (the scanner's line numbers count these).
  function codeBlockLines(text) {
    return md.parse(text || "", {}).filter((t) => (t.type === "fence" || t.type === "code_block")
                                                && t.map)
      .map((t) => t.type === "fence" ? { first: t.map[0] + 2, last: t.map[1] - 1 }
                                     : { first: t.map[0] + 1, last: t.map[1] });
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // Copy text to the clipboard; navigator.clipboard needs a secure context (https or
  // loopback), so a dock reached over plain http on the LAN falls back to execCommand.
  async function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return;
    }
    const area = el("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    if (!ok) throw new Error("the browser refused to copy");
  }

  function copyButton(label, textOf) {
    const btn = el("button", "copy-btn", label);
    btn.type = "button";
    btn.addEventListener("click", async () => {
      try {
        await copyText(textOf());
        btn.textContent = "copied";
      } catch (e) {
        btn.textContent = "copy failed";
        btn.title = e.message;
      }
      setTimeout(() => { btn.textContent = label; }, 1500);
    });
    return btn;
  }

  function languageOf(code) {
    const m = /(?:^|\s)language-([\w+#.-]+)/.exec(code.className || "");
    return m ? m[1].toLowerCase() : "";
  }

  // Each <pre><code> becomes a block with a header (language, copy) and highlighted code.
  function decorateCode(root) {
    root.querySelectorAll("pre > code").forEach((code) => {
      const pre = code.parentElement;
      const lang = languageOf(code);
      const block = el("div", "codeblock");
      const head = el("div", "codeblock-head");
      head.appendChild(el("span", "codeblock-lang", lang || "text"));
      const raw = code.textContent;
      head.appendChild(copyButton("copy", () => raw));
      pre.replaceWith(block);
      block.append(head, pre);
      if (lang && window.hljs.getLanguage(lang)) {
        code.innerHTML = window.hljs.highlight(raw, { language: lang, ignoreIllegals: true }).value;
        code.classList.add("hljs");
      }
    });
  }

  const CITE = /\[([^[\]\n]{2,400})\]/g;

  function sourceCitation(s) {
    return s.citation || [s.path, s.section, s.title].filter(Boolean).join(" › ");
  }

  // A bracketed text reads as a citation when it has the label separator or starts like a
  // file path ("dir/file", "file.ext"); "[y/N]" or "[1]" do not.
  function looksCited(label) {
    return label.includes("›") || /^[\w.~@-]+\/[\w.@~/-]*\w/.test(label) ||
           /^[\w.-]+\.[A-Za-z]{1,6}(?:\s|:|$)/.test(label);
  }

  // The index (into sources) that a citation names, or -1: the exact label first, then a
  // source whose label starts with it (a shortened citation), then one whose path it names.
  function matchSource(label, sources) {
    const want = label.replace(/\s+/g, " ").trim();
    const labels = sources.map((s) => sourceCitation(s).replace(/\s+/g, " ").trim());
    let i = labels.indexOf(want);
    if (i < 0) i = labels.findIndex((l) => l.startsWith(want + " ›"));
    if (i < 0) i = sources.findIndex((s) => s.path && (want === s.path ||
                                                       want.startsWith(s.path + " ") ||
                                                       want.startsWith(s.path + ":")));
    return i;
  }

  function citationNode(label, sources, onCite) {
    const index = matchSource(label, sources);
    if (index < 0) {
      const span = el("span", "citation unmatched", "[" + label + "]");
      span.title = "no retrieved source has this label: the model may have made it up";
      return span;
    }
    const a = el("a", "citation", "[" + label + "]");
    a.href = "#";
    a.title = "source " + (index + 1) + ": open its text";
    a.dataset.source = String(index);
    a.addEventListener("click", (e) => { e.preventDefault(); onCite(index); });
    return a;
  }

  // Replace bracketed citations in the answer's text (outside code and links).
  function linkCitations(root, sources, onCite) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
      acceptNode: (n) => n.parentElement.closest("pre, code, a, .citation")
        ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
    });
    const nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    nodes.forEach((node) => {
      const text = node.nodeValue;
      CITE.lastIndex = 0;
      if (!CITE.test(text)) return;
      const frag = document.createDocumentFragment();
      let last = 0;
      text.replace(CITE, (whole, inner, at) => {
        const labels = inner.split(/\s*;\s*/);
        if (!labels.every(looksCited)) return whole;
        frag.appendChild(document.createTextNode(text.slice(last, at)));
        labels.forEach((label, k) => {
          if (k) frag.appendChild(document.createTextNode(" "));
          frag.appendChild(citationNode(label, sources, onCite));
        });
        last = at + whole.length;
        return whole;
      });
      if (!last) return;
      frag.appendChild(document.createTextNode(text.slice(last)));
      node.replaceWith(frag);
    });
  }

  // A finding's place: which code block (1-based) holds the answer's line, and the line
  // within that block; null when the line is in no block.
  function placeFinding(line, blocks) {
    const k = blocks.findIndex((b) => line >= b.first && line <= b.last);
    return k < 0 ? null : { block: k + 1, line: line - blocks[k].first + 1 };
  }

  // Mark each finding's block in the answer (so the reader sees which command is meant).
  function markFindings(root, findings, blocks) {
    const shown = root.querySelectorAll(".codeblock");
    (findings || []).forEach((f) => {
      const at = placeFinding(Number(f.line), blocks);
      if (!at || !shown[at.block - 1]) return;
      const block = shown[at.block - 1];
      block.classList.add("flagged");
      block.querySelector(".codeblock-lang").textContent += " · scanner: line " + at.line;
    });
  }

  function decorate(root, c) {
    decorateCode(root);
    if (c.sources) linkCitations(root, c.sources, c.onCite || (() => {}));
  }

  // Render `text` into `target`, all of it. ctx: {sources, onCite, findings} (all optional);
  // html: the server's sanitised HTML for the finished answer (preferred when given).
  function renderAnswer(target, text, ctx, html) {
    const c = ctx || {};
    target._stream = null;
    target.innerHTML = typeof html === "string" ? sanitise(html) : toHtml(text);
    decorate(target, c);
    if (c.findings && c.findings.length) markFindings(target, c.findings, codeBlockLines(text));
  }

  function nodesOf(text, c) {
    const box = document.createElement("div");
    box.innerHTML = toHtml(text);
    decorate(box, c);
    return Array.from(box.childNodes);
  }

  // The character offset where line `line` (0-based) of `text` starts.
  function lineOffset(text, line) {
    let at = 0;
    for (let i = 0; i < line; i++) {
      const nl = text.indexOf("\n", at);
      if (nl < 0) return text.length;
      at = nl + 1;
    }
    return at;
  }

  // Render a streaming answer, re-rendering only its last top-level block: the blocks before
  // it are complete (more text can only extend the last one), so each is rendered once and
  // kept. The cost of a frame is then that of the last block, not of the whole answer.
  function streamAnswer(target, text, ctx) {
    const c = ctx || {};
    let st = target._stream;
    if (!st || !text.startsWith(st.kept)) {
      target.replaceChildren();
      st = target._stream = { kept: "", nodes: 0 };
    }
    while (target.childNodes.length > st.nodes) target.lastChild.remove();  // the old tail
    let tail = text.slice(st.kept.length);
    const starts = md.parse(tail, {}).filter((t) => t.level === 0 && t.map).map((t) => t.map[0]);
    if (starts.length > 1) {
      const cut = lineOffset(tail, starts[starts.length - 1]);
      const done = nodesOf(tail.slice(0, cut), c);
      target.append(...done);
      st.nodes += done.length;
      st.kept += tail.slice(0, cut);
      tail = tail.slice(cut);
    }
    target.append(...nodesOf(tail, c));
  }

  return { toHtml, renderAnswer, streamAnswer, codeBlockLines, placeFinding, copyButton,
           copyText, matchSource };
})();
