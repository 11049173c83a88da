"""Markdown to safe HTML for the dock: model answers and document text never run as HTML.

Two layers, because either alone has failed in other tools: markdown-it-py renders with raw
HTML disabled (a ``<script>`` in the text comes out as visible text), and nh3 then keeps only
an allow-list of tags and attributes and only http, https and mailto links, so a
``javascript:`` link or an ``onerror`` attribute cannot survive whatever the renderer emits.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_md.enable(["table", "strikethrough"])

ALLOWED_TAGS = frozenset({
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code",
    "pre", "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
})
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "code": {"class"},
                      "th": {"style"}, "td": {"style"}}


def render_markdown(text: str) -> str:
    """Render ``text`` (Markdown from a model or a document) to sanitised HTML.

    Returns an HTML fragment safe to assign to ``innerHTML``: no raw HTML from the input, no
    script, no event attribute, no ``javascript:`` or ``data:`` URL; links get
    ``rel="noopener noreferrer"``.
    """
    html = _md.render(text or "")
    return nh3.clean(html, tags=set(ALLOWED_TAGS), attributes={k: set(v) for k, v in
                     ALLOWED_ATTRIBUTES.items()}, url_schemes={"http", "https", "mailto"},
                     link_rel="noopener noreferrer", filter_style_properties={"text-align"})
