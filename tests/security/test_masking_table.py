"""The table of secret shapes, row by row and both ways: every secret shape masked (keys, hosts
and line numbers kept), every non-secret shape indexed as it is; README.md shows this table;
redaction of logs and prompts removes every secret of it too."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.security.masking_shapes import SHAPES, table_rows
from varaverk.secret_patterns import MASK, mask_secrets, scrub

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
