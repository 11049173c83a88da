"""Secrets over several lines: PEM private keys (masked line by line, BEGIN and END kept) and
YAML block scalars under secret-named keys (``password: >-``). Every line stays in place.
"""

from __future__ import annotations

import re

from varaverk.masking.layout import LEADING_KEY, Layout, inline_code
from varaverk.masking.values import example_looking, key_role, key_words, secret_value

# A YAML block or folded scalar's indicator (``|``, ``>-``, ``!!binary |``): the value is on
# the lines below.
BLOCK_SCALAR = re.compile(r"(!\S+\s+)?[|>][+-]?\d*[+-]?")


# -- blocks over several lines ----------------------------------------------------------------

_PEM_BEGIN = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----")
_KEY_MATERIAL = re.compile(r"[A-Za-z0-9+/]{16,}")  # a body of "..." is a placeholder
_PEM_BODY = re.compile(r"[\s#;/>*\"'|-]*([A-Za-z0-9+/=]{4,}|[A-Za-z-]+: .*)?[\s\"',\\n]*")
_LINE_PREFIX = re.compile(r"[\s#;/>*\"']*")


def _blank_out(line: str, first: bool, mask: str) -> str:
    """A line of a masked block: its indentation and comment marks, then the mask once."""
    prefix = _LINE_PREFIX.match(line).group()
    return prefix + (mask if first and line[len(prefix):].strip() else "")


def mask_blocks(lines: list[str], layout: Layout, out: list[str], hits: list, examples: list,
                 mask: str) -> set[int]:
    """PEM blocks and YAML block scalars under secret keys; returns the line indices done.

    A private key's body is masked line by line (its BEGIN and END lines kept); a certificate
    or public key is left whole and exempt from the other rules.
    """
    done: set[int] = set()
    for i, line in enumerate(lines):
        if i in done:
            continue
        if "-----BEGIN" in line and (m := _PEM_BEGIN.search(line)):
            done |= _mask_pem(lines, i, m, layout, out, hits, examples, mask)
        elif "|" in line or ">" in line:
            done |= _mask_block_scalar(lines, i, layout, out, hits, mask)
    return done


def _mask_pem(lines, i, begin: re.Match, layout: Layout, out, hits, examples, mask
              ) -> set[int]:
    label, line = begin.group(1), lines[i]
    private = "PRIVATE KEY" in label
    end_marker = f"-----END {label}-----"
    if end_marker in line[begin.end():]:  # one line (JSON with \n escapes, a table cell)
        j = line.index(end_marker, begin.end())
        if private and _KEY_MATERIAL.search(line, begin.end(), j):
            out[i] = line[:begin.end()] + mask + line[j:]
            example = layout.prose_kind and layout.in_code(i, begin.start(), inline_code(line)) \
                and example_looking(line[begin.end():j])
            (examples if example else hits).append((i + 1, "private key"))
        return {i}
    j = i + 1
    while j < len(lines) and end_marker not in lines[j] and _PEM_BODY.fullmatch(lines[j]):
        j += 1
    body = range(i + 1, j)
    if private and any(_KEY_MATERIAL.search(lines[k]) for k in body):  # not "..."
        for k in body:
            out[k] = _blank_out(lines[k], k == i + 1, mask)
        hits.append((i + 1, "private key"))
    return {i, *body, *([j] if j < len(lines) and end_marker in lines[j] else [])}


def _mask_block_scalar(lines, i, layout: Layout, out, hits, mask) -> set[int]:
    """``password: >-`` / ``api_key: |`` and the more indented lines after it."""
    m = LEADING_KEY.match(lines[i])
    if m is None:
        return set()
    key, rest = m.group(2), lines[i][m.end():].split(" #")[0].strip()
    role = key_role(key)
    if not role or not BLOCK_SCALAR.fullmatch(rest) or rest.startswith("!vault"):
        return set()
    indent, j, body = len(m.group(1)), i + 1, []
    while j < len(lines) and (not lines[j].strip()
                              or len(lines[j]) - len(lines[j].lstrip()) > indent):
        body.append(j)
        j += 1
    content = " ".join(lines[k].strip() for k in body if lines[k].strip())
    if not content or content.startswith("$ANSIBLE_VAULT") or "-----BEGIN" in content \
            or not secret_value(content, role, key_words(key), False, False):
        return set()
    for n, k in enumerate(k for k in body if lines[k].strip()):
        out[k] = _blank_out(lines[k], n == 0, mask)
    first = next(k for k in body if lines[k].strip())
    hits.append((first + 1, key))
    return {i, *body}

