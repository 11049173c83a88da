"""The offline model's token counter: the ceiling never undercounts, and it vouches only for
characters the installed normalizer maps to at most one character."""

from __future__ import annotations

import random

import pytest

from varaverk.embedding import LocalEmbedder
from varaverk.wordpiece import VOUCHED


@pytest.fixture(scope="module")
def counter():
    return LocalEmbedder().count_tokens


def _vouched_code_points() -> list[str]:
    singles = (chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    return [c for c in singles if VOUCHED.fullmatch(c)]


def test_every_vouched_character_normalizes_to_at_most_one_character(counter):
    tokenizer = counter._load()
    # The bound's other steps: words cut at white space and punctuation, one token per piece.
    assert [type(part).__name__ for part in (tokenizer.pre_tokenizer, tokenizer.model)] == [
        "BertPreTokenizer", "WordPiece"]
    normalizer = tokenizer.normalizer
    vouched = _vouched_code_points()
    assert "\u203a" in vouched and "\u0416" in vouched and "\u4e00" not in vouched
    wider = [hex(ord(c)) for c in vouched if len(normalizer.normalize_str(c).replace(" ", "")) > 1]
    assert wider == []
    assert normalizer.normalize_str(" \n").strip() == ""


@pytest.mark.parametrize("text", ["\uac00\ub098", "\u09cb", "hello \U0001d15e", "\ud800 lone",
                                  "\ufb01"])
def test_text_with_a_character_it_cannot_vouch_for_has_no_ceiling(counter, text):
    assert counter.ceiling(text) is None


def _random_texts(rng: random.Random, n: int) -> list[str]:
    pieces = ["backup", "pool", "Ω", "é", "straße", "İstanbul", "[CLS]", "[UNK]", "x" * 150,
              "\u0301", "\x00", "\t", "\r\n", "‹›", "—", "…", "→", "│", "Ж", "שלום", "٣", "!?",
              "a1b2c3", "MOVER_STOP_TIMEOUT", "${VAR}", "{{ .Values.x }}", "\u00a0", "½"]
    return ["".join(rng.choice(pieces) + rng.choice(["", " ", "\n"])
                    for _ in range(rng.randint(0, 60))) for _ in range(n)]


def test_the_ceiling_is_at_least_the_count(counter, harborlab_pristine):
    docs = [p.read_bytes().decode("utf-8", "replace") for p in harborlab_pristine.rglob("*")
            if p.is_file() and ".git" not in p.parts]
    texts = _random_texts(random.Random(25), 400) + docs
    texts += [chr(cp) * 3 for cp in range(0, 0x900, 7)] + ["", " ", "\n\n"]
    for text in texts:
        bound = counter.ceiling(text)
        if bound is not None:
            assert bound >= counter(text), repr(text[:80])
    assert counter.ceiling("hello world") == 12 and counter("hello world") == 4
