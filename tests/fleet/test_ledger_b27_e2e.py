"""B27 end to end: a real Ollama-speaking server omits prompt_eval_count; the ledger line is
exact, with an empty (unknown) prompt count, never a fabricated 0."""

from __future__ import annotations

import datetime as dt

import pytest

from varaverk.ledger.rows import parse_line, row_from_completion
from varaverk.ledger.storage import append_row, read_rows
from varaverk.ledger.totals import totals
from varaverk.config import Settings
from varaverk.answering.generation.chat_client import make_chat_client


def _complete(model_server, tmp_path):
    settings = Settings(ai_gen_backend="ollama", ai_ollama_hosts=(model_server.base_url,),
                        ai_gen_model="m", ai_data_dir=tmp_path, ai_http_timeout=10.0)
    client = make_chat_client(settings)
    events = list(client.stream([{"role": "user", "content": "When do backups run?"}]))
    [done] = [e for e in events if e.type == "done"]
    return done.completion


@pytest.mark.parametrize("overrides, line", [
    ({"eval_count": 12, "eval_duration": 600000000},
     "2025-01-02|10:15:00|hostA|varaverk|cli||12|20.0"),
    ({"eval_count": 12, "eval_duration": None}, "2025-01-02|10:15:00|hostA|varaverk|cli||12|"),
    ({"eval_count": 12, "eval_duration": 0}, "2025-01-02|10:15:00|hostA|varaverk|cli||12|"),
])
def test_b27_ledger_line_from_a_real_stream(model_server, tmp_path, overrides, line):
    model_server.omit_prompt_eval_count = True
    model_server.created_at = "2031-06-30T23:59:59Z"  # a server clock far off
    model_server.final_overrides = overrides
    completion = _complete(model_server, tmp_path)
    path = tmp_path / "tokens.db"
    # Dated by this host's clock (given here), whatever the server's created_at says.
    now = dt.datetime(2025, 1, 2, 10, 15, tzinfo=dt.timezone.utc)
    append_row(path, row_from_completion(completion, "hostA", "varaverk", "cli",
                                         now=now))
    assert path.read_text() == line + "\n"
    result = totals({"hostA": read_rows(path, host="hostA")[0]},
             parse_line(line).day)
    tally = result.fleet["today"]
    assert (tally.rows, tally.prompt_tokens, tally.unknown_prompt, tally.completion_tokens) == \
        (1, 0, 1, 12)
