"""Scripts outside the six-section convention: usage/help text and banner sections, never code."""

from __future__ import annotations

import warnings

from varaverk.documents.chunking import chunk_document
from varaverk.documents.script_docs import COMMENTS_TITLE, USAGE_TITLE
from varaverk.documents.script_headers import COMMENT_TITLE

BIG = 10_000


def chunks_of(path: str, text: str):
    return chunk_document(path, "header", text, max_tokens=BIG)


USAGE_SH = """#!/bin/sh
# Rotate the camera recordings.
# Keeps the newest days on the SSD.
# Moves older ones to the archive disk.

usage() {
    cat <<EOF
Usage: rotate [-n DAYS] [--dry-run]
  -n DAYS    days kept on the SSD (default 7)
EOF
    echo "  --dry-run  only print what would move"
}

KEEP=7
rm -rf /tmp/rotate.*
"""


def test_shell_usage_function_gives_a_usage_chunk_beside_the_header_comment():
    chunks = chunks_of("bin/rotate", USAGE_SH)
    assert [c.title for c in chunks] == [COMMENT_TITLE, USAGE_TITLE]
    usage = chunks[1]
    assert usage.text == ("Usage: rotate [-n DAYS] [--dry-run]\n"
                          "  -n DAYS    days kept on the SSD (default 7)\n"
                          "  --dry-run  only print what would move")
    assert (usage.start_line, usage.end_line) == (8, 11)
    assert not any("rm -rf" in c.text or "KEEP=7" in c.text for c in chunks)


def test_top_level_usage_heredoc_counts_and_other_heredocs_do_not():
    text = ("#!/bin/bash\nif [ -z \"$1\" ]; then\n  cat <<-'TXT'\n\tusage: sync HOST\n\tTXT\nfi\n"
            "cat > /etc/x.conf <<EOF\nsecret_path=/srv\nEOF\n")
    (chunk,) = chunks_of("sync", text)
    assert chunk.title == USAGE_TITLE and chunk.text == "usage: sync HOST"


ARGPARSE_PY = '''#!/usr/bin/env python3
import argparse

def main():
    p = argparse.ArgumentParser(description="Prune old snapshots from the backup pool.",
                                epilog="Exit 3 when the pool is not mounted.")
    p.add_argument("--keep", type=int, help="snapshots kept per "
                   "dataset (default 14)")
    p.add_argument("-n", "--dry-run", action="store_true", help="print, delete nothing")
    p.add_argument("pool")
    os.system("zfs destroy everything")
'''


def test_argparse_description_epilog_and_help_strings():
    (chunk,) = chunks_of("prune.py", ARGPARSE_PY)
    assert chunk.title == USAGE_TITLE
    assert chunk.text == ("Prune old snapshots from the backup pool.\n"
                          "Exit 3 when the pool is not mounted.\n"
                          "--keep: snapshots kept per dataset (default 14)\n"
                          "-n, --dry-run: print, delete nothing")
    assert (chunk.start_line, chunk.end_line) == (5, 9)
    assert "zfs" not in chunk.text


def test_python_that_does_not_parse_gives_no_usage():
    assert chunks_of("broken.py", "import argparse\nargparse.ArgumentParser(description='x'\n") == []


BANNERS_SH = """#!/usr/bin/env bash

# Purges old room history through the admin API.

########################################
# define your domain
########################################
# the domain of your homeserver:
DOMAIN=example.org
API_URL="$DOMAIN:8008"

########################################
# database function
########################################
sql (){
  # for sqlite3:
  #sqlite3 homeserver.db "pragma busy_timeout=20000;$1"
  psql -A -t -c "$1"
}
# ── clean up ──
# vacuum afterwards to free the space
for r in $ROOMS; do
  # the next room
  ROOM=$r
done
"""


def test_banner_sections_hold_comments_and_documented_assignments_only():
    chunks = chunks_of("purge.sh", BANNERS_SH)
    assert [c.title for c in chunks] == ["header comment", "define your domain",
                                         "database function", "clean up"]
    lead, domain, function, clean = chunks
    # a one-line leading comment is the header: it says what the script does
    assert lead.text == "Purges old room history through the admin API."
    assert domain.text == "the domain of your homeserver:\nDOMAIN=example.org"
    assert (domain.start_line, domain.end_line) == (8, 9)
    assert function.text == ('for sqlite3:\nsqlite3 homeserver.db "pragma busy_timeout=20000;$1"')
    assert clean.text == "vacuum afterwards to free the space\nthe next room"
    # code never appears
    assert not any("psql" in c.text or "API_URL" in c.text or "ROOM=" in c.text for c in chunks)


def test_six_section_scripts_get_no_banner_sections():
    text = ("#!/bin/sh\n# PURPOSE\n#   Lead.\n\n####################\n# settings\n"
            "####################\n# the port\nPORT=8080\n")
    chunks = chunks_of("svc.sh", text)
    assert [(c.section, c.title) for c in chunks] == [("PURPOSE", "")]


COMMENTED_SH = """#!/usr/bin/env sh
# Check that Longhorn came up.

# List of required tools: kubectl, curl, jq
CURL=${CURL:-curl}

# Looping through all of the deployed resources during 5 minutes with 10 seconds intervals
count=0
while [ "$count" -lt 30 ]
do
    # Iterate through nodes and determine if each node is Ready
    STATUS=$(kubectl get nodes)
    # for postgres:
    # TIME='2016-08-31 23:59:59'
    #
    # kubectl get pods -n longhorn-system -o json | jq '.items[]'
    sleep 10 # wait before the next round
done
"""


def test_comment_paragraphs_that_read_as_prose_form_one_comments_chunk():
    chunks = chunks_of("check_lh.sh", COMMENTED_SH)
    assert [c.title for c in chunks] == [COMMENT_TITLE, COMMENTS_TITLE]
    comments = chunks[1]
    assert comments.text == (
        "List of required tools: kubectl, curl, jq\nCURL=${CURL:-curl}\n"
        "\n"
        "Looping through all of the deployed resources during 5 minutes with 10 seconds"
        " intervals\ncount=0\n"
        "\n"
        "Iterate through nodes and determine if each node is Ready")
    assert (comments.start_line, comments.end_line) == (4, 11)
    # other code, commented-out code, a two-word step name and a trailing comment never appear
    for left_out in ("STATUS=", "while", "for postgres", "TIME=", "jq '.items",
                     "wait before"):
        assert left_out not in comments.text


def test_banner_and_six_section_scripts_get_no_comments_chunk():
    assert COMMENTS_TITLE not in [c.title for c in chunks_of("purge.sh", BANNERS_SH)]
    text = ("#!/bin/sh\n# PURPOSE\n#   Lead.\n\nPORT=8080\n"
            "# Looping through all of the deployed resources during 5 minutes\nsleep 300\n")
    assert [(c.section, c.title) for c in chunks_of("svc.sh", text)] == [("PURPOSE", "")]


def test_python_body_comments_stay_out():
    """A Python module documents itself in its docstring and argparse help; its body comments
    annotate code for its maintainers."""
    text = ('"""Rotate the camera recordings."""\n\nimport os\n\n'
            "# Looping through all of the deployed resources during 5 minutes\n"
            "ROUNDS = 30\n")
    assert [c.title for c in chunks_of("tools/rotate.py", text)] == [COMMENT_TITLE]


def test_a_script_the_parser_warns_about_reads_silently():
    """A user's Python with an invalid escape ("\\d" in a plain string) makes the parser warn
    (a SyntaxWarning on newer Pythons, printed to ai-index's terminal); reading its usage text
    must neither warn nor lose it."""
    text = ('#!/usr/bin/env python3\n"""Prune old snapshots."""\nimport argparse, re\n'
            'DATE = re.compile("\\d{4}-\\d{2}")\n'
            'p = argparse.ArgumentParser(description="Prune snapshots older than N days.")\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chunks = chunks_of("tools/prune.py", text)
    assert [c.title for c in chunks if c.title == USAGE_TITLE] == [USAGE_TITLE]
