"""The scheduling files in Deployment/: timers start their services, cron matches the timers."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

DEPLOYMENT = Path(__file__).resolve().parents[2] / "Deployment"
JOBS = {"varaverk-token-sync": "ai-token-sync", "varaverk-git-pull": "git-pull-execute"}


def _unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str
    parser.read_string((DEPLOYMENT / name).read_text())
    return parser


@pytest.mark.parametrize("job, script", JOBS.items())
def test_each_timer_starts_its_oneshot_service_running_the_console_script(job, script):
    timer = _unit(f"{job}.timer")
    assert timer["Timer"]["Unit"] == f"{job}.service"
    assert timer["Install"]["WantedBy"] == "timers.target"
    service = _unit(f"{job}.service")["Service"]
    assert service["Type"] == "oneshot"
    assert service["ExecStart"].split()[0] == f"@VENV@/bin/{script}"
    assert service["SuccessExitStatus"] == "75"
    assert "PrivateTmp" not in service  # the partner cache in /tmp is shared with the dock


def test_schedules_every_four_hours_and_daily():
    assert _unit("varaverk-token-sync.timer")["Timer"]["OnCalendar"] == "*-*-* 00/4:00:00"
    assert _unit("varaverk-git-pull.timer")["Timer"]["OnCalendar"] == "*-*-* 04:30:00"
    if shutil.which("systemd-analyze"):
        for spec in ("*-*-* 00/4:00:00", "*-*-* 04:30:00"):
            subprocess.run(["systemd-analyze", "calendar", spec], check=True,
                           capture_output=True)


def test_cron_lines_match_the_timers():
    lines = [line.split() for line in (DEPLOYMENT / "varaverk.cron").read_text().splitlines()
             if line.strip() and not line.startswith("#") and "=" not in line.split()[0]]
    jobs = {(tuple(f[:5]) if not f[0].startswith("@") else (f[0],)):
            next(w for w in f if w.startswith("@VENV@/bin/")) for f in lines}
    assert jobs == {("7", "*/4", "*", "*", "*"): "@VENV@/bin/ai-token-sync",
                    ("@reboot",): "@VENV@/bin/ai-token-sync",
                    ("30", "4", "*", "*", "*"): "@VENV@/bin/git-pull-execute"}
    for fields in lines:
        user = fields[1] if fields[0].startswith("@") else fields[5]
        assert user == "@USER@"  # /etc/cron.d format carries the user
