"""YAML list items named in prose (Ansible tasks, plays, blocks, handlers; CI steps): each is a
chunk of its own titled with its name; identifiers and other YAML chunk as before."""

from __future__ import annotations

import pytest

from varaverk.documents.chunks import SEP
from varaverk.documents.chunking import chunk_document
from varaverk.documents.yaml_named_items import prose_name

BIG = 100_000


def tpl(text: str, path: str = "roles/web/tasks/main.yml"):
    return chunk_document(path, "template", text, max_tokens=BIG)


def spans(chunks):
    return [(c.title, c.start_line, c.end_line) for c in chunks]


def test_an_uncommented_tasks_file_gives_one_chunk_per_task():
    text = ("---\n"
            "- name: Install Node.js (npm plus all its dependencies).\n"
            "  dnf: name=npm state=present enablerepo=epel\n"
            "\n"
            "- name: Install forever module (to run our Node.js app).\n"
            "  npm: name=forever global=yes state=present\n"
            "  register: forever\n"
            "  when: ansible_os_family == 'RedHat'\n")
    chunks = tpl(text)
    assert spans(chunks) == [("Install Node.js (npm plus all its dependencies).", 2, 3),
                             ("Install forever module (to run our Node.js app).", 5, 8)]
    assert chunks[1].text == ("- name: Install forever module (to run our Node.js app).\n"
                              "  npm: name=forever global=yes state=present\n"
                              "  register: forever\n"
                              "  when: ansible_os_family == 'RedHat'")
    assert chunks[0].context == ("roles/web/tasks/main.yml" + SEP
                                 + "Install Node.js (npm plus all its dependencies).")


def test_the_comment_block_above_a_task_is_its_own_and_comments_inside_stay_inside():
    text = ("---\n"
            "# This play is for blacklist devices in multipath configuration\n"
            "# Avoid conflicts with Longhorn.\n"
            "- name: Check that the multipath.conf exists\n"
            "  stat:\n"
            "    path: /etc/multipath.conf\n"
            "  register: multipath_file_exist\n"
            "\n"
            "- name: Copy blacklisted multipath.conf file\n"
            "  copy:\n"
            "    dest: /etc/multipath.conf\n"
            "    # keep the old one\n"
            "    backup: true\n"
            "  when: multipath_file_exist.stat.exists\n"
            "  # The file is only copied when one exists\n"
            "  # already.\n"
            "\n"
            "# A note about the handler\n"
            "- name: restart multipath\n"
            "  service: name=multipathd state=restarted\n")
    chunks = tpl(text)
    assert spans(chunks) == [("Check that the multipath.conf exists", 2, 7),
                             ("Copy blacklisted multipath.conf file", 9, 16),
                             ("restart multipath", 18, 20)]
    assert chunks[0].text.startswith("This play is for blacklist devices in multipath "
                                     "configuration\nAvoid conflicts with Longhorn.\n"
                                     "- name: Check that")
    assert chunks[1].text.endswith("  # The file is only copied when one exists\n  # already.")
    assert "    # keep the old one\n" in chunks[1].text
    assert chunks[2].text.startswith("A note about the handler\n- name: restart multipath")


def test_a_playbooks_tasks_under_an_unnamed_play():
    text = ("---\n"
            "- hosts: all\n"
            "  become: true\n"
            "  gather_facts: false\n"
            "\n"
            "  tasks:\n"
            "    - name: Update apt repo and cache on all Debian/Ubuntu boxes\n"
            "      apt:\n"
            "        update_cache: true\n"
            "        # Run the equivalent of apt-get update command on all servers\n"
            "        force_apt_get: true\n"
            "\n"
            "    - name: Check if a reboot is needed on all servers\n"
            "      stat:\n"
            "        path: /var/run/reboot-required\n"
            "      register: reboot_required_file\n"
            "      # Save a result to reboot the box\n")
    chunks = tpl(text, "ansible/update.yml")
    # The play's header is values alone (no comment, no name): left out; the key that opens
    # the task list goes with its first task.
    assert spans(chunks) == [("Update apt repo and cache on all Debian/Ubuntu boxes", 6, 11),
                             ("Check if a reboot is needed on all servers", 13, 17)]
    assert chunks[0].text.startswith("  tasks:\n    - name: Update apt repo")
    assert chunks[1].text.endswith("      # Save a result to reboot the box")


def test_a_commented_play_header_chunks_as_before():
    text = ("# Keep the packages current\n"
            "- hosts: all\n"
            "  become: true\n"
            "\n"
            "  tasks:\n"
            "    - name: Upgrade all packages on servers\n"
            "      apt: upgrade=dist\n")
    chunks = tpl(text, "ansible/update.yml")
    assert [(c.title, c.text) for c in chunks] == [
        ("", "Keep the packages current\n- hosts: all\n  become: true"),
        ("Upgrade all packages on servers",
         "  tasks:\n    - name: Upgrade all packages on servers\n      apt: upgrade=dist")]


def test_a_named_play_its_tasks_and_handlers():
    text = ("- name: Configure the web servers\n"
            "  hosts: web\n"
            "  vars:\n"
            "    port: 8080\n"
            "  tasks:\n"
            "  - name: Install nginx\n"
            "    apt: name=nginx\n"
            "    notify: restart nginx\n"
            "  handlers:\n"
            "  - name: restart nginx\n"
            "    service: name=nginx state=restarted\n"
            "\n"
            "- name: Configure the database\n"
            "  hosts: db\n")
    chunks = tpl(text, "site.yml")
    assert spans(chunks) == [("Configure the web servers", 1, 4), ("Install nginx", 5, 8),
                             ("restart nginx", 9, 11), ("Configure the database", 13, 14)]
    assert chunks[2].text == ("  handlers:\n  - name: restart nginx\n"
                              "    service: name=nginx state=restarted")
    # A task says which play it belongs to.
    assert chunks[1].context == f"site.yml{SEP}Configure the web servers{SEP}Install nginx"


def test_a_block_and_its_tasks_and_what_follows_them():
    text = ("- name: Set up the database when it is missing\n"
            "  block:\n"
            "    - name: Create the database\n"
            "      command: createdb app\n"
            "    # Seed it from the dump\n"
            "    - name: Load the initial data\n"
            "      command: psql app -f seed.sql\n"
            "  rescue:\n"
            "    - name: Report the failure\n"
            "      debug: msg=failed\n"
            "  when: db_missing\n"
            "  become: true\n"
            "- name: Start the app\n"
            "  service: name=app state=started\n")
    chunks = tpl(text)
    assert [(c.title, c.start_line, c.end_line, c.context.split(SEP)[1:]) for c in chunks] == [
        ("Set up the database when it is missing", 1, 1,
         ["Set up the database when it is missing"]),
        ("Create the database", 2, 4,
         ["Set up the database when it is missing", "Create the database"]),
        ("Load the initial data", 5, 7,
         ["Set up the database when it is missing", "Load the initial data"]),
        ("Report the failure", 8, 10,
         ["Set up the database when it is missing", "Report the failure"]),
        ("Set up the database when it is missing", 11, 12,
         ["Set up the database when it is missing"]),
        ("Start the app", 13, 14, ["Start the app"])]
    assert chunks[2].text.startswith("Seed it from the dump\n    - name: Load")
    assert chunks[4].text == "  when: db_missing\n  become: true"


def test_a_name_that_is_not_the_first_key_and_quoted_names():
    text = ("- hosts: all\n"
            "  name: 'Bootstrap every node'\n"
            "  tasks:\n"
            "    - apt: name=ntp\n"
            "      name: \"Install the time daemon\"\n")
    chunks = tpl(text)
    assert spans(chunks) == [("Bootstrap every node", 1, 2), ("Install the time daemon", 3, 5)]


def test_github_actions_steps_are_named_items():
    text = ("# Tests on every push\n"
            "on: [push]\n"
            "jobs:\n"
            "  test:\n"
            "    runs-on: ubuntu-latest\n"
            "    steps:\n"
            "      - uses: actions/checkout@v4\n"
            "      - name: Set up Python\n"
            "        uses: actions/setup-python@v5\n"
            "      - name: Run the tests\n"
            "        run: pytest -q\n")
    chunks = tpl(text, ".github/workflows/test.yml")
    assert spans(chunks) == [("on", 1, 2), ("Set up Python", 8, 9), ("Run the tests", 10, 11)]


@pytest.mark.parametrize("name", ["my-app", "web", "LOG_LEVEL", "{{ item }}",
                                  "'{{ item.name }}'", "Install {{ pkg }}", "a b", "1.2 3.4",
                                  '""', "", "|", ">-", "&name CF_API_TOKEN",
                                  "*default_name", "*a b c"])
def test_identifiers_are_not_prose_names(name):
    assert prose_name(name) is None


@pytest.mark.parametrize("value,name", [
    ("Install nginx", "Install nginx"),
    ("'Set up Python'", "Set up Python"),
    ('"Copy the {{ app }} config file"', "Copy the {{ app }} config file"),
    ("Check if a reboot is needed  # why", "Check if a reboot is needed"),
    ("&step !!str Wait for the nodes", "Wait for the nodes"),
])
def test_prose_names(value, name):
    assert prose_name(value) == name


K8S = ("# The web front end\n"
       "apiVersion: apps/v1\n"
       "kind: Deployment\n"
       "metadata:\n"
       "  name: my-app\n"
       "spec:\n"
       "  template:\n"
       "    spec:\n"
       "      containers:\n"
       "        - name: my-app\n"
       "          image: nginx:1.25\n"
       "          # verbose logs while we debug\n"
       "          env:\n"
       "            - name: LOG_LEVEL\n"
       "              value: debug\n"
       "        - name: \"{{ .Values.sidecar }}\"\n"
       "          image: busybox\n")


def test_kubernetes_identifiers_chunk_as_before():
    chunks = tpl(K8S, "apps/web/deployment.yaml")
    assert [(c.title, c.start_line, c.end_line) for c in chunks] == [
        ("apiVersion", 1, 2), ("env", 6, 17)]
    assert chunks[1].context == SEP.join(["apps/web/deployment.yaml", "spec", "template", "spec",
                                          "containers", "name", "env"])


def test_an_uncommented_file_of_identifiers_is_still_left_out():
    assert tpl("- name: my-app\n  image: nginx\n- name: db\n  image: postgres\n",
               "list.yaml") == []


def test_a_name_too_long_for_a_label_is_cut_in_the_title_only():
    name = " ".join(["word"] * 400)
    chunks = tpl(f"- name: {name}\n  command: true\n")
    assert len(chunks) == 1 and chunks[0].title.endswith("\u2026")
    assert len(chunks[0].title) < len(name) and name in chunks[0].text


def test_every_line_of_a_task_file_is_in_one_chunk_in_order():
    tasks = "".join(f"# step {i}\n- name: Run step number {i}\n  command: /bin/step {i}\n"
                    f"  when: x\n\n" for i in range(50))
    chunks = tpl("---\n" + tasks)
    assert len(chunks) == 50
    covered = [n for c in chunks for n in range(c.start_line, c.end_line + 1)]
    assert covered == sorted(set(covered))
    lines = ("---\n" + tasks).split("\n")
    assert {n for n, line in enumerate(lines, 1) if line.strip() and line != "---"} \
        <= set(covered)


def test_a_commented_block_around_named_steps_is_cut_where_they_lie():
    text = ("# Tests on every push\n"
            "jobs:\n"
            "  test:\n"
            "    # the runner\n"
            "    runs-on: ubuntu-latest\n"
            "    steps:\n"
            "        # a comment deeper than the steps\n"
            "      - name: Run the tests\n"
            "        run: pytest -q\n"
            "    # give up after five minutes\n"
            "    timeout-minutes: 5\n"
            "  lint:\n"
            "    runs-on: ubuntu-latest\n")
    chunks = tpl(text, ".github/workflows/test.yml")
    # By the key rules the two comment runs are one piece (nothing but the step between
    # them), documenting timeout-minutes; the piece is cut around the step.
    assert spans(chunks) == [("jobs", 1, 3), ("runs-on", 4, 6), ("timeout-minutes", 7, 7),
                             ("Run the tests", 8, 9), ("timeout-minutes", 10, 13)]
    # Retrieval merges the keys of one block: the pieces on either side of the step are not
    # one block any more, so no merged result claims the step's lines.
    assert chunks[0].meta["block"] == chunks[2].meta["block"] != chunks[4].meta["block"]


def test_values_cut_off_by_a_named_item_are_left_out():
    text = ("# Tests on every push\n"
            "jobs:\n"
            "  test:\n"
            "    # the runner\n"
            "    runs-on: ubuntu-latest\n"
            "    steps:\n"
            "      - name: Run the tests\n"
            "        run: pytest -q\n"
            "    timeout-minutes: 5\n")
    chunks = tpl(text, ".github/workflows/test.yml")
    assert spans(chunks) == [("jobs", 1, 3), ("runs-on", 4, 5), ("Run the tests", 6, 8)]


def test_a_comment_above_the_key_that_opens_the_list_goes_with_the_first_item():
    text = ("- hosts: all\n"
            "  # Keep every node current\n"
            "  tasks:\n"
            "    - name: Upgrade all packages\n"
            "      apt: upgrade=dist\n")
    chunks = tpl(text)
    assert spans(chunks) == [("Upgrade all packages", 2, 5)]
    assert chunks[0].text.startswith("Keep every node current\n  tasks:\n")


def test_a_banner_names_the_group_of_the_items_under_it_and_is_no_comment_of_theirs():
    text = ("# ── Web servers ──\n"
            "- name: Install nginx\n"
            "  apt: name=nginx\n"
            "# ── Databases ──\n"
            "# the server only, no client\n"
            "- name: Install postgres\n"
            "  apt: name=postgresql\n")
    chunks = tpl(text)
    assert [(c.section, c.title, c.start_line, c.text.split("\n")[0]) for c in chunks] == [
        ("Web servers", "Install nginx", 2, "- name: Install nginx"),
        ("Databases", "Install postgres", 5, "the server only, no client")]
    assert chunks[1].citation == f"roles/web/tasks/main.yml{SEP}Databases{SEP}Install postgres"


def test_machine_annotations_are_neither_comments_nor_chunk_text():
    text = ("# yaml-language-server: $schema=https://example.invalid/tasks.json\n"
            "- name: Install the time daemon\n"
            "  apt: name=chrony\n"
            "- name: LOG_LEVEL\n"
            "  value: debug\n")
    chunks = tpl(text)
    assert [(c.title, c.start_line, c.end_line) for c in chunks] == [
        ("Install the time daemon", 2, 3)]
