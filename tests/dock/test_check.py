"""ai-dock --check validates the listening address for real: a port another program listens
on fails the check instead of passing it."""

from __future__ import annotations

import socket

from varaverk import exitcodes
from varaverk_dock.ai_dock import main


def _conf(tmp_path):
    conf = tmp_path / "master.conf"
    conf.write_text(f'AI_DATA_DIR="{tmp_path}/data"\nAI_LOG_DIR="{tmp_path}/log"\n')
    return str(conf)


def test_check_fails_for_a_port_already_in_use(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["--config", _conf(tmp_path), "--bind", f"127.0.0.1:{port}", "--check"])
    captured = capsys.readouterr()
    assert code == exitcodes.CONFIG
    assert f"AI_DOCK_BIND: 127.0.0.1:{port} is already in use" in captured.err
    assert "configuration ok" not in captured.out


def test_check_passes_for_a_free_port(tmp_path, capsys):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = main(["--config", _conf(tmp_path), "--bind", f"127.0.0.1:{port}", "--check"])
    assert code == exitcodes.OK
    assert f"configuration ok; would listen on http://127.0.0.1:{port}/" in capsys.readouterr().out
