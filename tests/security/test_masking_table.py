"""The table of secret shapes, row by row and both ways: every secret shape masked (keys, hosts
and line numbers kept), every non-secret shape indexed as it is; README.md shows this table;
redaction of logs and prompts removes every secret of it too."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.security.masking_shapes import SHAPES, table_rows
from varaverk.masking.documents import mask_secrets
from varaverk.masking.scrubbing import scrub
from varaverk.masking.shapes import MASK

SECRETS = [s for s in SHAPES if s.verdict != "kept"]
KEPT = [s for s in SHAPES if s.verdict == "kept"]


@pytest.mark.parametrize("shape", SECRETS, ids=[s.name for s in SECRETS])
def test_secret_shape_is_masked(shape):
    masked = mask_secrets(shape.text, shape.kind)
    assert MASK in masked.text
    for part in shape.gone:
        assert part not in masked.text, masked.text
    for part in shape.stays:
        assert part in masked.text, masked.text
    # Line numbers kept: the same lines, every finding on one of them.
    assert masked.text.count("\n") == shape.text.count("\n")
    lines = shape.text.count("\n") + 1
    findings = masked.hits if shape.verdict == "masked" else masked.examples
    assert findings and all(1 <= line <= lines for line, _ in findings)
    # A warning (remove it) or an info line (a documentation example), never both.
    assert (masked.examples if shape.verdict == "masked" else masked.hits) == ()


@pytest.mark.parametrize("shape", KEPT, ids=[s.name for s in KEPT])
def test_non_secret_shape_is_kept(shape):
    masked = mask_secrets(shape.text, shape.kind)
    assert masked.text == shape.text
    assert masked.hits == () and masked.examples == ()


@pytest.mark.parametrize("shape", SECRETS, ids=[s.name for s in SECRETS])
def test_redaction_removes_every_secret_of_the_table(shape):
    out = scrub(shape.text)
    for part in shape.gone:
        assert part not in out, out


def test_readme_shows_the_table():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "\n".join(table_rows()) in readme


def test_line_numbers_hold_for_any_mix_of_shapes():
    """Shapes shuffled into one document (a PEM block before other secrets, as in the compose
    file that once crashed the masked-line report): the same number of lines, every finding
    inside the document, every secret gone."""
    rng = random.Random(21)
    for _ in range(40):
        picked = rng.sample(SHAPES, 8)
        text = "\n".join(s.text for s in picked) + rng.choice(("", "\n", "\r\n"))
        masked = mask_secrets(text, rng.choice(("template", "doc", "org", "header")))
        assert masked.text.count("\n") == text.count("\n")
        total = text.count("\n") + 1
        assert all(1 <= line <= total for line, _ in masked.hits + masked.examples)
        for shape in picked:
            if shape.verdict != "kept":
                assert all(part not in masked.text for part in shape.gone), shape.name


# One hostile line each: thousands of pairs, masked values, URLs, quotes, backticks; a deep
# YAML; a key block without its END. Masking must stay linear in the input.
HOSTILE = {
    "yaml pairs on one line": lambda n: "a: b " * n,
    "minified JSON with passwords": lambda n: "{" + ",".join(
        f'"k{i}":"v{i}","password":"Zq8x{i}"' for i in range(n)) + "}",
    "assignments on one line": lambda n: " ".join(f"PASSWORD{i}=x{i}y" for i in range(n)),
    "URLs with credentials": lambda n: " ".join(f"https://u:p{i}@h{i}.lan/x" for i in range(n)),
    "npm registry paths": lambda n: "//registry.example.org/npm/ " * n,
    "backticks and quotes": lambda n: "` ``\"a: '" * n,
    "a base64 line": lambda n: "QmFzZTY0IQ" * n,
    "minified JSON of arrays": lambda n: "{" + ",".join(
        f'"names{i}":["a{i}","b"]' for i in range(n)) + "}",
    "minified JSON of arrays under secret keys": lambda n: "{" + ",".join(
        f'"passwords{i}":["Zq8x{i}y","b"]' for i in range(n)) + "}",
    "a long list under a secret key": lambda n: "tokens:\n" + "\n".join(
        f"  - Zq8x{i}yW  # n" for i in range(n)),
    "a long flow list under a secret key": lambda n: "tokens: [" + ", ".join(
        f"Zq8x{i}yW" for i in range(n)) + "]",
    "flow lists that never close": lambda n: " ".join(
        f'tokens{i}: ["a{i}", "b' for i in range(n)),
    "many lines": lambda n: "\n".join(f"  key{i}: value{i}  # comment" for i in range(n)),
    "a private key without END": lambda n: "-----BEGIN PRIVATE KEY-----\n"
                                           + "\n".join("QUJD" * 16 for _ in range(n // 4)),
}


@pytest.mark.parametrize("make", HOSTILE.values(), ids=list(HOSTILE))
def test_masking_time_is_linear(make):
    import time

    def cost(text: str) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            mask_secrets(text, "doc")
            best = min(best, time.process_time() - start)
        return best

    mask_secrets("warm up ghp_" + "a" * 36, "doc")
    small, large = cost(make(1500)), cost(make(6000))
    assert large < 10 * max(small, 0.002), (small, large)  # 4x the input: about 4x the time


def test_any_text_is_masked_without_error_and_keeps_its_lines():
    """Random text of the characters secrets are made of (quotes, colons, dollars, dashes,
    base64, newlines, CR, NUL, a lone surrogate), in every kind: no exception, the same
    number of lines, every finding on one of them."""
    rng = random.Random(7)
    alphabet = "aZ9=:$@/#-_ '\"`{}[]|>.\n\r\t\x00\ud800é+!*"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        text += rng.choice(("", "-----BEGIN PRIVATE KEY-----\nQUJD", "password: >-\n  a b c"))
        for kind in ("doc", "template", "org", "header", ""):
            masked = mask_secrets(text, kind)
            assert masked.text.count("\n") == text.count("\n")
            total = text.count("\n") + 1
            assert all(1 <= line <= total for line, _ in masked.hits + masked.examples)


def test_a_hash_in_documentation_is_named_so():
    """An htpasswd line in a README's code block: still a finding (a real user's hash may
    be documented there), named as documentation; told its password, an example."""
    doc = "# Proxy\n\n```\ntest:$apr1$H6uskkkW$IgXLP6ewTrSuBkTrqE8wj/\n```\n"
    masked = mask_secrets(doc, "readme")
    assert masked.hits == ((4, "password hash in a documentation code block"),)
    told = doc.replace("```\n", "```\n# the password is 'test'\n", 1)
    masked = mask_secrets(told, "readme")
    assert masked.hits == () and masked.examples == ((5, "password hash"),)
    assert "IgXLP6ewTrSuBkTrqE8wj" not in masked.text
    # Outside documentation (a compose file's comment) it is a plain finding.
    assert mask_secrets("# test:$apr1$H6uskkkW$IgXLP6ewTrSuBkTrqE8wj/", "template").hits \
        == ((1, "password hash"),)
