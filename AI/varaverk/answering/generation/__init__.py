"""Streaming chat generation: the Ollama and OpenAI-compatible protocols and what they yield."""
