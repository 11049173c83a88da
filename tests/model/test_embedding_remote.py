"""Ollama and OpenAI-compatible embedding against the real test server (B18, B19, ordering, keys)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from tests.support.model_server import NAN_ERROR, TOO_LONG_ERROR, embed_vector
from varaverk.config import ConfigError, Settings
from varaverk.embedding import (EmbeddingError, EmbeddingUnavailable, OllamaEmbedder,
                                OpenAIEmbedder, make_embedder)


def _unit(v):
    v = np.asarray(v, dtype=np.float64)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _assert_clean(vec, dim):
    assert vec.dtype == np.float32 and vec.shape == (dim,)
    assert np.all(np.isfinite(vec))
    assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5


def test_ollama_batched_and_normalised(model_server):
    emb = OllamaEmbedder([model_server.base_url], "nomic-embed-text", batch_size=2)
    texts = ["rsync mirror", "mover stop timeout", "backup schedule nightly"]
    result = emb.embed(texts)
    assert result.errors == {}
    for text, vec in zip(texts, result.vectors):
        _assert_clean(vec, 64)
        np.testing.assert_allclose(vec, _unit(embed_vector(text, 64)), rtol=1e-6)
    calls = model_server.requests_to("/api/embed")
    assert [c.json["input"] for c in calls] == [texts[:2], texts[2:]]
    assert calls[0].json["truncate"] is False
    assert calls[0].json["options"] == {"num_ctx": 2048}
    assert emb.dimension == 64 and emb.max_tokens == 2048


def test_b19a_nan_batch_retried_one_at_a_time(model_server):
    emb = OllamaEmbedder([model_server.base_url], "bge-m3")
    result = emb.embed(["first chunk", "the NaN! chunk", "third chunk"])
    assert result.vectors[0] is not None and result.vectors[2] is not None
    assert result.vectors[1] is None
    assert set(result.errors) == {1}
    assert NAN_ERROR in result.errors[1].message and not result.errors[1].too_long
    inputs = [c.json["input"] for c in model_server.requests_to("/api/embed")]
    assert inputs == [["first chunk", "the NaN! chunk", "third chunk"],
                      ["first chunk"], ["the NaN! chunk"], ["third chunk"]]


def test_b18_too_long_item_marked_for_splitting(model_server):
    model_server.max_input_chars = 100
    emb = OllamaEmbedder([model_server.base_url], "nomic-embed-text")
    long_text = "#   Deploys the app.\n# " + "=" * 12000
    result = emb.embed(["short one", long_text])
    assert result.vectors[0] is not None and result.vectors[1] is None
    assert result.errors[1].too_long is True
    assert TOO_LONG_ERROR in result.errors[1].message


def test_ollama_legacy_fallback_normalises(model_server):
    model_server.disabled_paths = {"/api/embed"}
    emb = OllamaEmbedder([model_server.base_url], "all-minilm")
    result = emb.embed(["alpha beta", "gamma"])
    assert result.errors == {}
    for text, vec in zip(["alpha beta", "gamma"], result.vectors):
        _assert_clean(vec, 64)
        np.testing.assert_allclose(vec, _unit(embed_vector(text, 64)), rtol=1e-6)
    assert [c.json["prompt"] for c in model_server.requests_to("/api/embeddings")] == \
        ["alpha beta", "gamma"]
    assert emb.max_tokens == 256  # all-minilm's known context
    emb.embed(["delta"])  # remembered: no second try of /api/embed
    assert len(model_server.requests_to("/api/embed")) == 1


def test_zero_vector_never_returned(model_server):
    emb = OllamaEmbedder([model_server.base_url], "m")
    result = emb.embed(["words here", "!!! ---"])  # no word characters: the zero vector
    assert result.vectors[1] is None
    assert "all-zero" in result.errors[1].message
    assert result.vectors[0] is not None


def test_unknown_model_stops_the_run(model_server):
    model_server.known_models = {"nomic-embed-text"}
    emb = OllamaEmbedder([model_server.base_url], "mxbai-embed-large")
    with pytest.raises(EmbeddingError, match="not found, try pulling"):
        emb.embed(["x"])


def test_ollama_no_server_is_unavailable(dead_url):
    emb = OllamaEmbedder([dead_url], "nomic-embed-text")
    with pytest.raises(EmbeddingUnavailable, match=dead_url):
        emb.embed(["x"])


def test_ollama_failover_when_chosen_host_dies(model_server):
    from tests.support.model_server import ModelServer

    first = ModelServer().start()
    emb = OllamaEmbedder([first.base_url, model_server.base_url], "m")
    assert emb.embed(["one"]).errors == {}
    first.stop()
    assert emb.embed(["two"]).errors == {}
    assert [c.json["input"] for c in model_server.requests_to("/api/embed")] == [["two"]]


def test_openai_placed_by_index_and_normalised(model_server):
    assert model_server.openai_shuffle and model_server.openai_unnormalised
    emb = OpenAIEmbedder(model_server.openai_base_url, "nomic-embed-text")
    texts = ["apple pie", "rsync mirror", "cron schedule"]
    result = emb.embed(texts)
    for text, vec in zip(texts, result.vectors):
        _assert_clean(vec, 64)
        np.testing.assert_allclose(vec, _unit(embed_vector(text, 64)), rtol=1e-6)
    assert model_server.requests_to("/v1/embeddings")[0].json["encoding_format"] == "float"


def test_openai_base64_vectors_are_decoded(model_server):
    # Servers that default to encoding_format=base64 answer little-endian float32 bytes.
    model_server.openai_base64 = True
    emb = OpenAIEmbedder(model_server.openai_base_url, "nomic-embed-text")
    texts = ["apple pie", "rsync mirror"]
    result = emb.embed(texts)
    assert result.errors == {}
    for text, vec in zip(texts, result.vectors):
        _assert_clean(vec, 64)
        np.testing.assert_allclose(vec, _unit(embed_vector(text, 64)), rtol=1e-5)


@pytest.mark.parametrize("bad, message", [("not base64!", "neither numbers nor base64"),
                                          ("AAAAAAA=", "5 bytes"), ("", "0 bytes")])
def test_malformed_base64_vectors_are_refused(bad, message):
    from varaverk.embedding import _ItemsFailed, decode_base64_vector

    with pytest.raises(_ItemsFailed, match=message):
        decode_base64_vector(bad)


def test_b19b_literal_nan_rejected(model_server):
    emb = OpenAIEmbedder(model_server.openai_base_url, "m")
    result = emb.embed(["good text", "bad NaN! text"])
    assert result.vectors[0] is not None
    assert result.vectors[1] is None and "NaN" in result.errors[1].message


def test_b19b_exact_body_rejected():
    from varaverk.embedding import _strict_json

    body = b'{"object":"list","data":[{"object":"embedding","index":0,"embedding":[NaN,0.12,-0.03]}]}'
    with pytest.raises(ValueError, match="NaN"):
        _strict_json(body)


def test_openai_bearer_sent_never_logged(model_server, caplog):
    secret = "sk-test-0123456789"
    model_server.api_key = secret
    settings = Settings(ai_embed_backend="openai", ai_openai_base_url=model_server.openai_base_url,
                        ai_openai_api_key=secret)
    caplog.set_level(logging.DEBUG)
    emb = make_embedder(settings)
    assert emb.embed(["hello"]).errors == {}
    assert model_server.requests[-1].headers["authorization"] == f"Bearer {secret}"
    assert secret not in repr(emb) and secret not in repr(settings)
    assert secret not in caplog.text


def test_openai_wrong_key_stops_the_run(model_server):
    model_server.api_key = "right"
    emb = OpenAIEmbedder(model_server.openai_base_url, "m", api_key="wrong")
    with pytest.raises(EmbeddingError, match="HTTP 401"):
        emb.embed(["a", "b"])


def test_openai_unreachable(dead_url):
    with pytest.raises(EmbeddingUnavailable):
        OpenAIEmbedder(dead_url + "/v1", "m").embed(["x"])


def test_make_embedder_defaults(model_server):
    ollama = make_embedder(Settings(ai_embed_backend="ollama",
                                    ai_ollama_hosts=(model_server.base_url,)))
    assert (ollama.backend, ollama.model, ollama.max_tokens) == ("ollama", "nomic-embed-text", 2048)
    assert ollama.count_tokens("=" * 300) == 300
    openai = make_embedder(Settings(ai_embed_backend="openai", ai_embed_model="custom"))
    assert (openai.backend, openai.model, openai.max_tokens) == ("openai", "custom", 512)
    local = make_embedder(Settings())
    assert (local.backend, local.model, local.max_tokens) == ("local", "all-MiniLM-L6-v2-int8", 256)
    with pytest.raises(ConfigError, match="AI_EMBED_MODEL"):
        make_embedder(Settings(ai_embed_model="nomic-embed-text"))


def test_a_zero_vector_in_a_batch_costs_only_that_item(model_server):
    emb = OllamaEmbedder([model_server.base_url], "m")
    result = emb.embed(["alpha", "---", "beta"])
    assert [v is None for v in result.vectors] == [False, True, False]
    assert len(model_server.requests_to("/api/embed")) == 1  # no retry needed
