"""Scoring maths on known matrices: cosine top-k, masks, RRF, exact names, routing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from varaverk.retrieval.routing import SHAPE_SECTIONS, route
from varaverk.retrieval.fusion import rrf
from varaverk.retrieval.scoring import dense_scores, filter_mask, top_k
from varaverk.text import exact_names, lexical_text, normalise_title
from varaverk.index.store.vectors import usable_rows as valid_rows


def unit(*v):
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


@pytest.fixture
def matrix():
    rows = [unit(1, 0, 0), unit(0, 1, 0), unit(1, 1, 0), np.zeros(3, np.float32), unit(-1, 0, 0)]
    return np.ascontiguousarray(np.stack(rows))


def test_dense_scores_are_cosine(matrix):
    q = unit(1, 0, 0)
    s = dense_scores(matrix, q)
    assert s.dtype == np.float32
    np.testing.assert_allclose(s, [1.0, 0.0, 2 ** -0.5, 0.0, -1.0], atol=1e-6)


def test_top_k_orders_best_first_and_is_deterministic_on_ties(matrix):
    q = unit(1, 1, 0)
    s = dense_scores(matrix, q)
    # rows 0 and 1 tie at 0.7071; row 2 is 1.0
    assert top_k(s, 3).tolist() == [2, 0, 1]
    assert top_k(s, 1).tolist() == [2]
    assert top_k(s, 99).tolist() == [2, 0, 1, 3, 4]


def test_zero_vector_rows_never_rank(matrix):
    valid = valid_rows(matrix)
    assert valid.tolist() == [True, True, True, False, True]
    s = dense_scores(matrix, unit(0, 0, 1))  # every row scores 0 or less
    assert 3 not in top_k(s, 5, valid).tolist()
    assert len(top_k(s, 5, valid)) == 4


def test_nan_rows_never_rank():
    m = np.array([[np.nan, 0, 0], [1, 0, 0]], dtype=np.float32)
    assert valid_rows(m).tolist() == [False, True]


def test_filters_compose(matrix):
    kinds = np.array(["header", "header", "readme", "header", "header"])
    sections = np.array(["CONFIGURATION", "PURPOSE", "CONFIGURATION", "PURPOSE", "PURPOSE"])
    assert filter_mask(kinds, sections, kind="header").tolist() == [1, 1, 0, 1, 1]
    assert filter_mask(kinds, sections, section="purpose").tolist() == [0, 1, 0, 1, 1]
    both = filter_mask(kinds, sections, kind="header", section="PURPOSE", base=valid_rows(matrix))
    assert both.tolist() == [False, True, False, False, True]
    s = dense_scores(matrix, unit(1, 0, 0))
    assert top_k(s, 5, both).tolist() == [1, 4]


def test_a_large_product_shared_between_threads_equals_one_product():
    from varaverk.retrieval.scoring import PARALLEL_FROM
    rng = np.random.default_rng(5)
    big = rng.standard_normal((PARALLEL_FROM + 7, 24)).astype(np.float32)
    q = big[11] / np.linalg.norm(big[11])
    assert np.array_equal(dense_scores(big, q), np.vecdot(big, q))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_scores_large_products_with_its_own_threads():
    # A gunicorn worker is forked after the parent may have made its pool: the child's copy
    # of that pool has no threads, so the child must make its own (else it waits forever).
    from varaverk.retrieval.scoring import PARALLEL_FROM
    big = np.random.default_rng(6).standard_normal((PARALLEL_FROM + 3, 8)).astype(np.float32)
    q = big[0] / np.linalg.norm(big[0])
    expected = np.vecdot(big, q)
    assert np.array_equal(dense_scores(big, q), expected)      # the parent's pool exists
    pid = os.fork()
    if pid == 0:
        ok = np.array_equal(dense_scores(big, q), expected)
        os._exit(0 if ok else 1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child never finished its product")


def test_top_k_with_a_mask_ranks_only_allowed_finite_scores():
    s = np.array([0.9, np.nan, 0.8, 0.95, -np.inf, 0.1], dtype=np.float32)
    allowed = np.array([True, True, True, False, True, True])
    assert top_k(s, 10, allowed).tolist() == [0, 2, 5]
    assert top_k(s, 2, allowed).tolist() == [0, 2]


def test_top_k_with_everything_masked_is_empty(matrix):
    s = dense_scores(matrix, unit(1, 0, 0))
    assert top_k(s, 3, np.zeros(5, bool)).tolist() == []
    assert top_k(np.zeros(0, np.float32), 3).tolist() == []


def test_rrf_values():
    fused = rrf([[10, 20, 30], [20, 40]], k=60)
    assert fused[10] == pytest.approx(1 / 61)
    assert fused[20] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[30] == pytest.approx(1 / 63)
    assert fused[40] == pytest.approx(1 / 62)
    weighted = rrf([[1], [1]], k=60, weights=[2.0, 0.5])
    assert weighted[1] == pytest.approx(2.5 / 61)


def test_exact_names():
    assert exact_names("What is MOVER_STOP_TIMEOUT for?") == ["MOVER_STOP_TIMEOUT"]
    assert exact_names("Can --force-delete get around it?") == ["--force-delete"]
    assert exact_names("set `auth.session_length` to a week") == ["auth.session_length",
                                                                  "session_length"]
    assert exact_names("how do backups run at night") == []
    assert exact_names("a well-known e-mail") == []
    # every kind at once, in pattern order, each name once
    assert exact_names("Does `--dry-run` read config.yml and MOVER_STOP_TIMEOUT?") == [
        "--dry-run", "MOVER_STOP_TIMEOUT", "config.yml"]


def test_lexical_text_keeps_names_and_drops_question_words():
    assert lexical_text('What "stops" rsync AND the mover?') == "stops rsync mover"
    assert lexical_text("Can --force-delete get around it?") == "force-delete around"
    assert lexical_text("what is MOVER_STOP_TIMEOUT") == "MOVER_STOP_TIMEOUT"
    assert lexical_text("the of a") == ""


def test_lexical_text_drops_contractions_that_are_stop_words_whole():
    # their pieces ("won", "doesn", "aren") would be matched, and missed, as question words
    assert lexical_text("Why won't the UPS handler shut down?") == "UPS handler shut"
    assert lexical_text("What if it doesn’t come back, and aren't they?") == "come back"
    # any other word with an apostrophe splits as before
    assert lexical_text("the mirror's limit per O'Reilly") == "mirror limit per Reilly"


def test_contractions_are_found_where_a_plain_search_finds_them():
    # lexical_text's pattern is tried from word starts only and takes letters possessively
    import re

    from varaverk.text import _CONTRACTION

    plain = re.compile(r"\w+['\u2019]\w+")
    questions = _routing_questions() + [
        "doesn't won't", "ab'cd'ef", "O'Reilly's mirror's", "’tis", "rock'n'roll", "a''b",
        "_a'_b", "é'ü naïve'word", "can't-stop", "foo' bar 'baz", "it's'", "1'2'3'4"]
    for question in questions:
        assert ([m.span() for m in _CONTRACTION.finditer(question)]
                == [m.span() for m in plain.finditer(question)]), question


def test_lexical_text_words_are_their_own_fts_terms():
    # search takes the words of lexical_text as its fts_terms without a second pass
    from varaverk.text import fts_terms

    questions = _routing_questions() + [
        "_leading or trailing_ underscores, 'quotes', (brackets) and a-b-c", "x y z",
        "Straße über ½ ²nd --flag -n \u0130stanbul ǅemal ...", "the of a", "", "a-",
        "Why? Why! why... WHY", "auth.session_length config.yml k8s/helm C++ C#"]
    for question in questions:
        text = lexical_text(question)
        assert fts_terms(text) == text.split(), question


def test_normalise_title():
    assert normalise_title("`environment_vars`") == "environment_vars"
    assert normalise_title("MOVER_STOP_TIMEOUT") == "mover_stop_timeout"
    assert normalise_title("Full configuration reference:") == "full configuration reference"


@pytest.mark.parametrize("question,shape", [
    ("What is the default value of MIRROR_MAX_DELETE_PCT?", "configuration"),
    ("What is the default snapshot retention?", "configuration"),
    ("How long does the updater wait for a container to become healthy?", "configuration"),
    ("What prevents the cleanup from removing a torrent that was never imported?", "safeguard"),
    ("What stops rsync and the mover running at once?", "safeguard"),
    ("Is there a flag to put yesterday's list back?", "runtime_mode"),
    ("Why does the log rotator copy and truncate instead of renaming?", "design"),
    ("How does the snapshot job decide which snapshots to throw away?", "operational_model"),
    ("What is the scan queue?", "definitional"),
    ("The power went out. What should I do?", "procedure"),
])
def test_routing_table(question, shape):
    r = route(question)
    assert r.shape == shape
    assert r.section == SHAPE_SECTIONS[shape]


def test_routing_sections_match_the_header_convention():
    assert SHAPE_SECTIONS == {
        "configuration": "CONFIGURATION", "safeguard": "OPERATIONAL SAFEGUARDS",
        "runtime_mode": "RUNTIME MODES", "design": "DESIGN PRINCIPLES",
        "operational_model": "OPERATIONAL MODEL", "definitional": "PURPOSE",
        "procedure": None, "other": None,
    }
    assert route("hello there").section is None


def _routing_questions() -> list[str]:
    """Questions worded as users word them: the harborlab dev set plus variants that change
    case and spacing (what a cue's triggers must survive)."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "harborlab-qa-dev.jsonl"
    base = [json.loads(line)["question"] for line in fixture.read_text().splitlines() if line]
    base += ["WHAT IS THE DEFAULT TIMEOUT?", "why  not rsync?", "Is there a --dry-run?",
             "How do I fix it step by step", "what's MOVER_STOP_TIMEOUT for",
             "Can I roll back? What happens if the disk fills?", "Could it wipe my data?"]
    return base + [q.upper() for q in base] + [q.title() for q in base]


def test_routing_tries_a_cue_whenever_its_pattern_could_match():
    import re

    from varaverk.retrieval.routing import _CUES

    checked = 0
    for question in _routing_questions():
        for shape, cues in _CUES.items():
            for pattern, _, triggers in cues:
                if re.search(pattern, question, re.IGNORECASE):
                    checked += 1
                    assert any(t in question.lower() for t in triggers), (shape, pattern,
                                                                        question)
    assert checked > 200


def test_routing_tries_exactly_the_cues_whose_triggers_occur():
    # route's one scan for every trigger stands for a search per cue of its triggers
    from varaverk.retrieval.routing import _CUE_LIST, _CUES, _ORDER, _triggered

    cues = [(shape, triggers) for shape in _ORDER for _, _, triggers in _CUES[shape]]
    overlapping = ["how do i fix the defaults", "what happens when it fails", "--dry-run mode",
                   "can i roll back settings", "x_y", "", "minimum of most", "why why not"]
    for question in _routing_questions() + overlapping:
        lowered = question.lower()
        expected = [cue for cue, (_, triggers) in zip(_CUE_LIST, cues)
                    if any(t in lowered for t in triggers)]
        assert _triggered(lowered) == expected, question


def test_routing_folds_non_ascii_case_as_the_patterns_do():
    # IGNORECASE matches the long s with "s"; lower() does not fold it, so a non-ASCII
    # question is searched with every pattern.
    assert route("Is it \u017fafe to run it twice?").shape == "safeguard"
    assert route("Is it safe to run it twice?").shape == "safeguard"


def test_header_key_ranks_before_its_template_copy():
    from varaverk.retrieval.hits import Hit
    from varaverk.retrieval.ranking import prefer_headers
    from varaverk.index.store.stored_chunk import StoredChunk

    def hit(cid, kind, title, score):
        c = StoredChunk(path=f"{kind}.x", kind=kind, section="CONFIGURATION", title=title,
                        start_line=1, end_line=2, text="t", context="", id=cid)
        return Hit(c, score)
    hits = [hit(1, "template", "DKUPD_HEALTH_TIMEOUT", 0.9), hit(2, "header", "DKUPD_HEALTH_TIMEOUT", 0.5),
            hit(3, "template", "OTHER_KEY", 0.8)]
    prefer_headers(hits)
    order = [h.chunk.id for h in sorted(hits, key=lambda h: -h.score)]
    assert order == [3, 2, 1]
    assert hits[2].score == 0.8  # a template key with no header twin keeps its score


def test_top_k_equals_a_full_sort_on_both_selection_paths():
    # Below SAMPLE_FROM one partition, from it the threshold selection; both compared with a
    # plain stable sort of the allowed rows (rounded scores tie inside the selection).
    from varaverk.retrieval.scoring import SAMPLE_FROM
    rng = np.random.default_rng(7)
    for n in (SAMPLE_FROM // 3, 2 * SAMPLE_FROM):
        scores = rng.standard_normal(n).astype(np.float32)
        scores[::7] = np.round(scores[::7], 1)
        mask = rng.random(n) > 0.3
        allowed = np.flatnonzero(mask)
        for k in (1, 5, 50, 300):
            expected = allowed[np.argsort(-scores[allowed], kind="stable")][:k]
            assert top_k(scores, k, mask).tolist() == expected.tolist()
        assert top_k(scores, 50).tolist() == np.argsort(-scores, kind="stable")[:50].tolist()


def test_file_gains_favour_the_file_that_matches_as_a_whole():
    from varaverk.retrieval.fusion import file_gains
    # file 0: three moderate candidates; file 1: one look-alike scoring highest alone;
    # candidate 4 has no known file (-1)
    ids = [1, 2, 3, 4, 9, 10]
    scores = np.array([0.5, 0.4, 0.3, 0.45, 0.2, 0.6])
    files = np.array([0, 0, 0, -1, 2, 1])
    gain = dict(zip(ids, file_gains(scores, files, unit=1.0, top=3).tolist()))
    assert gain == {1: 1.0, 2: 1.0, 3: 1.0, 10: pytest.approx(0.6 / 1.2), 9: pytest.approx(0.2 / 1.2),
                    4: 0.0}   # no known file: no gain
    assert file_gains(np.array([0.0]), np.array([0]), unit=1.0) is None
    assert file_gains(np.zeros(0), np.zeros(0, dtype=np.int64), unit=1.0) is None


def test_label_bm25_scores_heading_trail_title_and_file_name():
    import math
    from varaverk.retrieval.lexical import LabelBm25
    labels = LabelBm25(["turn-howto Configuration", "backup Schedule nightly",
                        "sample_config Media Store max_upload_size"])
    rows, scores = labels.score("What is the upload size?")
    assert rows.tolist() == [2]
    # idf = ln((3 - 1 + 0.5) / (1 + 0.5) + 1); tf 1; |D| = 7 tokens, avgdl = 13/3
    norm = 1.2 * (1 - 0.75 + 0.75 * 7 / (13 / 3))
    one = math.log(2.5 / 1.5 + 1) * 2.2 / (1 + norm)
    assert scores.tolist() == [pytest.approx(2 * one)]   # "upload" and "size", once each
    rows, _ = labels.score("the Configuration of turn-howto")
    assert rows.tolist() == [0]
    assert labels.score("nothing matches here")[0].size == 0


def test_label_bm25_equals_bm25_summed_token_by_token():
    # Random labels with repeated tokens (tf > 1) and tokens shared by many rows, against
    # BM25 written out per query token (same float64 operations, so equal exactly).
    import math
    from varaverk.retrieval.lexical import LabelBm25
    rng = np.random.default_rng(11)
    vocab = ["media", "store", "upload", "size", "cache", "port", "turn", "howto", "x1"]
    labels = [" ".join(rng.choice(vocab, int(rng.integers(0, 6)))) for _ in range(60)]
    index = LabelBm25(labels)
    docs = [label.split() for label in labels]
    avg = sum(map(len, docs)) / len(docs)
    norm = [1.2 * (1 - 0.75 + 0.75 * len(d) / avg) for d in docs]
    query = "media size of the port, media again"
    expected = np.zeros(len(docs))
    for t in ("media", "size", "port"):
        holding = [i for i, d in enumerate(docs) if t in d]
        idf = math.log((len(docs) - len(holding) + 0.5) / (len(holding) + 0.5) + 1.0)
        for i in holding:
            tf = float(docs[i].count(t))
            expected[i] += idf * tf * (1.2 + 1) / (tf + norm[i])
    rows, scores = index.score(query)
    assert rows.tolist() == np.flatnonzero(expected).tolist()
    assert scores.tolist() == expected[rows].tolist()


def test_label_bm25_scores_one_two_or_no_tokens_as_summed_in_query_order():
    # A reference computed token by token over every row, in the order the query's distinct
    # tokens first occur: ties and near-ties between labels decide ranks, so equal means equal.
    import math
    from varaverk.retrieval.lexical import LabelBm25
    from varaverk.text import STOPWORDS
    rng = np.random.default_rng(5)
    words = ["backup", "restore", "port", "cache", "factor", "size", "nightly", "mover", "the"]
    labels = [" ".join(rng.choice(words, int(rng.integers(0, 6))).tolist()) for _ in range(60)]
    index = LabelBm25(labels)
    toks = [[t for t in label.split() if t not in STOPWORDS] for label in labels]
    avg = sum(map(len, toks)) / len(toks)
    for _ in range(30):
        query = " ".join(rng.choice(words + ["absent", "x"], int(rng.integers(1, 7))).tolist())
        acc = [0.0] * len(labels)
        for t in dict.fromkeys(query.split()):
            df = sum(t in row for row in toks)
            if t in STOPWORDS or len(t) < 2 or not df:
                continue
            idf = math.log((len(labels) - df + 0.5) / (df + 0.5) + 1.0)
            for r, row in enumerate(toks):
                if t in row:
                    tf = float(row.count(t))
                    norm = 1.2 * (1 - 0.75 + 0.75 * len(row) / avg)
                    acc[r] += idf * tf * (1.2 + 1) / (tf + norm)
        rows, scores = index.score(query)
        assert rows.tolist() == [r for r, v in enumerate(acc) if v]
        assert scores.tolist() == [v for v in acc if v]


def test_file_gains_equal_the_per_file_sums_of_the_best_candidates():
    from varaverk.retrieval.fusion import file_gains
    rng = np.random.default_rng(3)
    for _ in range(50):
        m = int(rng.integers(1, 40))
        # Rounded scores so that ties occur, across and within files; -1: no file.
        scores = np.round(rng.random(m), 1)
        files = rng.integers(-1, 6, m)
        gains = file_gains(scores, files, unit=0.5, top=3)
        totals = {f: sum(sorted(scores[files == f], reverse=True)[:3]) for f in set(files.tolist())
                  if f >= 0}
        best = max(totals.values(), default=0.0)
        if best <= 0:
            assert gains is None
            continue
        expected = [0.5 * totals[f] / best if f >= 0 else 0.0 for f in files.tolist()]
        assert gains.tolist() == expected
