"""Follow-up rewriting: model-free subject carrying and the model rewrite with its fallback."""

from __future__ import annotations

from varaverk.config import Settings
from varaverk.answering.rewrite import carry_subject, looks_dependent, model_rewrite, standalone_query

HISTORY = [
    {"role": "user", "content": "What does the mirror's merge interlock protect against?"},
    {"role": "assistant", "content": "In merge mode the delete pass only runs if pass one "
                                     "finished, see MIRROR_MODE."},
]


def test_dependent_questions():
    assert looks_dependent("Can --force-delete get around it?")
    assert looks_dependent("Why not the HTTP one?")
    assert looks_dependent("And the default?")
    assert not looks_dependent("How does the parity check get spread over several nights?")


def test_carry_subject_appends_the_previous_subject():
    out = carry_subject("Can --force-delete get around it?", HISTORY)
    assert out.startswith("Can --force-delete get around it? (")
    for term in ("mirror's", "merge", "interlock", "MIRROR_MODE"):
        assert term in out
    assert "--force-delete" not in out[len("Can --force-delete get around it?"):]


def test_carry_subject_takes_the_subject_from_the_assistant_turn_too():
    history = [{"role": "user", "content": "Is there a way to get a Python shell inside a running "
                                           "server to poke at it?"},
               {"role": "assistant", "content": "Yes, the manhole: add a listener of type "
                                                "manhole bound to localhost."}]
    out = carry_subject("What are the login details, and is that a problem?", history)
    assert out.startswith("What are the login details, and is that a problem? (")
    carried = out[out.index("(") + 1:-1].split()
    assert "manhole" in carried and "Python" in carried
    assert "localhost" not in carried  # the explanation after the subject stays behind
    assert len(carried) <= 12 and carried.count("manhole") == 1


def test_standalone_questions_are_left_alone():
    q = "How does the parity check get spread over several nights?"
    assert carry_subject(q, HISTORY) == q
    assert standalone_query(q, []) == q
    assert standalone_query("and it?", []) == "and it?"


def _client(server):
    from varaverk.answering.generation.chat_client import make_chat_client
    return make_chat_client(Settings(ai_gen_backend="ollama", ai_gen_model="m",
                                     ai_ollama_hosts=(server.base_url,), ai_http_timeout=5.0))


def test_model_rewrite_uses_the_model(model_server):
    model_server.script(content=["Can --force-delete ", "lift the merge-run delete interlock?"])
    out = model_rewrite("Can --force-delete get around it?", HISTORY, _client(model_server))
    assert out == "Can --force-delete lift the merge-run delete interlock?"
    sent = model_server.requests_to("/api/chat")[-1].json["messages"]
    assert "merge interlock" in sent[-1]["content"]
    assert sent[-1]["content"].endswith("Last question: Can --force-delete get around it?")


def test_model_rewrite_keeps_names_the_model_dropped(model_server):
    model_server.script(content=["Can it lift the merge-run delete interlock?"])
    out = model_rewrite("Can --force-delete get around it?", HISTORY, _client(model_server))
    assert out.endswith("(--force-delete)")


def test_model_rewrite_falls_back_on_error(model_server):
    model_server.fail_next("/api/chat", 500, {"error": "boom"})
    out = model_rewrite("Can --force-delete get around it?", HISTORY, _client(model_server))
    assert out == carry_subject("Can --force-delete get around it?", HISTORY)


def test_model_rewrite_falls_back_when_unreachable():
    from varaverk.answering.generation.chat_client import make_chat_client
    client = make_chat_client(Settings(ai_gen_backend="ollama", ai_gen_model="m",
                                       ai_ollama_hosts=("http://127.0.0.1:9",),
                                       ai_http_timeout=2.0))
    out = model_rewrite("Why not the HTTP one?", HISTORY, client)
    assert out == carry_subject("Why not the HTTP one?", HISTORY)


def test_model_answer_instead_of_a_question_falls_back(model_server):
    model_server.script(content=["Yes, it can be used to remove the delete pass."])
    out = model_rewrite("Can --force-delete get around it?", HISTORY, _client(model_server))
    assert out == carry_subject("Can --force-delete get around it?", HISTORY)
