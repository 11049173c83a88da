"""Live health: load, memory, uptime, disk usage of the configured mounts, service states.

Contract: ``live_health(profile, settings) -> HealthReport`` (requires ``live_health``);
``HealthReport.block()`` is the prompt context block. Figures come from psutil; service
states from ``systemctl is-active`` (systemd hosts) or ``docker inspect`` (names written
``docker:NAME``), each bounded by a short timeout. Where the host cannot tell, the state is
``unknown`` with the reason, never a guess.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import psutil

from varaverk.answering.profiles import LIVE_HEALTH

log = logging.getLogger("varaverk.answering.capabilities")
COMMAND_TIMEOUT = 3.0


def human_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KiB`` (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def human_duration(seconds: float) -> str:
    """``273900`` -> ``3 days 4:05``."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    day_part = f"{days} day{'s' if days != 1 else ''} " if days else ""
    return f"{day_part}{hours}:{minutes:02d}"


@dataclass
class HealthReport:
    """A snapshot of this host. Sizes in bytes, durations in seconds."""

    host: str
    taken_at: str
    load: tuple[float, float, float]
    cpus: int
    memory: dict
    swap: dict
    uptime_s: float
    disks: list[dict] = field(default_factory=list)
    services: list[dict] = field(default_factory=list)

    def block(self) -> str:
        """The prompt context block, one fact per line."""
        m, s = self.memory, self.swap
        lines = [
            f"[live health of {self.host} at {self.taken_at}]",
            f"load average {self.load[0]:.2f} {self.load[1]:.2f} {self.load[2]:.2f} "
            f"(1, 5, 15 min; {self.cpus} CPUs)",
            f"memory {human_bytes(m['used'])} of {human_bytes(m['total'])} used "
            f"({m['percent']:.0f}%), {human_bytes(m['available'])} available; swap "
            f"{human_bytes(s['used'])} of {human_bytes(s['total'])} used",
            f"uptime {human_duration(self.uptime_s)}",
        ]
        for d in self.disks:
            if d.get("error"):
                lines.append(f"disk {d['mount']}: {d['error']}")
            else:
                note = "" if d["is_mount"] else " (not a mount point: nothing is mounted there)"
                lines.append(f"disk {d['mount']} {human_bytes(d['used'])} of "
                             f"{human_bytes(d['total'])} used ({d['percent']:.0f}%), "
                             f"{human_bytes(d['free'])} free{note}")
        for svc in self.services:
            lines.append(f"service {svc['name']}: {svc['state']}"
                         + (f" ({svc['detail']})" if svc.get("detail") else ""))
        return "\n".join(lines)


def _run(cmd: list[str]) -> tuple[int, str]:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT,
                             check=False)
    except subprocess.TimeoutExpired:
        return -1, "timed out"
    except OSError as exc:
        return -1, str(exc)
    return out.returncode, (out.stdout.strip() or out.stderr.strip())


def service_state(name: str) -> dict:
    """{"name", "state", "detail"} for a systemd unit or a ``docker:NAME`` container."""
    if name.startswith(("docker:", "container:")):
        container = name.split(":", 1)[1]
        if not shutil.which("docker"):
            return {"name": name, "state": "unknown", "detail": "docker is not installed"}
        code, out = _run(["docker", "inspect", "-f", "{{.State.Status}}", container])
        if code == 0 and out:
            return {"name": name, "state": out.splitlines()[0], "detail": ""}
        return {"name": name, "state": "unknown", "detail": (out.splitlines() or [""])[0][:160]}
    if not shutil.which("systemctl") or not Path("/run/systemd/system").is_dir():
        return {"name": name, "state": "unknown", "detail": "this host does not run systemd"}
    code, out = _run(["systemctl", "is-active", "--", name])
    state = (out.splitlines() or ["unknown"])[0].strip() or "unknown"
    return {"name": name, "state": state, "detail": "" if code >= 0 else out}


def disk_state(mount: str) -> dict:
    """{"mount", "total", "used", "free", "percent", "is_mount"} or {"mount", "error"}."""
    try:
        usage = psutil.disk_usage(mount)
    except (OSError, FileNotFoundError) as exc:
        return {"mount": mount, "error": f"cannot be read ({exc.strerror or exc})"}
    return {"mount": mount, "total": usage.total, "used": usage.used, "free": usage.free,
            "percent": usage.percent, "is_mount": os.path.ismount(mount)}


def live_health(profile, settings) -> HealthReport:
    """A snapshot of this host's health. Requires ``live_health``; raises CapabilityDenied."""
    profile.require(LIVE_HEALTH)
    vm = psutil.virtual_memory()
    sw = psutil.swap_memory()
    report = HealthReport(
        host=settings.ai_host_name,
        taken_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        load=tuple(psutil.getloadavg()),
        cpus=psutil.cpu_count() or 1,
        memory={"total": vm.total, "used": vm.total - vm.available, "available": vm.available,
                "percent": vm.percent},
        swap={"total": sw.total, "used": sw.used},
        uptime_s=max(0.0, time.time() - psutil.boot_time()),
        disks=[disk_state(m) for m in settings.ai_health_mounts],
        services=[service_state(s) for s in settings.ai_health_services],
    )
    log.info("live health: read load, memory, %d disks, %d services", len(report.disks),
             len(report.services))
    return report
