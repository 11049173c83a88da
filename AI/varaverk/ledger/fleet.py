"""The fleet: partner hosts' ledgers, their cache files and the fleet's totals.

``fleet_totals`` combines this host's ledger with the partner ledgers ``ai-token-sync`` cached
under ``AI_TOKEN_CACHE_DIR``; a file only ever counts the rows of its own host. The hosts conf
(``read_hosts_conf``) names each partner's slot and dock URL.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

from dotenv import dotenv_values

from varaverk.ledger.rows import LedgerRow
from varaverk.ledger.storage import read_rows
from varaverk.ledger.totals import Totals, totals

CACHE_SUFFIX = ".tokens.db"
_SLOT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def valid_slot(name: str) -> bool:
    """True when ``name`` can be a slot: letters, digits, ``_``, ``.``, ``-`` (a safe file name)."""
    return bool(_SLOT_RE.fullmatch(name)) and ".." not in name


def read_hosts_conf(path: str | os.PathLike) -> dict[str, str]:
    """The fleet's hosts conf: slot name -> partner dock base URL, in file order.

    The file is ``KEY=VALUE`` lines parsed by python-dotenv without interpolation; the slot
    name must equal the partner's ``AI_HOST_NAME`` (its ledger's host column). A missing file
    is an empty fleet. Raises ValueError naming the file for a slot that is not a safe file
    name or a value that is not an http(s) URL.
    """
    path = Path(path)
    if not path.is_file():
        return {}
    hosts: dict[str, str] = {}
    for slot, url in dotenv_values(path, interpolate=False).items():
        url = (url or "").strip()
        if not valid_slot(slot):
            raise ValueError(f"{path}: slot name {slot!r} must be letters, digits, '_', '.', '-'")
        if not (url.startswith("http://") or url.startswith("https://")):
            raise ValueError(f"{path}: {slot}: expected an http:// or https:// URL, got {url!r}")
        hosts[slot] = url.rstrip("/")
    return hosts


def cache_path(cache_dir: str | os.PathLike, slot: str) -> Path:
    """Where ``ai-token-sync`` keeps a partner's ledger: ``<cache_dir>/<slot>.tokens.db``."""
    if not valid_slot(slot):
        raise ValueError(f"invalid slot name {slot!r}")
    return Path(cache_dir) / f"{slot}{CACHE_SUFFIX}"


def partner_slots(settings) -> list[str]:
    """The partner slots of the hosts conf, without this host's own slot.

    One hosts conf can be shared by the whole fleet: each host skips its own name.
    """
    return [slot for slot in read_hosts_conf(settings.hosts_conf_path)
            if slot != settings.ai_host_name]


def fleet_totals(settings, now: dt.datetime | None = None) -> Totals:
    """Totals over this host's ledger and every cached partner ledger.

    Args:
        settings: ``varaverk.config.Settings`` (``token_db_path``, ``ai_host_name``,
            ``ai_token_cache_dir``, ``hosts_conf_path``).
        now: the reference moment for today / last 7 days (default now).

    Each file counts only rows of its own host: this host's ledger its ``AI_HOST_NAME``, a
    partner cache its slot. A partner slot without a cache file is listed in
    ``not_collected``, never counted as zero. Raises ValueError for an invalid hosts conf.
    """
    own = settings.ai_host_name
    own_rows, problems = read_rows(settings.token_db_path, host=own)
    rows_by_host: dict[str, list[LedgerRow]] = {own: own_rows}
    files = {own: str(settings.token_db_path)}
    missing: list[str] = []
    for slot in partner_slots(settings):
        path = cache_path(settings.ai_token_cache_dir, slot)
        if not path.is_file():
            missing.append(slot)
            continue
        rows, slot_problems = read_rows(path, host=slot)
        rows_by_host[slot] = rows
        files[slot] = str(path)
        problems.extend(slot_problems)
    result = totals(rows_by_host, now)
    result.not_collected = missing
    result.problems = problems
    result.files = files
    return result
