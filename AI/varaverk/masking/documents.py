"""Masking a tracked document before it is chunked and embedded: ``mask_secrets``.

Multi-line blocks first (``blocks``), then each line that any rule could match: shapes found
anywhere (``shapes``), values of ``key: value`` / ``key=value`` pairs under secret-named keys
(``values``) and the items of their lists, then long high-entropy strings. Line N of the
result is line N of the document.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import chain
from typing import NamedTuple

from varaverk.masking.blocks import BLOCK_SCALAR, mask_blocks
from varaverk.masking.layout import DRAWER_LINE, Layout, ListOwner, inline_code, may_hold_lists
from varaverk.masking.shapes import (BEARER, CLI_PASSWORD, CRYPT_HASH, DOC_URL_CREDS, MASK,
                                     REDIS_PASSWORD, cli_value, looks_random, token_shapes)
from varaverk.masking.values import (EXAMPLE, FILLER, SECRETISH, URL, base64_text,
                                     directive_role, documented_as_name,
                                     example_looking, key_words, key_role,
                                     names_a_listed_secret, secret_value, stands_in)


class MaskedText(NamedTuple):
    """A document with its secrets masked, line for line.

    Attributes:
        text: the text, each secret replaced by the mask (keys, quotes, hosts, BEGIN/END lines
            and every newline kept: line N of ``text`` is line N of the document).
        hits: ``(line, what)`` per masked secret, 1-based; ``what`` is the key, or the shape of
            a value found by its shape alone ("private key", "credentials in a URL").
        examples: the same for documentation examples (an example-looking value in a code
            block of a prose document): masked too, reported as information, not as a finding.
    """

    text: str
    hits: tuple[tuple[int, str], ...]
    examples: tuple[tuple[int, str], ...] = ()


# Names under which a high-entropy string is public: digests, ids, signatures, public keys.
_PUBLIC_WORDS = frozenset(
    "id ids uuid guid hash hashes digest digests checksum checksums sum sha sha1 sha256 sha512 "
    "md5 fingerprint fingerprints signature signatures sig integrity etag public pub pubkey "
    "publickey verify verification cert certs certificate certificates ca commit rev revision "
    "event events room image kid".split())


# -- one line ---------------------------------------------------------------------------------

_PAIR_KEY = re.compile(
    r"(?:(?P<q>[\"'])(?P<qkey>[^\"'\n]{1,80}?)(?P=q)|(?<![\w.$])(?P<key>[A-Za-z_][\w.-]{0,80}))"
    r"(?P<sep>[ \t]*(?::(?![:/])|=)[ \t]*)")
_LINE_MARKS = re.compile(r"[\s#;/*>!|:-]*")
_ASSIGNMENT_LEAD = re.compile(r"(?:export\s+|-\s+)?")
_VALUE_STOP = {False: re.compile(r"[ \t]#|`"), True: re.compile(r"[ \t]#|`|[,}\]]")}
# A value runs to the end of its line at most this far: longer, it is text, not a password
# (and the scan of a huge line stays linear).
_MAX_VALUE = 512
# An "&" joined to more of the word belongs to it (a password holding one, in prose); only a
# spaced or doubled one ends a command's word.
_SHELL_WORD = re.compile(r"(?:[^\s\"'`,;&)}\]]|&(?=[^\s&]))*")
_QUERY_VALUE = re.compile(r"[^\s\"'`&#]*")
_QUOTED = {q: re.compile(q + r"((?:[^" + q + r"\\\n]|\\.)*)" + q) for q in "\"'"}
_SSH_PUBLIC = re.compile(r"\b(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh"
                         r"\.com)\s+AAAA[A-Za-z0-9+/]+=*")
_SOPS = re.compile(r"ENC\[[A-Z0-9_]+,data:[^\]]*\]")
_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}={0,3}")
_DIGEST_BEFORE = re.compile(r"(?:sha(?:1|224|256|384|512)|md5|blake2b?)[:-]$", re.I)
_KEYS_BEFORE = re.compile(r"([\w.:-]{1,80})[\"']?\s*[:=]")
_CAMEL_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _identifier(tok: str) -> bool:
    """A name in camelCase or snake_case (clusterPoolIPv4PodCIDRList), not random: most of
    it in word parts, at most one run of digits."""
    if len(re.findall(r"\d+", tok)) > 1:
        return False
    covered = sum(len(p) for p in _CAMEL_PART.findall(tok) if len(p) >= 4
                  and re.fullmatch(r"[A-Z]?[a-z]+", p) and re.search("[aeiouy]", p[1:]))
    return covered >= 0.5 * len(tok)


# Ends the finding of a value that documentation shows but does not call made up (a hash).
IN_DOCUMENTATION = " in a documentation code block"
# "Password is 'authelia'", "digest for 'password'": the text tells a hash's password.
_PLAINTEXT_TOLD = re.compile(
    r"\b(?:password|passphrase|passwd|digest|hash)\b[\w \t]{0,20}?['\"`][^'\"`\s]{1,64}['\"`]",
    re.I)


class _Spans:
    """Disjoint ``[start, end)`` spans in order; a test for a free range costs a bisection
    (a line with thousands of masked values stays linear)."""

    def __init__(self, spans=None):
        self.starts: list[int] = []
        self.ends: list[int] = []
        for start, end in sorted(spans or ()):  # merged: a URL may hold an SSH key's text
            if self.ends and start < self.ends[-1]:
                self.ends[-1] = max(self.ends[-1], end)
            else:
                self.starts.append(start)
                self.ends.append(end)

    def free(self, start: int, end: int) -> bool:
        i = bisect_right(self.starts, start)
        return (i == 0 or self.ends[i - 1] <= start) and (
            i == len(self.starts) or self.starts[i] >= end)

    def add(self, start: int, end: int) -> None:
        i = bisect_right(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)

    def __iter__(self):
        return zip(self.starts, self.ends)

    def __bool__(self) -> bool:
        return bool(self.starts)


class _Line:
    """One line being masked: the spans to replace, the spans no rule may touch, findings."""

    def __init__(self, text: str, number: int, layout: Layout, mask: str):
        self.text, self.number, self.layout, self.mask = text, number, layout, mask
        self.lead = _LINE_MARKS.match(text).end()  # indentation, comment and list marks
        flows = [i for i in (text.find("{"), text.find("[")) if i != -1]
        self.flow_from = min(flows, default=len(text))  # a YAML/JSON flow collection
        self.code_spans = inline_code(text) if layout.prose_kind else []
        found = text.rfind(" #")
        self.comment = found if found != -1 else len(text)  # a trailing comment's start
        self.spans = _Spans()
        self.quoted: set[int] = set()  # starts of spans masked as a quoted string
        self.protected = _Spans()
        self.found: list[tuple[str, bool]] = []  # (what, is an example)

    def free(self, start: int, end: int, protected: bool = False) -> bool:
        return start < end and self.spans.free(start, end) and (
            not protected or self.protected.free(start, end))

    def take(self, start: int, end: int, what: str, value: str | None = None) -> None:
        """Mask ``text[start:end]``; ``value`` (when the shape allows it) may be an example."""
        self.spans.add(start, end)
        # Documentation: a code block of prose, or a comment (a template's "#password: x").
        documented = self.layout.prose_kind and (self.in_code(start) or self.layout.explains) \
            or any(c in self.text[:self.lead] for c in "#;") or "//" in self.text[:self.lead]
        # "'$pbkdf2...'  # The digest of 'insecure_secret'": the comment says it is made up.
        example = value is not None and documented and (example_looking(value) or (
            end <= self.comment and bool(EXAMPLE.search(self.text[self.comment:].lower()))))
        if what == "password hash" and not example and self.layout.prose_kind \
                and self.in_code(start):
            # A hash of a password the document gives (``## Password is 'authelia'``)
            # protects nothing: an example. Any other stays a finding, named as documentation.
            example = self._plaintext_given()
            what = what if example else "password hash" + IN_DOCUMENTATION
        self.found.append((what, example))

    def _plaintext_given(self) -> bool:
        """Whether this line's comment or one of the three lines above tells a password."""
        above = self.layout.lines[max(0, self.number - 3):self.number]
        return any(_PLAINTEXT_TOLD.search(t) for t in [*above, self.text[self.comment:]])

    def in_code(self, pos: int) -> bool:
        return self.layout.in_code(self.number, pos, self.code_spans)

    def key_place(self, start: int) -> bool:
        """Whether a "key:" at ``start`` starts a pair: at the start of the line (after its
        marks), after "{" "," "[" "(" or a backtick; "looks like a password: x" is prose."""
        j = start - 1
        while j >= self.lead and self.text[j] in " \t":
            j -= 1
        return j < self.lead or self.text[j] in "{,[(`"

    def result(self) -> str:
        out, pos = [], 0
        for start, end in self.spans:
            out += [self.text[pos:start], f'"{self.mask}"' if start in self.quoted else self.mask]
            pos = end
        return "".join(out) + self.text[pos:]


def _mask_shapes(ln: _Line, long_run: bool) -> None:
    """Shapes found wherever they are: crypt hashes, URL credentials, tokens, headers.
    ``long_run``: the line has a run of token characters (``_LONG_RUN``); without one no
    token, header or high-entropy string can be there (the common case, skipped fast)."""
    text = ln.text
    for m in CRYPT_HASH.finditer(text) if "$" in text or "{" in text else ():
        if len(set(m.group().rsplit("$", 1)[-1])) > 2:  # not $2a$12$xxxxxxxx
            ln.take(m.start(), m.end(), "password hash", m.group())
    for m in DOC_URL_CREDS.finditer(text) if "://" in text else ():
        pw = m.group("pw")
        if not stands_in(pw) and ln.free(m.start("pw"), m.end("pw")):
            ln.take(m.start("pw"), m.end("pw"), "credentials in a URL", pw)
    for m in CLI_PASSWORD.finditer(text) if _cli_hint(text) else ():
        group = cli_value(m)
        value = m.group(group).rstrip(".,;:)")  # "sshpass -p SECRET." in a sentence
        start, end = m.start(group), m.start(group) + len(value)
        if not stands_in(value) and ln.free(start, end):
            ln.take(start, end, "password on a command line", value)
    for m in REDIS_PASSWORD.finditer(text) if ">" in text or "auth-pass" in text else ():
        group = "acl" if m.group("acl") is not None else "sentinel"
        if not stands_in(m.group(group)) and ln.free(m.start(group), m.end(group)):
            ln.take(m.start(group), m.end(group), "Redis password", m.group(group))
    if not long_run:
        return
    for m in token_shapes(True).finditer(text):
        end = _TOKEN_TAIL.match(text, m.end()).end()  # a JWT's signature too
        if ln.free(m.start(), end) and not FILLER.search(text, m.start(), end):
            ln.take(m.start(), end, "token", text[m.start():end])
    for m in BEARER.finditer(text):
        start = m.start() + len(m.group(1)) + 1
        start += len(text[start:m.end()]) - len(text[start:m.end()].lstrip())
        if ln.free(start, m.end()):
            ln.take(start, m.end(), "authorization header", text[start:m.end()])


def _value_end(ln: _Line, key_start: int, pos: int, sep: str) -> int:
    """Where an unquoted value starting at ``pos`` ends: a query parameter in a URL, a shell
    word after ``KEY=`` in a command, else the rest of the line before a comment (at most
    ``_MAX_VALUE`` characters)."""
    text = ln.text
    if key_start > 0 and text[key_start - 1] in "?&;":
        return _QUERY_VALUE.match(text, pos).end()
    if sep == "=" and _ASSIGNMENT_LEAD.match(text, ln.lead).end() < key_start:
        return _SHELL_WORD.match(text, pos).end()
    limit = min(len(text), pos + _MAX_VALUE)
    stop = _VALUE_STOP[ln.flow_from < key_start].search(text, pos, limit)
    end = stop.start() if stop else limit
    while end > pos and text[end - 1] in " \t\r":
        end -= 1
    return end


def _pairs(ln: _Line):
    """``(key, value start, value end, quoted, whole line)`` for every ``key: value`` /
    ``key=value`` (whole line: ``KEY=`` starts the line, the rest of it is the value)."""
    text, pos = ln.text, 0
    while m := _PAIR_KEY.search(text, pos):
        key, vpos, sep = m.group("qkey") or m.group("key"), m.end(), m.group("sep").strip()
        pos = m.end()
        if sep == ":" and (not m.group("qkey") and m.group("sep").endswith(":")
                           and vpos < len(text) and text[vpos] not in "\"'{[\r"
                           or not ln.key_place(m.start())):
            continue  # "user:pass", "SHA256:...", "like a password: x" are no pairs
        if vpos < len(text) and text[vpos] in "\"'":
            q = _QUOTED[text[vpos]].match(text, vpos)
            start, end, quoted = vpos + 1, (q.end() - 1 if q else len(text)), True
        else:
            start, end, quoted = vpos, _value_end(ln, m.start(), vpos, sep), False
        # KEY=value at the line's start, "=" tight: the rest of the line is the value; not
        # an option (--password=x) nor a line a backslash continues (a command's).
        whole_line = not quoted and m.group("sep") == "=" \
            and _ASSIGNMENT_LEAD.match(ln.text, ln.lead).end() == m.start() \
            and text[m.start() - 1:m.start()] != "-" and not text.rstrip().endswith("\\")
        yield key, start, end, quoted, whole_line
        pos = max(pos, vpos)  # a value may hold pairs: "jdbc:...?password=x", KEY=a=b


def _mask_pairs(ln: _Line) -> None:
    """Values under secret-named keys; the items of a flow list as its key's values."""
    for key, start, end, quoted, whole_line in _pairs(ln):
        if not quoted and ln.text.startswith("[", start):
            for item_start, item_end, item_quoted in _flow_list(ln.text, start):
                _judge(ln, key, item_start, item_end, item_quoted, ln.number)
            continue
        value = ln.text[start:end]
        if BLOCK_SCALAR.fullmatch(value.strip()) or not quoted and len(value) >= _MAX_VALUE:
            continue  # on the next lines (``mask_blocks``); text, not a password
        _judge(ln, key, start, end, quoted, ln.number, whole_line)


def _mask_items(ln: _Line, owner: ListOwner) -> None:
    """The items of a list under a secret-named key (``- item``, a JSON array's strings),
    each judged as that key's value."""
    items = _flow_items(ln.text, ln.lead, len(ln.text)) if owner.flow else [_entry(ln)]
    for start, end, quoted in items:
        if not names_a_listed_secret(ln.text[start:end], owner.key):
            _judge(ln, owner.key, start, end, quoted, owner.line)


def _judge(ln: _Line, key: str, start: int, end: int, quoted: bool, key_line: int,
           whole_line: bool = False) -> None:
    """Mask ``text[start:end]``, the value of ``key`` (written on line ``key_line``), when
    the key names a secret and the value is one."""
    role = key_role(key)
    if not role or not ln.free(start, end):
        return
    value = ln.text[start:end]
    prose = ln.layout.mode[ln.number] == "prose" and not ln.in_code(start)
    if secret_value(value, role, key_words(key), quoted, prose, whole_line, key) \
            and not documented_as_name(value, ln.layout.comment_above(key_line)):
        ln.take(start, end, key, value)
        meta = ln.layout.mode[ln.number] == "meta" and not DRAWER_LINE.match(ln.text)
        if meta and not quoted:
            ln.quoted.add(start)  # front matter is YAML: a bare [masked] is a list


# A flat flow list ``[a, "b"]`` (nested collections are judged by their own keys; a quoted
# item may hold any character, "${TOKEN}"), and one item of it: a quoted string or a bare
# word run to the next comma.
_FLOW_LIST = re.compile(r"""\[((?:"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\[\]{}"'\n])*)\]""")
_FLOW_ITEM = re.compile(r"""[ \t]*(?:"((?:[^"\\\n]|\\.)*)"|'([^'\n]*)'|([^,]*?))[ \t]*(?:,|$)""")
_ENTRY_VALUE = re.compile(r"""-[ \t]+(?:"((?:[^"\\\n]|\\.)*)"|'([^'\n]*)'|(.*?))"""
                          r"[ \t]*(?:[ \t]#.*)?\r?$")


def _flow_list(text: str, start: int) -> list[tuple[int, int, bool]]:
    """The items of the flat flow list at ``text[start]`` ("["), as ``_flow_items``; none
    when it nests or does not close on the line."""
    m = _FLOW_LIST.match(text, start)
    return _flow_items(text, m.start(1), m.end(1)) if m else []


def _flow_items(text: str, start: int, end: int) -> list[tuple[int, int, bool]]:
    """``(start, end, quoted)`` of each non-empty item of the comma-separated scalars in
    ``text[start:end]`` (quotes excluded from the span)."""
    out, pos = [], start
    while pos < end and (m := _FLOW_ITEM.match(text, pos, end)) and m.end() > pos:
        group = next(g for g in (1, 2, 3) if m.group(g) is not None)
        if m.end(group) > m.start(group):
            out.append((m.start(group), m.end(group), group != 3))
        pos = m.end()
    return out


def _entry(ln: _Line) -> tuple[int, int, bool]:
    """``(start, end, quoted)`` of a ``- item`` line's scalar, before a comment."""
    m = _ENTRY_VALUE.match(ln.text, ln.text.index("-"))
    if m is None:
        return 0, 0, False
    group = next(g for g in (1, 2, 3) if m.group(g) is not None)
    return m.start(group), m.end(group), group != 3


# A config line "directive value" with no ":" or "=" (redis.conf ``requirepass X``, keepalived
# ``auth_pass X``, msmtprc ``password X``, a commented-out one too): one value, then at most
# nginx's ";" and a comment.
_DIRECTIVE = re.compile(r"(?P<lead>[ \t]*(?:[#;][ \t]*)?)(?P<key>[A-Za-z_][\w-]{0,60})[ \t]+"
                        r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s\"'#;]+)[ \t]*;?(?:[ \t]+#.*)?\r?")
def _cli_hint(text: str) -> bool:
    """Whether a command of ``CLI_PASSWORD`` or a Redis ACL rule may be on the line (a fast
    test before them; sentinel's ``auth-pass`` holds "-p")."""
    return "-p" in text or "-u" in text or "redis-" in text or "mosquitto_" in text \
        or " >" in text and ("user" in text or "SETUSER" in text)


def _directive(line: str) -> re.Match | None:
    """A ``directive value`` line whose directive may name a secret, or None."""
    words = line.split(None, 3)
    if len(words) < 2 or len(words) > 3 and " #" not in line:
        return None  # one word, or a sentence (the common case, skipped fast)
    m = _DIRECTIVE.fullmatch(line)
    return m if m and directive_role(m.group("key")) else None


def _mask_directive(ln: _Line, m: re.Match) -> None:
    """The value of a ``directive value`` config line whose directive names a secret."""
    key = m.group("key")
    role = directive_role(key)  # not "": ``_directive`` found the line
    commented = bool(m.group("lead").strip())
    if ln.layout.mode[ln.number] != "code" and commented:
        return  # a Markdown heading ("# Password reset"), an org keyword
    if commented or ln.layout.mode[ln.number] != "code":
        # A line of text ("# password database."): only a value that looks like a password.
        role = role and "weak"
    quoted = m.group("value")[0] in "\"'"
    start, end = m.start("value") + quoted, m.end("value") - quoted
    value = ln.text[start:end]
    if role and ln.free(start, end) \
            and secret_value(value, role, key_words(key), quoted, False, True, key):
        ln.take(start, end, key, value)


def _public(ln: _Line, start: int) -> bool:
    """A string under a public name: its own key, a key before it on the line or a parent's
    (sha256, event_id, signatures, verify_keys, google-site-verification)."""
    window = ln.text[max(0, start - 200):start]  # bounded: a huge line stays linear
    words = {w for k in _KEYS_BEFORE.findall(window) for w in key_words(k)}
    return bool((words | ln.layout.parents(ln.number)) & _PUBLIC_WORDS)


def _candidates(m: re.Match) -> list[tuple[int, str]]:
    """``(start, string)`` to test in a run of token characters: the run, or each part of a
    path (``a/b/c`` that is not base64)."""
    tok = m.group().lstrip("-_")
    start = m.end() - len(tok)
    path = tok.startswith("/") or len(re.findall(r"(?:^|/)[a-z]{3,}(?=/|$)", tok)) > 1
    if "/" not in tok or not path and re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", tok) and (
            len(tok) % 4 == 0 or "+" in tok or tok.endswith("=")):
        return [(start, tok)]
    out, pos = [], start
    for part in tok.split("/"):
        if len(part) >= 20:
            out.append((pos, part))
        pos += len(part) + 1
    return out


def _kept_random(ln: _Line, run: int, tok: str, depth: int) -> bool:
    """A random-looking string that is no secret: a name with a random part, an identifier,
    a digest, an id, a public key, base64 of prose. ``run``: where its run of token
    characters starts (a path's part is judged by what stands before the path)."""
    if re.match(r"[A-Za-z][a-z]{2,}[-_/]", tok) or _identifier(tok) or _public(ln, run):
        return True  # tok_189f..., claude/sync-..., clusterPoolIPv4PodCIDRList, "sha256": ...
    before = ln.text[max(0, run - 8):run]
    if _DIGEST_BEFORE.search(before) or before.endswith("$") and len(tok) in (43, 44):
        return True  # SHA256:..., sha512-... (integrity), $<event id>
    decoded = base64_text(tok)
    return bool(decoded is not None and depth == 0 and " " in decoded
                and not _masked_lines(decoded, 1).hits)


_TOKEN_TAIL = re.compile(r"[A-Za-z0-9._~+/=-]*")
# A file name's extension after a random-looking stem (a web font's KFOjCnqEu92Fr1Mu51.woff2).
_FILE_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,5}(?![\w.+/=-])")
_LONG_RUN = re.compile(r"[A-Za-z0-9_+/=.~-]{12,}")


def _mask_random(ln: _Line, depth: int) -> None:
    """Long high-entropy strings that are no URL, name, digest, id, public key or encoded text."""
    text = ln.text
    ln.protected = _Spans([(m.start(), m.end()) for m in chain(
        URL.finditer(text) if "://" in text else (),
        _SSH_PUBLIC.finditer(text) if "AAAA" in text else (),
        _SOPS.finditer(text) if "ENC[" in text else ())])
    for m in _RUN.finditer(text):
        for start, tok in _candidates(m):
            end = start + len(tok)
            if ln.free(start, end, protected=True) and looks_random(tok, 3, 4.0) \
                    and not _FILE_EXTENSION.match(text, end) \
                    and not _kept_random(ln, m.start(), tok, depth):
                ln.take(start, end, "high-entropy string", tok)


def _masked_lines(text: str, depth: int = 0, kind: str = "", mask: str = MASK) -> MaskedText:
    lines = text.split("\n")
    layout = Layout(lines, kind)
    out, hits, examples = list(lines), [], []
    handled = mask_blocks(lines, layout, out, hits, examples, mask)
    listed = may_hold_lists(text)
    for number, line in enumerate(lines):
        if number in handled or not line.strip():
            continue
        long_run = _LONG_RUN.search(line) is not None
        keyed = ("=" in line or ":" in line) and SECRETISH.search(line.lower()) is not None
        directive = _directive(line)
        owner = layout.list_owner(number) if listed else None
        if not (long_run or keyed or "$" in line or "{" in line or "://" in line
                or _cli_hint(line) or directive or owner):
            continue  # most lines of prose: nothing any rule could match
        ln = _Line(line, number, layout, mask)
        _mask_shapes(ln, long_run)
        if keyed:
            _mask_pairs(ln)
        if owner:
            _mask_items(ln, owner)
        if directive:
            _mask_directive(ln, directive)
        if long_run:
            _mask_random(ln, depth)
        if ln.spans:
            out[number] = ln.result()
            for what, example in ln.found:
                (examples if example else hits).append((number + 1, what))
    return MaskedText("\n".join(out), tuple(sorted(set(hits))), tuple(sorted(set(examples))))


def mask_secrets(text: str, kind: str = "", mask: str = MASK) -> MaskedText:
    """Mask the secrets of a tracked document before it is chunked and embedded.

    ``kind``: the document's kind (``readme``, ``doc``, ``note``, ``org``, ``template``,
    ``header``...); prose kinds read lines outside code blocks as text and report masked
    example-looking values inside code blocks as ``examples``. ``mask``: the replacement.

    Masked (the table of shapes in ``tests/security/masking_shapes.py``): values under
    secret-named keys unless they name, point to or stand in for a secret; credentials in
    URLs; crypt and htpasswd hashes; PEM private keys; vendor token shapes; ``Bearer`` and
    ``Basic`` credentials; ``mysql -pX``; long high-entropy strings that are no name, id,
    digest, public key or encoded text. The text keeps every line: a masked multi-line
    value leaves its lines in place, so a finding's line number is the document's.
    """
    return _masked_lines(text, 0, kind, mask)
