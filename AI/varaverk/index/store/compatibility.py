"""Embedder compatibility, the one home: whether vectors made by an embedder may be compared
with, or stored beside, the vectors of an index.

Search asks before ranking, a refresh before embedding and for each vector's length, and
``Index.write`` before storing. The index records its embedder in ``meta``
(``embed_backend``, ``embed_model``, ``embed_dimension``) and the names the settings gave
(``config_backend``, ``config_model``); see ``varaverk.index.store.schema``.
"""

from __future__ import annotations

from varaverk.index.store.errors import IndexMismatch


def describe_embedder(backend: str, model: str, dimension: int | str | None) -> str:
    """``backend/model (N dims)`` as messages show it."""
    dims = f" ({dimension} dims)" if dimension not in (None, "", 0, "0") else ""
    return f"{backend}/{model}{dims}"


def _mismatch_message(stored: dict, backend: str, model: str, dimension: int | None) -> str:
    """The refusal of another embedder: what the index was built with, what this run uses,
    and what to do."""
    built = describe_embedder(stored.get("embed_backend", "?"), stored.get("embed_model", "?"),
                              stored.get("embed_dimension"))
    now = describe_embedder(backend, model, dimension)
    return (f"index built with {built}; this run uses {now} "
            f"— run ai-index --force to rebuild")


def check_compatible(meta: dict, backend: str, model: str, dimension: int | None = None) -> None:
    """Raise IndexMismatch unless the vectors of the index whose ``meta`` this is come from
    ``backend``/``model`` (and ``dimension``, when given and recorded). An index without
    vectors is compatible with anything.

    The message (``_mismatch_message``) names both embedders and the fix.
    """
    if not meta.get("embed_backend"):
        return
    same = meta.get("embed_backend") == backend and meta.get("embed_model") == model
    if same and dimension is not None and meta.get("embed_dimension"):
        same = int(meta["embed_dimension"]) == int(dimension)
    if not same:
        raise IndexMismatch(_mismatch_message(meta, backend, model, dimension))


def names_other_embedder(meta: dict, backend: str, model: str) -> bool:
    """Whether settings naming ``backend``/``model`` (``AI_EMBED_BACKEND``/``AI_EMBED_MODEL``
    as written: an empty model is the backend's default) differ from those recorded by the run
    that last wrote this index, while it holds vectors.

    The cheap form of ``check_compatible``, decided without building an embedder (so the no-op
    refresh and ``--status`` build none); True means the real check must run before any work.
    The recorded names are written by ``Index.write`` from ``IndexChanges.configured``.
    """
    return bool(meta.get("embed_backend")) and \
        (meta.get("config_backend"), meta.get("config_model")) != (backend, model)


CHUNK_CONTEXT_META = "chunk_context"


def chunk_context(settings) -> str:
    """The ``chunk_context`` meta value these settings ask for (``AI_CONTEXTUAL_CHUNKS``):
    ``title`` (``varaverk.index.contextual_chunks``) or ``off``."""
    return "title" if settings.ai_contextual_chunks else "off"


def check_chunk_context(meta: dict, wanted: str) -> None:
    """Raise IndexMismatch when the index holds vectors made with another chunk context
    (``title``: contextual chunks, ``off``: none; an index from before the setting is
    ``off``) than ``wanted``: the vectors would mix two kinds of embedded text."""
    stored = meta.get(CHUNK_CONTEXT_META, "off")
    if meta.get("embed_backend") and stored != wanted:
        setting = "true" if wanted != "off" else "false"
        raise IndexMismatch(f"index built with chunk context {stored!r}; AI_CONTEXTUAL_CHUNKS="
                            f"{setting} asks for {wanted!r} — run ai-index --force to rebuild")
