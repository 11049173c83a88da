"""The chat client the settings ask for (``AI_GEN_BACKEND``): Ollama or OpenAI-compatible.

``make_chat_client(settings).stream(messages)`` yields ``StreamEvent``s as the model writes:
"thinking" and "content" deltas, then exactly one "done" event whose ``completion`` holds the
whole answer, the reasoning kept apart, the token counts and the timings.
"""

from __future__ import annotations

from varaverk.answering.generation.ollama import OllamaChatClient
from varaverk.answering.generation.openai_compatible import OpenAIChatClient
from varaverk.answering.generation.streaming import ChatClient
from varaverk.config import ConfigError, Settings


def make_chat_client(settings: Settings) -> ChatClient:
    """The chat client ``AI_GEN_BACKEND`` asks for; contacts nothing until ``stream``.

    Raises ConfigError for an unknown backend or an empty ``AI_GEN_MODEL``.
    """
    model = settings.ai_gen_model.strip()
    if not model:
        raise ConfigError("AI_GEN_MODEL: a generation model name is required")
    if settings.ai_gen_backend == "ollama":
        return OllamaChatClient(settings.ai_ollama_hosts, model, settings.ai_gen_num_ctx,
                                settings.ai_http_timeout)
    if settings.ai_gen_backend == "openai":
        return OpenAIChatClient(settings.ai_openai_base_url, model, settings.ai_openai_api_key,
                                settings.ai_http_timeout)
    raise ConfigError(f"AI_GEN_BACKEND: unknown backend {settings.ai_gen_backend!r}")
