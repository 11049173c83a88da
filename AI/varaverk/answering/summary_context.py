"""Summaries in answers: when a question's results span many documents, the documents after
the first few reach the model as their stored summaries instead of their excerpts.

``split_context(groups, hit_paths, verbatim_docs, summaries)`` keeps the context groups
(``Retriever.expand`` output, best first) of the first ``verbatim_docs`` documents and of any
later document without a current summary, and names the later documents that have one.
``summary_block`` lays those out for the prompt, each under its citation label ``[path]``, in a
section that says they are summaries, not the documents' words
(``varaverk.answering.prompts.build_messages``). A summary never stands for text that
``--search`` prints or that a source shows: it only saves room in the prompt, so that a small
context window still sees every document search found.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

SUMMARIES_HEADING = ("Document summaries (summaries of whole documents, not their words: "
                     "cite them by their label; an exact value must come from a verbatim "
                     "excerpt):")


def split_context(groups: Sequence[Sequence[Any]], hit_paths: Sequence[str], verbatim_docs: int,
                  summaries: Mapping[str, Any]) -> tuple[list[Sequence[Any]], list[str]]:
    """``(verbatim groups, summarised paths)``.

    Documents are ranked by their first hit (``hit_paths``, best first; a path only a group
    holds comes after). The groups of the first ``verbatim_docs`` documents stay verbatim, and
    so do those of a later document without a current summary in ``summaries``
    (``path -> Summary``); every later document that has one goes as its summary, in rank
    order, also one whose excerpts did not fit the context at all.
    """
    order = list(dict.fromkeys([*hit_paths, *(c.path for g in groups for c in g)]))
    first = set(order[:verbatim_docs])
    verbatim = [g for g in groups
                if {c.path for c in g} & first or any(c.path not in summaries for c in g)]
    kept = {c.path for g in verbatim for c in g}
    summarised = [p for p in order[verbatim_docs:] if p in summaries and p not in kept]
    return verbatim, summarised


def summary_block(paths: Sequence[str], summaries: Mapping[str, Any], budget_chars: int) -> str:
    """The summaries section for ``paths`` within ``budget_chars`` ("" when none fits): the
    heading, then ``[path]`` and the summary text of each, in order; whole summaries only."""
    blocks: list[str] = []
    total = len(SUMMARIES_HEADING)
    for path in paths:
        block = f"[{path}]\n{summaries[path].text.strip()}"
        if total + len(block) + 2 > budget_chars:
            break
        blocks.append(block)
        total += len(block) + 2
    return "\n\n".join([SUMMARIES_HEADING, *blocks]) if blocks else ""
