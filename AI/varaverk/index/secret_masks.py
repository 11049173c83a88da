"""Secret-mask reporting: a tracked document's secret-looking values are masked before it is
chunked (so before embedding and FTS), and the masks a chunk really holds are logged and
recorded in the file's row (``masked_note``), where ``ai-index --status`` shows them.

The masking rules are ``varaverk.masking``'s, imported only by a run that chunks a
document (importing them compiles their patterns; the no-op refresh never needs them).
"""

from __future__ import annotations

import logging
import re

from varaverk.documents.tracked_files import Decoded
from varaverk.logs import DETAIL

log = logging.getLogger(__name__)

MASK_NOTE = "masked secret-looking values on line"
_COMMENT_LEAD = re.compile(r"^[\s#;/*!-]+")
EXAMPLE = "example: "  # marks a masked documentation example among ``Decoded.masked``


def mask(decoded: Decoded, kind: str = "") -> Decoded:
    """The document with secret-looking values masked before chunking (so before embedding
    and FTS), every masked value in ``masked`` (documentation examples marked ``EXAMPLE``);
    ``report_masked`` keeps the indexed ones."""
    from varaverk.masking.documents import mask_secrets

    masked = mask_secrets(decoded.text, kind)
    found = masked.hits + tuple((line, EXAMPLE + what) for line, what in masked.examples)
    return decoded._replace(text=masked.text, masked=found) if found else decoded


def report_masked(path: str, decoded: Decoded, chunks: list) -> Decoded:
    """Keep and log (as warnings) only the masked values whose line a chunk holds: a value in
    a script's body or an unindexed part of a file never reaches the index, so it is no
    finding and must not bury the real ones."""
    if not decoded.masked:
        return decoded
    from varaverk.masking.documents import IN_DOCUMENTATION
    from varaverk.masking.shapes import MASK

    lines = decoded.text.split("\n")
    metas = repr([c.meta for c in chunks])  # front matter and org drawers: chunk metadata

    def indexed(line: int, what: str) -> bool:
        # Within a chunk's range and in its text: a range may span code between two comment
        # blocks, and chunkers drop comment markers and indentation.
        bare = _COMMENT_LEAD.sub("", lines[line - 1]).strip()
        return any(c.start_line <= line <= c.end_line and bare in c.text for c in chunks) \
            or f"'{what.removeprefix(EXAMPLE)}': '{MASK}" in metas

    kept = tuple(hit for hit in decoded.masked if indexed(*hit))
    for line, what in kept:
        if what.startswith(EXAMPLE):  # information: nothing to remove
            log.info("%s: line %d: masked a documentation example (%s) before indexing", path,
                     line, what.removeprefix(EXAMPLE), extra=DETAIL)
        else:
            log.warning("%s: line %d: masked a secret-looking value (%s) before indexing; "
                        "%sremove it from the repository", path, line, what,
                        "if it is no made-up example, " if what.endswith(IN_DOCUMENTATION)
                        else "")
    return decoded._replace(masked=kept)


def masked_note(hits) -> str:
    """The file row's reason for a document with masked values: ``masked secret-looking
    values on line(s) 4, 9 (DB_PASSWORD, token)``; "" when all are documentation examples."""
    hits = [(line, what) for line, what in hits if not what.startswith(EXAMPLE)]
    if not hits:
        return ""
    lines = sorted({line for line, _ in hits})
    whats = sorted({what for _, what in hits})
    return (f"{MASK_NOTE}{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))} "
            f"({', '.join(whats)})")


def masked_text(text: str, kind: str = "") -> str:
    """``text`` (a document of ``kind``) with its secret-looking values masked, as it is
    chunked."""
    from varaverk.masking.documents import mask_secrets
    return mask_secrets(text, kind).text
