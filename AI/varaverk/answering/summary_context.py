"""Summaries in answers: when a question's results span more documents than fit the context,
the documents after the first few reach the model as their stored summaries (or, with
``AI_SUMMARIES=query``, as summaries made for the question:
``varaverk.answering.query_focused_summary``, in a section of their own, ``question_section``).

Documents are ranked by their best hit. The first ``AI_SUMMARY_VERBATIM_DOCS`` always go as
verbatim excerpts; every later one with a current summary goes as that summary
(``summary_block``, at most half the context), under its citation label ``[path]``, in a
section that says they are summaries, not the documents' words; the excerpts are packed into
the rest (``varaverk.answering.answer``; ``varaverk.answering.prompts.build_messages`` marks
them verbatim). A summary never stands for text that ``--search`` prints or a source shows:
it only saves room in the prompt, so that a small context window still sees every document
search found.
"""

from __future__ import annotations

from typing import Mapping, Sequence

SUMMARIES_HEADING = ("Document summaries (summaries of whole documents, not their words: "
                     "cite them by their label; an exact value must come from a verbatim "
                     "excerpt):")
QUESTION_SUMMARIES_HEADING = (
    "Document summaries made for this question (written by a model from the passages of "
    "each document that matched the question, not the documents' words: cite them by their "
    "label; an exact value must come from a verbatim excerpt):")


def later_documents(hit_paths: Sequence[str], verbatim_docs: int) -> list[str]:
    """The documents of ``hit_paths`` (best hit first) after the first ``verbatim_docs``,
    each once, in rank order."""
    return list(dict.fromkeys(hit_paths))[verbatim_docs:]


def summary_block(paths: Sequence[str], summaries: Mapping[str, str], budget_chars: int,
                  heading: str = SUMMARIES_HEADING) -> tuple[str, list[str]]:
    """``(section, paths included)``: ``heading``, then ``[path]`` and the summary text of
    each of ``paths`` that has one in ``summaries`` (``path -> text``), in order, whole
    summaries only, within ``budget_chars``; ``("", [])`` when none fits."""
    blocks: list[str] = []
    included: list[str] = []
    total = len(heading)
    for path in paths:
        if path not in summaries:
            continue
        block = f"[{path}]\n{summaries[path].strip()}"
        if total + len(block) + 2 > budget_chars:
            break
        blocks.append(block)
        included.append(path)
        total += len(block) + 2
    if not blocks:
        return "", []
    return "\n\n".join([heading, *blocks]), included


def question_section(paths: Sequence[str], for_question: Mapping[str, str],
                     stored: Mapping[str, str], budget_chars: int) -> tuple[str, list[str]]:
    """``(section, paths included)`` for ``AI_SUMMARIES=query``: the summaries made for the
    question under ``QUESTION_SUMMARIES_HEADING``, then the other documents' ``stored``
    summaries under ``SUMMARIES_HEADING``, each in ``paths`` order, together within
    ``budget_chars`` (``path -> text`` both)."""
    made, made_paths = summary_block(paths, for_question, budget_chars,
                                     QUESTION_SUMMARIES_HEADING)
    rest = [p for p in paths if p not in set(made_paths)]
    left = budget_chars - (len(made) + 2 if made else 0)
    other, other_paths = summary_block(rest, stored, left)
    return "\n\n".join(s for s in (made, other) if s), made_paths + other_paths
