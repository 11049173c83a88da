"""Template chunking: the leading comment, group banners, one chunk per key with its comments."""

from __future__ import annotations

import pytest

from varaverk.documents.chunks import SEP
from varaverk.documents.chunking import chunk_document
from tests.chunking.support import by_title, read_fixture

BIG = 100_000


def tpl(text: str, path: str = "Deployment/app.conf.template"):
    return chunk_document(path, "template", text, max_tokens=BIG)


def test_harborlab_master_template_key_chunks():
    chunks = tpl(read_fixture("Deployment/master.conf.template"), "Deployment/master.conf.template")
    lead = chunks[0]
    assert (lead.section, lead.title, lead.start_line, lead.end_line) == ("", "", 1, 12)
    assert lead.text.startswith("harborlab master configuration template\n\nCopy this file")
    (timeout,) = by_title(chunks, "Mover stopper", "MOVER_STOP_TIMEOUT")
    assert timeout.text == ("Seconds to wait for the mover to finish its current file after the "
                            "soft\nstop request, before escalating to SIGTERM\n"
                            'MOVER_STOP_TIMEOUT="300"')
    assert (timeout.start_line, timeout.end_line) == (71, 73)
    assert timeout.context == f"Deployment/master.conf.template{SEP}Mover stopper{SEP}MOVER_STOP_TIMEOUT"
    (used_by,) = [c for c in chunks if c.section == "Mover stopper" and c.title == ""]
    assert used_by.text == "Used by Tools/mover_stop.sh" and used_by.start_line == 69
    (peer,) = by_title(chunks, "Configuration sync", "CFGSYNC_PEER")
    assert peer.text == 'Host name of the other side\nCFGSYNC_PEER="harbor02.lan"'
    # Every key of the file is a chunk of its own, and no line is lost.
    text = read_fixture("Deployment/master.conf.template")
    keys = [line.split("=", 1)[0] for line in text.split("\n") if line[:1].isupper()]
    assert [c.title for c in chunks if c.title] == keys
    groups = {c.section for c in chunks if c.section}
    assert "Mirror to harbor02" in groups and "Parity schedule" in groups


@pytest.mark.parametrize("banner,name", [
    ("# ── Mail fallback ──", "Mail fallback"),
    ("# --- Mail fallback ---", "Mail fallback"),
    ("# === Mail fallback ===", "Mail fallback"),
    ("##### Mail fallback #####", "Mail fallback"),
    ("[mail]", "mail"),
])
def test_banner_styles(banner, name):
    text = f"# App settings\n\n{banner}\n# Relay host\nSMTP_HOST=mail.lan\nSMTP_PORT=25\n"
    chunks = tpl(text)
    assert [(c.section, c.title, c.text) for c in chunks] == [
        ("", "", "App settings"),
        (name, "SMTP_HOST", "Relay host\nSMTP_HOST=mail.lan"),
        (name, "SMTP_PORT", "SMTP_PORT=25")]


def test_ruler_banner_around_a_name():
    text = "# =========\n# Database\n# =========\n# Host of the db\nDB_HOST=db\n"
    (chunk,) = tpl(text)
    assert (chunk.section, chunk.title, chunk.start_line) == ("Database", "DB_HOST", 4)


def test_env_example_with_commented_out_keys_exports_and_continuations():
    text = ("# Example environment for the app\n\n# Enable debug output\n#DEBUG=false\n\n"
            "export API_URL=https://example.invalid\n"
            "# Multi-line value\nGREETING=\"hello\nworld\"\n"
            "# Continued\nOPTS=--a \\\n  --b\n"
            "# A note on its own\n\nLAST=1\n")
    chunks = tpl(text, ".env.example")
    assert [(c.title, c.text) for c in chunks] == [
        ("", "Example environment for the app"),
        ("DEBUG", "Enable debug output\n#DEBUG=false"),
        ("API_URL", "export API_URL=https://example.invalid"),
        ("GREETING", 'Multi-line value\nGREETING="hello\nworld"'),
        ("OPTS", "Continued\nOPTS=--a \\\n  --b"),
        ("", "A note on its own"),
        ("LAST", "LAST=1")]
    assert [(c.start_line, c.end_line) for c in chunks][3:5] == [(7, 9), (10, 12)]


def test_indented_example_in_a_comment_is_not_a_key():
    text = "# Hosts file\n#\n# One line per host:\n#\n#   SLOT=\"http://address:port\"\n#\n# More.\n\nh1=x\n"
    chunks = tpl(text)
    assert [(c.title, c.start_line, c.end_line) for c in chunks] == [("", 1, 7), ("h1", 9, 9)]
    assert '  SLOT="http://address:port"' in chunks[0].text


def test_prose_with_equals_sign_is_not_a_key():
    text = "# Set ratio = 1 to disable\nRATIO=2\n"
    (chunk,) = tpl(text)
    assert chunk.title == "RATIO" and chunk.text == "Set ratio = 1 to disable\nRATIO=2"


def test_yaml_template_cut_at_top_level_keys_and_commented_nested_keys():
    text = ("# Frigate example\n\nmqtt:\n  # broker host\n  host: mqtt\n\n# Cameras to watch\n"
            "cameras:\n  test:\n    fps: 5\n")
    chunks = tpl(text, "config/config.yml.example")
    assert [(c.title, c.start_line, c.end_line) for c in chunks] == [
        ("", 1, 1), ("host", 3, 5), ("cameras", 7, 10)]
    assert chunks[1].context == f"config/config.yml.example{SEP}mqtt{SEP}host"
    assert chunks[2].text == "Cameras to watch\ncameras:\n  test:\n    fps: 5"
    assert "# broker host" in chunks[1].text


def test_harborlab_templates_lose_no_line():
    for path in ("Deployment/hosts.conf.template", "Deployment/notify.conf.template",
                 "Deployment/master.conf.template"):
        text = read_fixture(path)
        chunks = tpl(text, path)
        covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
        lines = text.split("\n")
        for number, line in enumerate(lines, 1):
            is_banner = "──" in line
            if line.strip() and not is_banner:
                assert number in covered, (path, number, line)


def test_config_without_any_comment_is_left_out():
    assert tpl("PORT=8080\nHOST=0.0.0.0\n", "app.env") == []
    assert tpl("services:\n  web:\n    image: nginx\n", "compose.yaml") == []


def test_commented_yaml_reference_keys_and_their_commented_defaults():
    text = ("## Media Store ##\n\n"
            "# The largest allowed upload size in bytes\n#\n"
            "# Nginx has a small max body size by default.\n#\n#max_upload_size: 50M\n\n"
            "# Storage providers\n#\n#media_storage_providers:\n#  - module: file_system\n"
            "#    store_local: false\n\n"
            "caches:\n  # Defaults to 0.5.\n  #global_factor: 1.0\n")
    chunks = tpl(text, "docs/sample_config.yaml")
    assert [(c.section, c.title, c.start_line, c.end_line) for c in chunks] == [
        ("Media Store", "max_upload_size", 3, 7),
        ("Media Store", "media_storage_providers", 9, 13),
        ("Media Store", "global_factor", 15, 17)]
    upload, providers, caches = chunks
    assert upload.text == ("The largest allowed upload size in bytes\n\nNginx has a small max body "
                           "size by default.\n\n#max_upload_size: 50M")
    assert providers.text.endswith("#media_storage_providers:\n#  - module: file_system\n"
                                   "#    store_local: false")
    assert "#global_factor: 1.0" in caches.text and caches.text.startswith("caches:")
    assert caches.context.endswith(f"Media Store{SEP}caches{SEP}global_factor")


def test_compose_comment_above_a_nested_key_is_its_own_chunk():
    text = ("# Example stack\n\nservices:\n  app:\n    image: app:1\n"
            "    # Since app does not retry the database, restart upon\n    # failure\n"
            "    restart: unless-stopped\n    # ports to publish\n    ports:\n      - 8080:80\n"
            "  db:\n    image: postgres\n    # change that password\n    environment:\n"
            "      - PASSWORD=changeme\n")
    chunks = tpl(text, "compose.yaml")
    assert [(c.title, c.start_line, c.end_line) for c in chunks] == [
        ("", 1, 1), ("restart", 3, 8), ("ports", 9, 11), ("environment", 12, 16)]
    assert chunks[1].context == f"compose.yaml{SEP}services{SEP}app{SEP}restart"
    assert chunks[3].text.startswith("  db:\n    image: postgres")


def test_long_yaml_block_parts_name_the_keys_they_start_under():
    services = "".join(f"      - LABEL_{i}=value-{i}\n" for i in range(40))
    text = f"# Example stack\n\nservices:\n  web:\n    # labels for the proxy\n    labels:\n{services}"
    chunks = chunk_document("compose.yml", "template", text, max_tokens=200)
    parts = [c for c in chunks if c.title == "labels"]
    assert len(parts) > 2 and parts[0].part == 1
    assert parts[0].context == f"compose.yml{SEP}services{SEP}web{SEP}labels"
    assert parts[-1].context == f"compose.yml{SEP}services{SEP}web{SEP}labels{SEP}services > web > labels"
