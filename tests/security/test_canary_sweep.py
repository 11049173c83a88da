"""The canary sweep: harborlab with every kind of secret a homelab holds (its git-ignored
conf, ignored data, untracked notes, a secret committed by mistake, secrets echoed into a job
log), indexed by ai-index, queried by ai-query and through a real gunicorn dock with every
profile; then the data folder, every log, every HTTP response and every request the model
server received are searched for the canaries. The count must be 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.dock.conftest import base_settings, start_dock
from tests.index.conftest import ENTRY, cli_env, run_index
from tests.support.repos import git, harborlab_files

# The fixture's own canaries: git-ignored conf, git-ignored data, an untracked draft.
FIXTURE_CANARIES = ("CANARY-7f3a9c-SECRET", "CANARY-b41e02-SECRET", "CANARY-d9e8aa-UNTRACKED")
COMMITTED = "CANARY-c0mm1tted-Tok3n-77aa"
CONF_CANARIES = ("CANARY-mqtt-pw-8812", "CANARY-wifi-psk-9923", "4731-CANARY-PIN")
LOG_CANARIES = ("CANARY-json-pw-1001", "CANARY-mysql-pw-1002", "CANARY-dbpass two-1003")
CANARIES = FIXTURE_CANARIES + (COMMITTED,) + CONF_CANARIES + LOG_CANARIES

EXTRA_CONF = (
    "\n# the homelab's own keys, read by the capabilities\n"
    + harborlab_files()["Configurations/master.conf"].decode("utf-8")
    + f'MQTT_HOST="mqtt.lan"\nMQTT_PW="{CONF_CANARIES[0]}"\nWIFI_PSK="{CONF_CANARIES[1]}"\n'
    f'ALARM_PIN="{CONF_CANARIES[2]}"\n'
)

JOB_LOG = (
    "2026-11-29 02:00:01 rsync_mirror: start\n"
    "2026-11-29 02:00:02 notify: ERROR relay refused token CANARY-7f3a9c-SECRET\n"
    f'2026-11-29 02:00:03 api: ERROR posted {{"password": "{LOG_CANARIES[0]}"}}\n'
    f"2026-11-29 02:00:04 db: ERROR mysql -uroot -p{LOG_CANARIES[1]} harbor failed\n"
    f"2026-11-29 02:00:05 env: DB_PASS='{LOG_CANARIES[2]}' exported\n"
    f"2026-11-29 02:00:06 mqtt: ERROR login with {CONF_CANARIES[0]} refused\n"
    "2026-11-29 02:00:07 rsync_mirror: ERROR delete ratio 18.9% above MIRROR_MAX_DELETE_PCT\n"
)


def _found(blobs: dict[str, bytes]) -> list[str]:
    hits = []
    for where, data in blobs.items():
        text = data.decode("utf-8", "replace")
        hits.extend(f"{canary} in {where}" for canary in CANARIES if canary in text)
    return hits


def _files_under(*folders: Path) -> dict[str, bytes]:
    out = {}
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file():
                out[str(path)] = path.read_bytes()
    return out


def test_canary_sweep_finds_nothing(harborlab, tmp_path, model_server):
    # A secret committed by mistake in a tracked config template.
    template = harborlab / "Deployment" / "relay.conf.template"
    template.write_text("# Relay settings\n# RELAY_TOKEN: the relay's API token.\n"
                        f'RELAY_TOKEN="{COMMITTED}"\n')
    git(harborlab, "add", "Deployment/relay.conf.template")
    git(harborlab, "commit", "-q", "-m", "relay template (with a secret by mistake)")
    logs = tmp_path / "joblogs"
    logs.mkdir()
    (logs / "rsync_mirror.log").write_text(JOB_LOG)
    data = tmp_path / "data"
    settings = base_settings(harborlab, data, model_server,
                             ai_troubleshoot_log_dirs=(str(logs),),
                             ai_conf_read_keys=("MIRROR_*", "NOTIFY_*", "MQTT_*", "WIFI_*",
                                                "ALARM_*"))
    blobs: dict[str, bytes] = {}

    indexed = run_index(settings)
    assert indexed.returncode == 0, indexed.stderr
    blobs["ai-index output"] = (indexed.stdout + indexed.stderr).encode()
    status = run_index(settings, "--status")
    assert "warning: Deployment/relay.conf.template: masked" in status.stdout
    blobs["ai-index --status"] = (status.stdout + status.stderr).encode()
    env = {**cli_env(settings), "AI_GEN_BACKEND": "ollama", "AI_GEN_MODEL": "fake-chat"}
    for args in (["--search", "relay token"], ["--search", "notify api token"],
                 ["--json", "--search", "RELAY_TOKEN"], ["what is the relay token?"]):
        query = subprocess.run([sys.executable, str(ENTRY.parent / "ai_query.py"), *args],
                               env=env, capture_output=True, text=True, timeout=120)
        blobs[f"ai-query {args}"] = (query.stdout + query.stderr).encode()

    run = tmp_path / "run"
    run.mkdir()
    dock = start_dock(settings, run, workers=1, extra_conf=EXTRA_CONF)
    try:
        url, same = dock.url, {"Origin": dock.url}
        asks = [
            {"question": "What is RELAY_TOKEN and NOTIFY_API_TOKEN?"},
            {"question": "Tell me the jellyfin password", "profile": "chat"},
            {"question": "Write a script that posts to the relay with its token",
             "profile": "code"},
            {"question": "Why did the mirror fail? What are MQTT_PW, WIFI_PSK, ALARM_PIN, "
                         "NOTIFY_API_TOKEN and MIRROR_MAX_DELETE_PCT?",
             "profile": "troubleshoot", "log_path": "rsync_mirror.log"},
        ]
        for body in asks:
            resp = httpx.post(url + "/api/ask", json=body, headers=same, timeout=60)
            assert resp.status_code == 200, resp.text
            blobs[f"POST /api/ask {body}"] = resp.content
        for path in ("/", "/api/profiles", "/api/status", "/api/tokens", "/api/chats",
                     "/api/logs?profile=troubleshoot"):
            resp = httpx.get(url + path, timeout=30)
            blobs[f"GET {path}"] = resp.content
        for chat in httpx.get(url + "/api/chats", timeout=30).json()["chats"]:
            blobs[f"GET chat {chat['id']}"] = httpx.get(url + f"/api/chats/{chat['id']}",
                                                        timeout=30).content
        draft = httpx.post(url + "/api/bug-reports/draft", headers=same, timeout=30, json={
            "profile": "troubleshoot", "title": "mirror fails", "what_happened":
            f"it printed {CONF_CANARIES[1]} (the wifi key)", "log_excerpt": JOB_LOG,
            "log_source": "rsync_mirror.log"})
        assert draft.status_code == 200, draft.text
        blobs["POST /api/bug-reports/draft"] = draft.content
        saved = httpx.post(url + "/api/bug-reports", headers=same, timeout=30,
                           json={"profile": "troubleshoot", "confirm": True, "draft":
                                 draft.json()["draft"]})
        assert saved.status_code == 201, saved.text
        blobs["POST /api/bug-reports"] = saved.content
    finally:
        dock.stop()

    blobs.update(_files_under(data, settings.ai_log_dir))
    blobs["dock stdout"] = dock.log_file.read_bytes()
    prompts = [r for r in model_server.requests if r.path in ("/api/chat", "/api/embed",
                                                              "/api/embeddings")]
    assert any("rsync_mirror" in str(r.json) for r in prompts)  # the log reached a prompt
    for i, record in enumerate(model_server.requests):
        blobs[f"model request {i} {record.path}"] = str(record.json).encode()
    total = sum(len(b) for b in blobs.values())
    hits = _found(blobs)
    print(f"canary sweep: {len(CANARIES)} canaries, {len(blobs)} sources, {total} bytes, "
          f"{len(model_server.requests)} model requests: {len(hits)} found")
    assert hits == []
