"""AI_ENABLED=false: every /api route answers 503, the fleet ledger included."""

from __future__ import annotations

from varaverk_dock.app import create_app


def test_fleet_ledger_is_503_while_disabled(settings):
    settings = settings.replace(ai_enabled=False, ai_fleet_token="fleet-tok-123456")
    settings.token_db_path.write_text("2026-01-01|10:00:00|hostA|chat|cli|1|2|3.0\n")
    client = create_app(settings).test_client()
    resp = client.get("/api/fleet/ledger", headers={"Authorization": "Bearer fleet-tok-123456"})
    assert resp.status_code == 503
    assert "AI_ENABLED=false" in resp.get_json()["error"]
    assert b"hostA" not in resp.data


def test_every_api_route_is_503_while_disabled(settings):
    app = create_app(settings.replace(ai_enabled=False, ai_fleet_token="fleet-tok-123456"))
    client = app.test_client()
    rules = [r for r in app.url_map.iter_rules() if r.rule.startswith("/api/")]
    assert len(rules) >= 8
    for rule in rules:
        path = rule.rule.replace("<chat_id>", "c1").replace("<path:name>", "x")
        path = path.replace("<", "").replace(">", "")
        method = "GET" if "GET" in rule.methods else sorted(rule.methods - {"OPTIONS", "HEAD"})[0]
        resp = client.open(path, method=method, headers={"Origin": "http://localhost",
                                                         "Authorization": "Bearer fleet-tok-123456"})
        assert resp.status_code == 503, (rule.rule, resp.status_code)
