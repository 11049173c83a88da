"""The offline model's token counter (``LocalEmbedder.count_tokens``): exact WordPiece counts,
and a ceiling read off the characters that spares the count when even it fits.

Why the ceiling bounds the count: the model's normalizer (BERT: control characters dropped,
white space made spaces, accents stripped, lower case, spaces around CJK ideographs) turns each
character of ``VOUCHED`` into at most one character; the pre-tokenizer cuts the result at white
space and punctuation into words; WordPiece gives a word one token per piece, every piece at
least one character long, or a single ``[UNK]``; the post-processor adds ``[CLS]`` and
``[SEP]``. So a text of vouched characters costs at most its characters other than spaces and
newlines, plus those two. ``tests/model/test_wordpiece.py`` checks every vouched character
against the installed normalizer.
"""

from __future__ import annotations

import re
from typing import Any, Callable

# Characters the normalizer maps to at most one character: every script up to U+08FF (Latin,
# Greek, Cyrillic, Hebrew, Arabic...) and U+2000-U+2BFF (punctuation such as the context
# separator, symbols, arrows, box drawing). Outside them some characters become several (a
# Hangul syllable its jamo, some Indic vowel signs two letters), so the count is needed.
VOUCHED = re.compile(r"[\x00-\u08ff\u2000-\u2bff]*")


class WordPieceCounter:
    """``counter(text)``: the tokens ``text`` costs, ``[CLS]`` and ``[SEP]`` included,
    untruncated; ``counter.ceiling(text)``: an int at least that count, or None when ``text``
    holds a character outside ``VOUCHED`` (see the module docstring).

    ``load``: a zero-argument callable giving the loaded ``tokenizers.Tokenizer`` (truncation
    and padding off), called on first use.
    """

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load
        self._special: int | None = None  # tokens the post-processor adds to every text

    def __call__(self, text: str) -> int:
        return len(self._load().encode(text).ids)

    def ceiling(self, text: str) -> int | None:
        if VOUCHED.fullmatch(text) is None:
            return None
        if self._special is None:
            self._special = self("")
        return self._special + len(text) - text.count(" ") - text.count("\n")
