"""Items of a list under a secret-named key are judged as that key's value: the Vault unseal
keys of ``vault operator init`` once reached the index (a lower-case hex key has too few
character classes to look random, and a list's item was no key's value). Where a list
starts and ends, what in it is an item, and the index run that once kept the key."""

from __future__ import annotations

import json
import sqlite3

import yaml

from tests.index.conftest import make_settings, run_index
from tests.support.repos import make_repo
from varaverk.masking.documents import mask_secrets
from varaverk.masking.layout import Layout, may_hold_lists
from varaverk.masking.shapes import MASK

HEX_KEY = "5f0c1d9e3a7b24c86e1f0a9d3b5c7e2f4a6b8d0c1e3f5a7b9c2d4e6f8a0b1c3d"
VAULT_DOC = f"""\
# Vault

Initialise it once; the output holds the unseal keys and the root token.

```json
{{
  "unseal_keys_b64": [
    "Xw3dHjp7JLyG8hTmA0qVbZ4kFc9sEoN2uRiW6xYaPe0="
  ],
  "unseal_keys_hex": [
    "{HEX_KEY}"
  ],
  "unseal_shares": 1,
  "recovery_keys_hex": []
}}
```

Unseal it with `vault operator unseal`.
"""


def test_the_unseal_keys_of_vault_operator_init_never_reach_the_index(tmp_path, model_server):
    repo = make_repo(tmp_path / "r", {"docs/vault.md": VAULT_DOC})
    settings = make_settings(repo, tmp_path, model_server)
    proc = run_index(settings)
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(settings.index_path) as db:
        stored = json.dumps(db.execute("SELECT text, context, meta FROM chunks").fetchall()
                            + db.execute("SELECT text FROM chunks_fts").fetchall())
    assert HEX_KEY[:16] not in stored and "Xw3dHjp7" not in stored
    assert "unseal_keys_hex" in stored and "unseal_shares" in stored
    log = (settings.ai_log_dir / "ai-index.log").read_text()
    assert "docs/vault.md: line 11: masked a secret-looking value (unseal_keys_hex)" in log


def _masked(text: str, kind: str = "template") -> list[str]:
    masked = mask_secrets(text, kind)
    assert masked.text.count("\n") == text.count("\n")
    return masked.text.split("\n")


def test_a_list_ends_at_the_next_key_and_a_comment_does_not_end_it():
    lines = _masked("tokens:\n  # the relay's\n  - Zq8xK2mPv9LwT4nR\n\n  - Hk3mWq9zLp2xR7vN\n"
                    "names:\n  - tangerinedream\n")
    assert lines[2] == f"  - {MASK}" and lines[4] == f"  - {MASK}"
    assert lines[6] == "  - tangerinedream"


def test_a_sibling_entry_is_no_item_of_the_key_above_it():
    # "- keys:" opens a list at the key's column; the next "-" at the dash's column is the
    # outer list's next entry.
    assert _masked("- keys:\n- tangerinedream\n- name: x\n  tokens:\n  - Zq8xK2mPv9LwT4nR") == [
        "- keys:", "- tangerinedream", "- name: x", "  tokens:", f"  - {MASK}"]


def test_an_entry_with_its_own_key_is_judged_by_that_key():
    lines = _masked("passwords:\n  - name: tangerinedream\nsecrets:\n  - DB_NAME=harbor\n"
                    "  - DB_PASSWORD=tangerinedream\n")
    assert lines[1] == "  - name: tangerinedream" and lines[3] == "  - DB_NAME=harbor"
    assert lines[4] == f"  - DB_PASSWORD={MASK}"
    assert mask_secrets("secrets:\n  - DB_PASSWORD=tangerinedream").hits == (
        (2, "DB_PASSWORD"),)


def test_an_item_keeps_its_comment_and_is_reported_under_its_key():
    masked = mask_secrets("api_keys:\n  - Zq8xK2mPv9LwT4nR  # the relay's\n", "template")
    assert masked.text == f"api_keys:\n  - {MASK}  # the relay's\n"
    assert masked.hits == ((2, "api_keys"),)


def test_a_flow_list_holding_references_is_judged_item_by_item():
    text = 'tokens = ["Zq8xK2mPv9LwT4nR", "${TOKEN}", "{{ vault_token }}"]'
    assert mask_secrets(text, "template").text == \
        f'tokens = ["{MASK}", "${{TOKEN}}", "{{{{ vault_token }}}}"]'


def test_a_masked_item_of_front_matter_stays_a_string():
    doc = "---\ntitle: NAS\napi_tokens:\n  - Zx81-vault-pw\n---\n# NAS\n"
    masked = mask_secrets(doc, "note").text
    front = yaml.safe_load(masked.split("---")[1])
    assert front == {"title": "NAS", "api_tokens": [MASK]}


def test_a_bullet_list_under_a_label_of_prose_is_text():
    doc = ("# Tools\n\nPasswords:\n- Vaultwarden\n- KeePassXC\n\nThe tokens:\n- tangerinedream\n"
           "\n```yaml\napi_tokens:\n  - tangerinedream\n```\n")
    lines = _masked(doc, "doc")
    assert lines[3:5] == ["- Vaultwarden", "- KeePassXC"] and lines[7] == "- tangerinedream"
    assert lines[11] == f"  - {MASK}"


def test_a_label_of_several_words_owns_no_list():
    # A template's comment block ({# ... #}) reads as YAML, but its label is text.
    doc = "{#\n  Docker Swarm secrets (swarm only):\n  - Zq8xK2mPv9\n#}\nsecrets:\n" \
          "  ApiKeys:\n    - Zq8xK2mPv9\n"
    assert _masked(doc) == doc.replace("    - Zq8xK2mPv9", f"    - {MASK}").split("\n")


def test_the_fast_test_finds_every_list_the_layout_finds():
    docs = ["tokens:\n  - a", "tokens:  # some\n\n  # more\n- a",
            '{\n  "tokens": [\n    "a"\n  ]\n}',
            "x:\n  passwords: [\n    a,\n  ]", "tokens: 5\n  - a", "Passwords:\n- a",
            "name:\n  - a", "tokens:\n  a: b"]
    for doc in docs:
        lines = doc.split("\n")
        layout = Layout(lines, "template")
        owned = any(layout.list_owner(i) for i in range(len(lines)))
        assert may_hold_lists(doc) or not owned, doc
    assert [may_hold_lists(d) for d in docs] == [True] * 4 + [False, True, False, False]
