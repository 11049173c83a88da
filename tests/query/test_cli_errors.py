"""ai-query's honest errors: configuration errors exit 78 naming the key, --json always
prints one object, an unknown --kind is a usage error."""

from __future__ import annotations

import json

from tests.query.test_cli import run
from varaverk import exitcodes


def test_a_local_model_that_is_not_shipped_exits_78_naming_the_key(hl_settings):
    settings = hl_settings.replace(ai_log_dir=hl_settings.ai_data_dir.parent / "log-bge")
    out = run(settings, "--search", "x", enabled=False, env_extra={"AI_EMBED_MODEL": "bge-small"})
    assert out.returncode == exitcodes.CONFIG
    assert out.stderr.startswith("ai-query: configuration error: AI_EMBED_MODEL:")
    assert "Traceback" not in out.stderr
    logged = (settings.ai_log_dir / "ai-query.log").read_text()
    assert "AI_EMBED_MODEL" in logged and "Traceback" in logged


def test_json_without_an_index_still_prints_one_object(hl_settings, tmp_path):
    settings = hl_settings.replace(ai_data_dir=tmp_path / "nothing-here")
    out = run(settings, "--json", "--search", "what stops the mover")
    assert out.returncode == exitcodes.NO_INDEX
    data = json.loads(out.stdout)
    assert data["error"]["kind"] == "no_index" and "run ai-index" in data["error"]["message"]
    assert data["results"] == [] and data["mode"] == "search"
    out = run(settings, "--json", "what stops the mover")
    assert out.returncode == exitcodes.NO_INDEX
    assert json.loads(out.stdout)["mode"] == "answer"


def test_an_unknown_kind_is_a_usage_error_listing_the_kinds(hl_settings):
    out = run(hl_settings, "--search", "--kind", "bogus", "mover")
    assert out.returncode == exitcodes.USAGE
    assert "invalid choice: 'bogus'" in out.stderr
    for kind in ("header", "readme", "manual", "template", "doc"):
        assert repr(kind) in out.stderr
    assert "No matching documentation" not in out.stdout


def test_an_unknown_source_is_a_usage_error_naming_the_configured_ones(hl_settings):
    out = run(hl_settings, "--search", "--source", "vault", "mover")
    assert out.returncode == exitcodes.USAGE
    assert "--source 'vault' is not a configured source; choose one of repo" in out.stderr
    assert "No matching documentation" not in out.stdout
    assert run(hl_settings, "--search", "--source", "repo", "mover").returncode == exitcodes.OK
