"""The one definition of the chat profiles, read by the dock, the worker and the CLI.

A profile is a contract (its system prompt) plus what it may reach (its capabilities).
Capability checks happen in one place, ``Profile.require``: code that uses a capability calls
it first, so a profile that does not hold a capability cannot reach it whatever the user asks.

System prompts are plain files in ``AI/varaverk/answering/system_prompts/<name>.md`` that an operator may edit
without touching code; they are read at each use, so an edit applies to the next turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from varaverk import exitcodes
from varaverk.errors import VaraverkError

PROMPTS_DIR = Path(__file__).resolve().parent / "system_prompts"

# Every capability that exists. A profile holds a subset.
RETRIEVAL = "retrieval"
SCOPED_LOG = "scoped_log"
LIVE_HEALTH = "live_health"
RUN_EVIDENCE = "run_evidence"
INCIDENTS = "incidents"
CONF_LOOKUP = "conf_lookup"
BUG_FILING = "bug_filing"
CODE_SCANNING = "code_scanning"
# Long-term memory (varaverk.memory): what the operator said in earlier conversations.
MEMORY = "memory"
CAPABILITIES = (RETRIEVAL, SCOPED_LOG, LIVE_HEALTH, RUN_EVIDENCE, INCIDENTS, CONF_LOOKUP,
                BUG_FILING, CODE_SCANNING, MEMORY)


class CapabilityDenied(PermissionError):
    """A profile asked for a capability it does not hold."""


class UnknownProfile(VaraverkError, KeyError):
    """No profile of that name; ``str(exc)`` lists the valid names."""

    exit_code = exitcodes.USAGE
    kind = "profile"


@dataclass(frozen=True)
class Profile:
    """One chat profile.

    Attributes:
        name: the id used in URLs, files and ledger rows (``varaverk``).
        label: what the page shows.
        history_turns: how many earlier user+assistant turns go into the prompt.
        capabilities: the capabilities this profile holds (a frozenset of names above).
        escalates_to: the profile a question is handed to when retrieval finds confident
            matches (only ``chat`` escalates, to ``varaverk``); None for the others.
        source_types: the types of source (``named_sources``: repo, notes, chats) it
            retrieves from unless the request names a source.
        notes_escalation: where ``chat`` hands a question whose best match is in the
            operator's notes or chats (``notes``); None: always ``escalates_to``.
    """

    name: str
    label: str
    history_turns: int
    capabilities: frozenset[str]
    escalates_to: str | None = None
    source_types: tuple[str, ...] = ("repo",)
    notes_escalation: str | None = None

    @property
    def retrieves(self) -> bool:
        """Whether this profile searches the index for every question."""
        return RETRIEVAL in self.capabilities

    def holds(self, capability: str) -> bool:
        """True when the profile holds ``capability``."""
        return capability in self.capabilities

    def require(self, capability: str) -> None:
        """Raise CapabilityDenied unless this profile holds ``capability``: the one gate."""
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown capability {capability!r}")
        if capability not in self.capabilities:
            raise CapabilityDenied(f"profile {self.name!r} does not hold {capability!r}")

    @property
    def prompt_path(self) -> Path:
        """The editable system prompt file of this profile."""
        return PROMPTS_DIR / f"{self.name}.md"

    def system_prompt(self) -> str:
        """The system prompt, read from its file at each call (edits apply at once)."""
        return self.prompt_path.read_text(encoding="utf-8").strip()


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("varaverk", "Varaverk (answers from the docs)", 3, frozenset({RETRIEVAL})),
        # Nothing on this host, deliberately: a guarantee, not an oversight; only memory (what
        # the operator told it, when AI_MEMORY_ENABLED). It may be *handed* to varaverk when
        # the index holds confident matches; it never retrieves itself.
        Profile("chat", "Chat (general, no access)", 8, frozenset({MEMORY}),
                escalates_to="varaverk",
                source_types=("repo", "notes", "chats"), notes_escalation="notes"),
        Profile("code", "Code (drafts shell, scanned)", 4, frozenset({CODE_SCANNING})),
        Profile("troubleshoot", "Troubleshoot (log first)", 2,
                frozenset({SCOPED_LOG, RETRIEVAL, LIVE_HEALTH, RUN_EVIDENCE, INCIDENTS,
                           CONF_LOOKUP, BUG_FILING})),
        # The operator's own notes and chats (AI_SOURCES of type notes and chats), with the
        # same citation and "not covered" rules as varaverk.
        Profile("notes", "Notes (answers from your notes and chats)", 3,
                frozenset({RETRIEVAL, MEMORY}), source_types=("notes", "chats")),
    )
}
DEFAULT_PROFILE = "varaverk"


def get_profile(name: str | None) -> Profile:
    """The profile called ``name`` (None: the default). Raises UnknownProfile."""
    key = name or DEFAULT_PROFILE
    try:
        return PROFILES[key]
    except KeyError:
        raise UnknownProfile(f"unknown profile {key!r}; choose one of {', '.join(PROFILES)}") from None
