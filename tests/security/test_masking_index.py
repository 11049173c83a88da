"""Masking in a real index run: a private key in a compose file's YAML block costs neither the
run nor a line number; the twelve secrets of issue 21 never reach the index, its vectors or
the chunk metadata (org drawers, front matter); documentation examples get an info line."""

from __future__ import annotations

import json
import sqlite3

from tests.index.conftest import embed_inputs, make_settings, run_index
from tests.support.repos import make_repo
from varaverk.index.refresh import refresh

COMPOSE = """\
# Demo stack for the docs: a proxy with an example certificate and key.
services:
  # The proxy terminates TLS with the key below.
  proxy:
    image: traefik:v3
    environment:
      TLS_KEY: |
        -----BEGIN PRIVATE KEY-----
        cG0UtFkKvPz0UuIJjxxvOZ7Ha+27BbRYhwzAUl3TaXOS5rkqes9btLlDDdgNazZs
        vZc+UnrZ7f1hbIFe3MFx+vSHFOppEqzhmkdwUcBIyRABl+pk+HT3HA29Q/+q7LXH
        5SSDNb+A6j9lqiedf0JKhzWXb2lE/v1vEKu8BGJIkR2G0x4/Cnfj+b/dCrtJsc3j
        -----END PRIVATE KEY-----
  # The database; its password is set here for the demo.
  db:
    image: postgres:16
    environment:
      POSTGRES_PASSWORD: "tangerine-dream-7"
"""


def _chunks(settings) -> str:
    with sqlite3.connect(settings.index_path) as db:
        rows = db.execute("SELECT text, context, meta FROM chunks").fetchall()
        fts = db.execute("SELECT text FROM chunks_fts").fetchall()
    return json.dumps(rows) + json.dumps(fts)


def test_a_private_key_block_keeps_line_numbers_and_the_run(tmp_path, model_server):
    # Masking the key block once made the text shorter; the masked-line report then looked
    # up a line past the end (IndexError) and the whole run failed with nothing indexed.
    repo = make_repo(tmp_path / "r", {"docs/compose.yml": COMPOSE, "README.md": "# Demo\nHi.\n"})
    settings = make_settings(repo, tmp_path, model_server)
    proc = run_index(settings)
    assert proc.returncode == 0, proc.stderr
    stored = _chunks(settings)
    assert "cG0UtFkKvPz0" not in stored and "tangerine-dream" not in stored
    assert "POSTGRES_PASSWORD" in stored and "Demo" in stored
    log = (settings.ai_log_dir / "ai-index.log").read_text()
    assert "docs/compose.yml: line 8: masked a secret-looking value (private key)" in log
    assert "docs/compose.yml: line 17: masked a secret-looking value (POSTGRES_PASSWORD)" in log
    assert "2 values masked (0 documentation examples)" in log  # the run's summary counts them
    with sqlite3.connect(settings.index_path) as db:
        (start, end), = db.execute("SELECT start_line, end_line FROM chunks WHERE path = ? AND "
                                   "text LIKE '%POSTGRES_PASSWORD%'", ("docs/compose.yml",))
    assert start <= 17 <= end  # the line numbers of the file as it is


TWELVE = {
    "compose.yaml": "# Media stack.\nservices:\n  # The catalogue database.\n  db:\n"
                    "    environment:\n      POSTGRES_PASSWORD: tangerinedream\n",
    "wifi.env.example": "# Home wifi.\nWIFI_PSK=\"correct horse battery\"\n",
    "cache.env.example": "# The cache.\nREDIS_URL=redis://:Rz9cache4u@redis:6379/0\n",
    "db.env.example": "# The catalogue.\nDB_PASSWORD=Winter.Harbor.2024\n",
    "backup.conf": "# Where backups go.\nTARGET=https://admin:Nas4u-only@nas.lan/backups\n",
    "app.yml": "# The app.\napp:\n  # its admin password\n  password: >-\n    hazel orbit\n"
               "    lantern\n",
    "docs/auth.md": "# Proxy users\n\nThe htpasswd file:\n\n    admin:$apr1$glbPCYje$pKqMPY/"
                    "CvxxWzfhbX7iYwD\n",
    "docs/pg.md": "# Postgres\n\nConnect with `postgres://app:s3cr@t-pw@db:5432/app`.\n",
    "smtp.conf": "# Mail relay.\n[smtp]\npassword = Tr0ub4dor&3\n",
    "docs/cloud-init.md": "# Users\n\nThe hash: `$6$x9CGyuFy$Idlu/a.iCOoxvSQSNFnviw2VueE0ubS."
                          "WFFui409hKgHLe1FvYiRst9gGr9dBUtV2.9NrJrbWqdHPF1GZrrsmY`\n",
    "docs/mirror.md": "# Mirror\n\nThe token is `ghp_q9SMuVcpyjtU5s0GZJF8KgIMdGMVu9HtsSNH`.\n",
    "docs/vpn.md": "---\ntitle: VPN\nwg_private_key: x80kcwwY3hV+jc/a6XnMxaf5dCsT9Vj7vm7mhn32/8U=\n"
                   "---\n# VPN\n\nWireGuard on the router.\n",
}
TWELVE_SECRETS = ("tangerinedream", "correct horse", "Rz9cache4u", "Winter.Harbor",
                  "Nas4u-only", "hazel orbit", "lantern", "pKqMPY", "s3cr@t", "t-pw@db",
                  "Tr0ub4dor", "x9CGyuFy", "q9SMuVcpyjtU5s0", "x80kcwwY3hV")
ORG_NOTE = """\
#+title: Network
* Wifi
:PROPERTIES:
:ID: 6f1c2a
:WIFI_PASSPHRASE: correct horse battery staple
:API_TOKEN: 7f3c9e1a2b4d
:END:
The guest network is VLAN 20.
"""


def test_the_twelve_secrets_of_issue_21_never_reach_the_index(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", TWELVE)
    roam = make_repo(tmp_path / "roam", {"network.org": ORG_NOTE})
    settings = make_settings(repo, tmp_path, model_server, ai_sources=(f"roam=notes:{roam}",))
    report = refresh(settings, progress=False)
    assert report.wrote and not report.failures
    stored = _chunks(settings) + "\n".join(embed_inputs(model_server))
    for secret in TWELVE_SECRETS + ("correct horse battery staple", "7f3c9e1a2b4d"):
        assert secret not in stored, secret
    assert "VLAN 20" in stored and "6f1c2a" in stored  # the rest of the drawer stays
    status = run_index(settings, "--status", "--json")
    masked = {m["path"] for m in json.loads(status.stdout)["masked"]}
    assert masked == set(TWELVE) | {"roam:network.org"}


EXAMPLES = """\
# Database

Run it with:

```yaml
environment:
  POSTGRES_PASSWORD: postgres
```

Then connect with `mongosh mongodb+srv://admin:s1cret0@mongodb-svc/admin`.
"""


def test_documentation_examples_get_an_info_line(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"docs/db.md": EXAMPLES})
    settings = make_settings(repo, tmp_path, model_server)
    proc = run_index(settings)
    assert proc.returncode == 0, proc.stderr
    stored = _chunks(settings)
    assert "s1cret0" not in stored and "PASSWORD: postgres" not in stored
    log = (settings.ai_log_dir / "ai-index.log").read_text()
    assert "docs/db.md: line 7: masked a documentation example (POSTGRES_PASSWORD)" in log
    assert "docs/db.md: line 10: masked a documentation example" in log
    assert "remove it from the repository" not in log
    assert "2 values masked (2 documentation examples)" in log
    info = json.loads(run_index(settings, "--status", "--json").stdout)
    assert info["masked"] == []  # no warning in --status: nothing to remove


HASHES = """\
# Proxy users

The users file:

```
test:$apr1$H6uskkkW$IgXLP6ewTrSuBkTrqE8wj/
```

Login as `admin` with the hash below (the password is 'admin'):

```
admin:$apr1$Wq2eBRa7$ra5V3m3L0O4nnaZ5vOVVJ/
```
"""


def test_a_hash_in_documentation_is_warned_about_as_documentation(tmp_path, model_server):
    """A hash in a README's code block: masked, and the warning says where it is and that
    a made-up example may stay; a hash whose password the text gives is an example."""
    repo = make_repo(tmp_path / "r", {"README.md": HASHES})
    settings = make_settings(repo, tmp_path, model_server)
    proc = run_index(settings)
    assert proc.returncode == 0, proc.stderr
    stored = _chunks(settings)
    assert "IgXLP6ewTrSuBkTrqE8wj" not in stored and "ra5V3m3L0O4nnaZ5vOVVJ" not in stored
    log = (settings.ai_log_dir / "ai-index.log").read_text()
    assert ("README.md: line 6: masked a secret-looking value (password hash in a "
            "documentation code block) before indexing; if it is no made-up example, remove "
            "it from the repository") in log
    assert "README.md: line 12: masked a documentation example (password hash)" in log
    info = json.loads(run_index(settings, "--status", "--json").stdout)
    assert [m["path"] for m in info["masked"]] == ["README.md"]
