"""A small operator's notes corpus written for these tests: an Obsidian vault, an org-roam
folder and two chat exports, each made a real git work tree with an ignored and an untracked
private note (canaries that must never be read).

The text is ours (no third-party notes). ``notes-qa.jsonl`` beside this file asks questions
about it in the ../shared question-set format.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.repos import make_repo

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "notes-qa.jsonl"
CANARY = "CANARY-PRIVATE-7Q2X"

VAULT = {
    "Backups/Restic.md": """---
title: Restic backups
tags: [backup, homelab]
aliases: [snapshot policy, offsite copies]
---
# Restic backups

The NAS pushes encrypted snapshots to the Hetzner storage box every night at 02:30.
See [[Storage box]] for the account and ![[retention-diagram.png]] for the picture.

## Retention
Keep 7 daily, 4 weekly and 12 monthly snapshots; `restic forget --prune` runs on Sundays.
#retention

## Restore drill
Once a quarter restore one folder into /tmp/restore-test and compare checksums with
[[Checksums|the checksum note]].

> [!warning] Password
> The repository password lives in the password manager under "restic-nas", never in a note.
""",
    "Backups/Storage box.md": """---
tags: backup
---
# Storage box

The offsite target is a Hetzner storage box, account u123456, reached over SSH on port 23.
Quota is 1 TB; the alert fires at 80 percent.
""",
    "Backups/Checksums.md": """# Checksums

Compare restored files with `b3sum` (BLAKE3) because it is fast on the old Atom board.
""",
    "Network/Pi-hole.md": """---
title: Pi-hole DNS
aliases: [ad blocker, dns sinkhole]
tags: [network]
---
# Pi-hole DNS

Pi-hole runs on the Raspberry Pi 4 at 192.168.10.3 and answers DNS for the whole LAN.
#dns is handed out by the router's DHCP as the only resolver.

## Upstream
Upstream resolvers are Quad9 over DNS-over-TLS through unbound on port 5335.

## Blocklists
Gravity updates every Sunday at 04:00; the allowlist holds the banking app's domains.
""",
    "Network/VLANs.md": """# VLANs

| VLAN | purpose |
|------|---------|
| 10 | trusted devices |
| 20 | IoT, no route to VLAN 10 |
| 30 | guests, internet only |

The IoT VLAN exists because the smart plugs phone home; see [[Pi-hole]] for their DNS.
""",
    "Power/UPS.md": """# UPS

The Eaton UPS gives the rack about 25 minutes; NUT shuts the NAS down at 40 percent battery.
""",
    ".gitignore": "private/\n",
}
VAULT_IGNORED = {"private/diary.md": f"# Diary\n\n{CANARY} ignored vault note\n"}
VAULT_UNTRACKED = {"Drafts/untracked.md": f"# Draft\n\n{CANARY} untracked vault note\n"}

ROAM = {
    "20240105-proxmox.org": """:PROPERTIES:
:ID: 6b1f0c2e-proxmox
:ROAM_ALIASES: "hypervisor" pve
:END:
#+title: Proxmox cluster
#+filetags: :homelab:virtualisation:

Two nodes, pve1 and pve2, with a QDevice on the Pi for quorum.

* Storage :zfs:
:PROPERTIES:
:ID: 1d2e-proxmox-storage
:END:
VM disks live on a ZFS mirror of two 2 TB NVMe drives; replication to pve2 runs every 15 minutes.
#+begin_src sh
* this line is code, not a headline
zfs list -t snapshot
#+end_src

* Upgrades
** Kernel pinning
Pin the kernel with proxmox-boot-tool before a major upgrade, because the NIC driver broke once.
** Backups
Guests are backed up by Proxmox Backup Server, see [[id:7c3a-pbs][the PBS note]].
""",
    "20240110-pbs.org": """:PROPERTIES:
:ID: 7c3a-pbs
:END:
#+title: Proxmox Backup Server
#+filetags: :backup:

* Schedule
PBS takes guest backups at 01:00 and verifies them every Saturday.
* Pruning
Prune keeps 14 daily and 8 weekly backups; garbage collection runs after pruning.
""",
    "20240112-certs.org": """#+title: Certificates
* TODO Renewal :tls:
SCHEDULED: <2024-02-01 Thu>
Caddy renews Let's Encrypt certificates itself through the DNS-01 challenge at the registrar.
* Internal CA
Internal services use step-ca on the Pi; the root certificate is installed on every laptop.
""",
    ".gitignore": "secret.org\n",
}
ROAM_IGNORED = {"secret.org": f"#+title: Secret\n* Key\n{CANARY} ignored org note\n"}

WHATSAPP = """[02/03/2024, 19:04:11] Harbor crew: \u200eMessages and calls are end-to-end encrypted.
[02/03/2024, 19:04:30] Harbor crew: \u200eAnna added Ben
[02/03/2024, 19:05:02] Anna: the old backup box died again, I want to move restic to the NAS
[02/03/2024, 19:06:40] Ben: \u200eimage omitted
[02/03/2024, 19:07:15] Ben: agreed, but keep the offsite copy on the storage box
and test a restore every quarter
[02/03/2024, 19:09:01] Anna: deal, I'll set it up this weekend
[09/03/2024, 10:15:00] Ben: the UPS beeped all night, battery test failed
[09/03/2024, 10:16:20] Anna: order the replacement battery, the RBC7 model
[09/03/2024, 10:17:05] Ben: <attached: 00000042-PHOTO-2024-03-09-10-17-05.jpg>
"""
ANDROID = """12/04/2024, 21:00 - Anna created group "Network"
12/04/2024, 21:01 - Anna: shall we put the smart plugs on their own VLAN?
12/04/2024, 21:03 - Ben: yes, VLAN 20, and block them from reaching the NAS
12/04/2024, 21:04 - Ben: <Media omitted>
12/04/2024, 21:05 - Anna: ok, I'll also point their DNS at the Pi-hole
"""
JSON_EXPORT = [
    {"chat": "Ops", "sender": "Anna", "timestamp": "2024-05-01T08:00:00",
     "text": "Grafana moved to port 3300 because 3000 clashes with the wiki"},
    {"chat": "Ops", "sender": "Ben", "timestamp": "2024-05-01T08:02:00",
     "text": "noted, I updated the reverse proxy"},
]
CHATS = {"WhatsApp Chat - Harbor crew.txt": WHATSAPP, "network.txt": ANDROID,
         "ops.json": json.dumps(JSON_EXPORT, indent=2), ".gitignore": "private.txt\n"}
CHATS_IGNORED = {"private.txt": f"[01/01/2024, 10:00:00] Anna: {CANARY} ignored chat\n"}


def make_notes_sources(root: Path) -> dict[str, Path]:
    """The vault, the org-roam folder and the chats under ``root``, as git work trees.

    Returns ``{"vault": path, "roam": path, "chats": path}``; each holds an ignored (and the
    vault an untracked) file with ``CANARY``.
    """
    vault = make_repo(root / "vault", VAULT)
    roam = make_repo(root / "roam", ROAM)
    chats = make_repo(root / "chats", CHATS)
    for base, files in ((vault, {**VAULT_IGNORED, **VAULT_UNTRACKED}), (roam, ROAM_IGNORED),
                        (chats, CHATS_IGNORED)):
        for rel, text in files.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(text, encoding="utf-8")
    return {"vault": vault, "roam": roam, "chats": chats}


def sources_value(paths: dict[str, Path]) -> tuple[str, ...]:
    """``AI_SOURCES`` items for ``make_notes_sources``' folders."""
    return (f"vault=notes:{paths['vault']}", f"roam=notes:{paths['roam']}",
            f"chats=chats:{paths['chats']}")

REPO_README = "# Harbor\n\n## Layout\nThe NAS holds the media library and the backups.\n"


def make_eval_corpus(dest: Path) -> str:
    """A repository and the three notes sources under ``dest``; returns the ``ai-eval``
    corpus argument ``notes-qa.jsonl=REPO,vault=notes:…,roam=notes:…,chats=chats:…``."""
    repo = make_repo(dest / "repo", {"README.md": REPO_README})
    paths = make_notes_sources(dest)
    return f"{QUESTIONS}={repo}," + ",".join(sources_value(paths))
