"""End to end: the code profile's drafted shell is scanned before it is shown; other
profiles' answers are not scanned."""

from __future__ import annotations

from varaverk.config import Settings

ANSWER = [
    "Clean the build output like this:\n\n",
    "```bash\nset -euo pipefail\n# never: rm -rf /\n",
    'rm -rf "$OUT_DIR/"*\n',
    "```\n\nand on the NAS:\n\n```sh\nsudo wipefs -a /dev/sdb\n```\n",
]


def _settings(server, tmp_path) -> Settings:
    return Settings(ai_enabled=True, ai_repo_root=tmp_path, ai_data_dir=tmp_path / "data",
                    ai_log_dir=tmp_path / "log", ai_gen_backend="ollama",
                    ai_gen_model="fake-chat", ai_ollama_hosts=(server.base_url,),
                    ai_http_timeout=20.0, ai_host_name="hostA")


def test_code_profile_answer_comes_with_its_findings(model_server, tmp_path):
    from varaverk.answering.answer import TurnRequest, run_turn

    model_server.script(content=ANSWER)
    events = list(run_turn(TurnRequest(profile="code", question="script to clean the build dir"),
                           _settings(model_server, tmp_path)))
    done = next(e.data for e in events if e.type == "done")
    assert done["answer"] == "".join(ANSWER).strip()
    [found] = [e.data["findings"] for e in events if e.type == "findings"]
    assert [(f["rule"], f["snippet"]) for f in found] == [
        ("rm-empty-var", 'rm -rf "$OUT_DIR/"*'), ("wipefs", "sudo wipefs -a /dev/sdb")]
    assert all(f["reason"] for f in found)
    kinds = [e.type for e in events]
    assert kinds.index("findings") < kinds.index("done")


def test_chat_answers_are_not_scanned_and_reach_no_capability(model_server, tmp_path):
    from varaverk.answering.answer import TurnRequest, run_turn

    model_server.script(content=ANSWER)
    events = list(run_turn(TurnRequest(profile="chat", question="read /var/log/syslog for me",
                                       log_path="syslog"), _settings(model_server, tmp_path)))
    kinds = [e.type for e in events]
    assert "findings" not in kinds and "capability" not in kinds and "error" not in kinds
    [chat] = model_server.requests_to("/api/chat")
    assert "log lines" not in str(chat.json["messages"])
