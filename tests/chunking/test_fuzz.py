"""Fuzz: every chunker over hostile and random inputs and over a large real set of documents.

No exception escapes a chunker (a JSON chat export that is not one is the documented
ValueError, which the indexer's guard records), every chunk keeps the invariants the index
relies on, and time stays linear in the input's size on the shapes that once backtracked or
repeated work. The real set is a throwaway git repository of text documents copied from
/usr/share/doc and the test venv's site-packages (a fixed sample, bounded so the test takes
seconds), chunked by every chunker and then planned by the indexer (``--dry-run``), whose
guard must have nothing to catch.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.index.conftest import make_settings
from tests.support.repos import git, make_repo
from varaverk.documents import guard
from varaverk.documents.chunking import chunk_document, normalise_text
from varaverk.documents.chunks import MAX_LABEL_CHARS
from varaverk.documents.tracked_files import decode
from varaverk.index.plan import plan

# Every chunker, by the kind and path that select it.
CHUNKERS = [("header", "tools/run.sh"), ("header", "tools/run.py"), ("readme", "README-x.md"),
            ("doc", "docs/guide.rst"), ("template", "Deployment/app.template"),
            ("template", "compose.yml.example"), ("note", "vault:Note.md"),
            ("org", "roam:note.org"), ("chat", "chats:WhatsApp Chat with Ops.txt"),
            ("chat", "chats:export.json")]
IDS = [f"{kind}:{path.rsplit('.', 1)[-1]}" for kind, path in CHUNKERS]
BUDGET = 64  # tokens (characters here): small, so that splitting is exercised too
LINEAR_RATIO = 8.0  # time(4N) / time(N): linear is about 4, quadratic about 16

LAUGHS = "\n".join(['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + [
    f"{n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]" for p, n in zip("abcdefgh", "bcdefghi")])
HOSTILE = {
    "alias bomb": "---\ntags: &a [*a]\n---\n# T\n* T\nbody\n",
    "billion laughs": f"---\n{LAUGHS}\n---\n# T\nbody\n",
    "deep front matter": "---\na: " + "[" * 20_000 + "]" * 20_000 + "\n---\nbody\n",
    "bad date": "---\ndate: 2024-02-30\nn: " + "9" * 5_000 + "\n---\n# T\nbody\n",
    "deep quotes": ">" * 20_000 + " x\n",
    "deep lists": "".join("  " * i + "- x\n" for i in range(300)),
    "deep stars": "*" * 20_000 + " x\nbody\n",
    "deep json": "[" * 100_000 + "]" * 100_000,
    "deep json objects": '[{"text": ' + '{"a":' * 50_000 + "1" + "}" * 50_000 + "}]",
    "json not a list": '{"chat": "x"}',
    "json odd fields": json.dumps([{"chat": ["x"], "sender": None, "timestamp": 5,
                                    "text": {"t": 1}}, 7, None, "x",
                                   {"timestamp": "2024-01-01T00:00", "text": 1e308}]),
    "json huge int": "[" + "9" * 5_000 + "]",
    "python deep": "#!/usr/bin/env python3\n# PURPOSE:\n#  x\n" + "-" * 50_000 + "x\n",
    "binary": bytes(range(256)).decode("latin-1") * 64,
    "huge line": "x" * 300_000,
    "huge words": " ".join(["w" * 50] * 20_000),
    "huge heading": "# " + "word " * 20_000 + "\n## s\nbody\n" * 50,
    "crlf": "# A\r\n\r\nIntro.\r\n## B\r\nRun.\r\n* org\r\n[02/03/2024, 19:04:00] A: x\r\n",
    "lone cr": "# A\rIntro.\r## B\rRun.\r",
    "boms": "\ufeff\ufeff# A\n\ufeffbody\ufeff\n" * 50,
    "nuls": "# A\0\nbo\0dy\n\0\0\n" * 50,
    "lone surrogates": "# A\ud800\nbody \udfff and \ud83d\ude00\n"
                       '[{"text": "\\ud83d", "timestamp": "2024-01-01T00:00"}]\n',
    "surrogate escapes": json.dumps([{"chat": "c\ud800", "sender": "s\udfff",
                                      "timestamp": "2024-01-01T00:00", "text": "t\ud83d"}]),
    "empty": "",
    "only blank": "\n \n\t\n",
    "unclosed everything": "```\n~~~\n#+begin_src\n:PROPERTIES:\n---\nx: [\n<div>\n%%\n[[\n",
}

SOUP = ["# ", "## ", "* ", "** ", "- ", "1. ", "> ", "```", "~~~", "    ", "\t", ":PROPERTIES:",
        ":END:", ":ID: ", "#+title: ", "#+begin_src", "#+end_src", "SCHEDULED: ", "---", "===",
        "KEY=", "export A=", "# PURPOSE:", "# CONFIGURATION:", "#!", "[[", "]]", "![[", "%%",
        "[02/03/2024, 19:04:00] Anna: ", "02/03/2024, 19:05 - Ben: ", "<div>", "</div>",
        "import x from 'y'", ".. note::", "|a|", "[sec]", "a:", "  b: c", "#key: v", '"',
        "'", "\\", "{", "}", "[", "]", "(", ")", "=" * 10, "-" * 10, "word", "words here", " "]


def _soup(rnd: random.Random, lines: int) -> str:
    return "\n".join("".join(rnd.choice(SOUP) for _ in range(rnd.randint(0, 6)))
                     for _ in range(lines))


def _random_bytes_text(seed: int, size: int) -> str:
    """Random bytes as the indexer would decode them (latin-1 when it would call them
    binary: the chunkers must hold even then)."""
    data = random.Random(seed).randbytes(size)
    decoded = decode(data)
    return decoded.text if decoded.text is not None else data.decode("latin-1")


def chunk_checked(kind: str, path: str, text: str, count=None) -> list:
    """Chunk ``text`` and check the invariants the index relies on; returns the chunks.

    A JSON chat export that is not a list of messages may raise ValueError (documented).
    """
    try:
        chunks = chunk_document(path, kind, text, max_tokens=BUDGET, count_tokens=count)
    except ValueError:
        if path.endswith(".json"):
            return []
        raise
    lines = normalise_text(text).count("\n") + 1
    measure = count or len
    for c in chunks:
        assert c.text.strip(), c
        assert 1 <= c.start_line <= c.end_line <= lines, (c.start_line, c.end_line, lines)
        assert measure(c.embed_text) <= BUDGET or len(c.text) == 1, c
        assert len(c.section) <= MAX_LABEL_CHARS + 1 and len(c.title) <= MAX_LABEL_CHARS + 1
        assert "\r" not in c.text and "\ufeff" not in c.text
        for value in (c.text, c.context, c.section, c.title,
                      json.dumps(c.meta, ensure_ascii=False, default=str)):
            value.encode("utf-8")  # no lone surrogate: SQLite stores UTF-8
    return chunks


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("kind, path", CHUNKERS, ids=IDS)
def test_hostile_inputs(kind, path, name):
    chunk_checked(kind, path, HOSTILE[name])


@pytest.mark.parametrize("kind, path", CHUNKERS, ids=IDS)
def test_random_markup_and_random_bytes(kind, path):
    rnd = random.Random(f"{kind}{path}")
    for round_ in range(12):
        chunk_checked(kind, path, _soup(rnd, rnd.randint(1, 120)))
        chunk_checked(kind, path, _random_bytes_text(round_, rnd.randint(1, 20_000)))


def test_random_markup_with_the_real_tokenizer(real_count_tokens):
    rnd = random.Random(21)
    for kind, path in CHUNKERS:
        chunk_checked(kind, path, _soup(rnd, 200), real_count_tokens)


# --- linear time ----------------------------------------------------------------------------

# Shapes that made a parser repeat work over a line or a document (n: about the size).
WORST = {
    "spaces inside a line": lambda n: "\n".join(
        p + " a" + " " * n + "b" for p in ("* h", "#+title:", ":ID:", "# ==", "KEY=",
                                           "import", "[02/03/2024, 19:04:00] A:", "- x")),
    "banner chars": lambda n: "\n".join(c * n for c in "#=-~*_+"),
    "many sections": lambda n: "# T\n* T\n" + "## s\n** s\nKEY=1\n# c\nbody\n" * (n // 30),
    "huge heading": lambda n: "# " + "w " * n + "\n* " + "w " * n + "\n"
                              + "## s\n** s\nbody\n" * (n // 20),
    "one long line": lambda n: "word " * n,
    "pasted log": lambda n: "[02/03/2024, 19:04:00] A: log\n" + "log line text\n" * (n // 14),
    "blank runs": lambda n: "* h\n# h\n" + "\n" * n + "x\n",
}


def _cpu(work) -> float:
    best = float("inf")
    for _ in range(2):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


@pytest.mark.parametrize("shape", sorted(WORST))
def test_every_chunker_is_linear_on_the_worst_shapes(shape):
    make = WORST[shape]
    small, large = make(4_000), make(16_000)
    slow = []
    for kind, path in CHUNKERS:
        def run(text):
            return lambda: chunk_checked(kind, path, text)
        t_small, t_large = _cpu(run(small)), _cpu(run(large))
        if t_large > LINEAR_RATIO * max(t_small, 0.01):
            slow.append((kind, path, round(t_small, 3), round(t_large, 3)))
    assert not slow


# --- a large real set -----------------------------------------------------------------------

REAL_FILES = 160          # documents in the sample
REAL_BYTES = 48 * 1024    # each at most (a prefix of a longer one)
_SUFFIXES = (".md", ".rst", ".txt", ".yaml", ".yml", ".py", ".json", ".cfg", ".toml", "")


def _real_documents() -> list[Path]:
    """A fixed sample of text documents from /usr/share/doc and this venv's site-packages."""
    roots = [Path("/usr/share/doc"), Path(sys.prefix) / "lib"]
    found = []
    for root in roots:
        if root.is_dir():
            found += [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()
                      and p.suffix.lower() in _SUFFIXES and p.stat().st_size > 0]
    found.sort()
    if len(found) < 20:
        pytest.skip("no documents under /usr/share/doc or site-packages")
    return random.Random(21).sample(found, min(REAL_FILES, len(found)))


@pytest.fixture(scope="module")
def real_repo(tmp_path_factory) -> Path:
    """A git repository of the sample, laid out so the default globs give every kind."""
    files = {}
    for i, source in enumerate(_real_documents()):
        data = source.read_bytes()[:REAL_BYTES]
        name = source.name.replace(" ", "_") or "file"
        # Spread the documents over layouts the default globs know: doc, readme, manual,
        # header, template.
        place = [f"docs/{i}/README.md", f"README-{i}.md", f"Manual-{i}.md",
                 f"tools/{i}_{name}.sh", f"Deployment/{i}.template", f"notes/{i}/{name}",
                 f"tools/{i}.py"][i % 7]
        files[place] = data
    root = tmp_path_factory.mktemp("realdocs")
    return make_repo(root / "repo", files)


def test_every_chunker_over_a_large_real_set(real_repo):
    texts = []
    for path in git(real_repo, "ls-files", "-z").split("\0"):
        if path:
            decoded = decode((real_repo / path).read_bytes())
            texts.append(decoded.text if decoded.text is not None else "")
    assert len(texts) >= 20
    chunked = 0
    for text in texts:
        for kind, path in CHUNKERS:
            chunked += len(chunk_checked(kind, path, text))
    assert chunked > len(texts)


def test_the_index_plan_of_the_real_set_needs_no_guard(real_repo, tmp_path):
    settings = make_settings(real_repo, tmp_path)
    result = plan(settings, None, 256)
    assert result["chunks"] > 0 and len(result["files"]) > 20
    assert not [s for s in result["skipped"] if s["reason"].startswith(guard.REASON_FAILED)]
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
