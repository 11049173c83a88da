"""The destructive-shell scanner: a table of snippets with expected verdicts, line mapping
for Markdown answers, and the ``ai-scan-shell`` console script's exit codes.

These snippets are data handed to the scanner; nothing here is ever run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from varaverk.answering.shell_scan import Finding, extract_shell_blocks, scan

ROOT = Path(__file__).resolve().parents[2]

# (snippet, rule expected among the findings)
DESTRUCTIVE: list[tuple[str, str]] = [
    ("rm -rf /", "rm-root"),
    ("rm -rf /*", "rm-root"),
    ("sudo rm -rf --no-preserve-root /", "rm-root"),
    ("rm -fr ~", "rm-root"),
    ("rm -rf ~/", "rm-root"),
    ('rm -rf "$HOME"', "rm-root"),
    ("rm -rf ${HOME}/*", "rm-root"),
    ("rm -rf $DIR/", "rm-empty-var"),
    ('rm -rf "$DIR/"*', "rm-empty-var"),
    ("rm -rf $BUILD_DIR", "rm-unquoted-var"),
    ('rm -rf "$PREFIX/usr"', "rm-empty-var"),
    ('rm -rf /mnt/user/appdata/"$APP"', "rm-empty-var"),
    ("rm -rf /mnt/user/photos", "rm-root"),
    ("rm -rf /mnt/disk*/appdata", "rm-root"),
    ("rm -rf /mnt/user", "rm-root"),
    ("rm -r -f /etc", "rm-root"),
    ("rm --recursive --force /var/", "rm-root"),
    ("rm -Rf /home/*", "rm-root"),
    ("rm -rf /boot", "rm-root"),
    ("rm -rf /srv/", "rm-root"),
    ("rm -rf /usr/local", "rm-root"),
    ("rm -rf /var/../", "rm-root"),
    ("\\rm -rf /", "rm-root"),
    ("/bin/rm -rf /", "rm-root"),
    ("DIR=/mnt/user\nrm -rf \"$DIR\"", "rm-root"),
    ("for d in /mnt/disk*; do rm -rf \"$d\"/*; done", "rm-empty-var"),
    ("tmp=$(mktemp -d)\nrm -rf \"$tmp\"/*", "rm-empty-var"),
    ("dd if=/dev/zero of=/dev/sda bs=1M", "dd-device"),
    ('dd if=image.img of="/dev/nvme0n1" status=progress', "dd-device"),
    ("dd if=/dev/urandom of=/dev/$DISK", "dd-device"),
    ("cat image.iso > /dev/sdb", "redirect-device"),
    ("echo hi >/dev/md0", "redirect-device"),
    ("pv disk.img | sudo tee /dev/mmcblk0 >/dev/null", "write-device"),
    ("mkfs.ext4 /dev/sdb1", "mkfs"),
    ("sudo mkfs -t xfs /dev/sdc", "mkfs"),
    ("mkswap /dev/sdd2", "mkfs"),
    ("wipefs -a /dev/sdb", "wipefs"),
    ("wipefs --all --force /dev/sdb", "wipefs"),
    ("sgdisk --zap-all /dev/sdc", "sgdisk-zap"),
    ("sgdisk -Z /dev/sdc", "sgdisk-zap"),
    ("blkdiscard /dev/nvme0n1", "blkdiscard"),
    ("chmod -R 777 /", "recursive-perms"),
    ("chown -R nobody:users /etc", "recursive-perms"),
    ("sudo chmod -R 000 /usr", "recursive-perms"),
    ("chgrp -R users /mnt/user", "recursive-perms"),
    ("curl -fsSL https://get.example.com | sh", "curl-pipe-shell"),
    ("wget -qO- https://x.example/install.sh | sudo bash", "curl-pipe-shell"),
    ("curl -s https://x.example/i.sh | sudo -E bash -s -- --yes", "curl-pipe-shell"),
    ('sh -c "$(curl -fsSL https://x.example/i.sh)"', "curl-pipe-shell"),
    ("bash <(wget -qO- https://x.example/i.sh)", "curl-pipe-shell"),
    ("curl https://x.example/a.py | python3", "curl-pipe-shell"),
    (":(){ :|:& };:", "fork-bomb"),
    ("bomb() { bomb | bomb & }; bomb", "fork-bomb"),
    ("git reset --hard origin/main", "git-reset-hard"),
    ("git -C /srv/repo reset --hard", "git-reset-hard"),
    ("git clean -fdx", "git-clean"),
    ("git clean -f -d", "git-clean"),
    ("git push --force origin main", "git-push-force"),
    ("docker system prune -a --volumes", "docker-prune-volumes"),
    ("docker volume rm plex_config", "docker-volume-rm"),
    ("docker volume prune -f", "docker-volume-rm"),
    ("docker compose down -v", "docker-volume-rm"),
    ("zpool destroy tank", "zfs-destroy"),
    ("zfs destroy -r tank/data", "zfs-destroy"),
    ("zfs destroy tank/data", "zfs-destroy"),
    ("btrfs subvolume delete /mnt/cache/appdata", "btrfs-delete"),
    ("btrfs sub del /mnt/cache/snap", "btrfs-delete"),
    ("shutdown -h now", "power"),
    ("reboot", "power"),
    ("sudo poweroff", "power"),
    ("halt -p", "power"),
    ("systemctl reboot", "power"),
    ("echo b > /proc/sysrq-trigger", "sysrq"),
    ("find / -name '*.tmp' -delete", "find-delete-root"),
    ("find /mnt/user -type f -exec rm -f {} +", "find-delete-root"),
    ("find ~ -delete", "find-delete-root"),
    ("truncate -s 0 /etc/passwd", "truncate-system-file"),
    (":> /etc/fstab", "truncate-system-file"),
    ("> /etc/shadow", "truncate-system-file"),
    ('echo "root::0:0::/root:/bin/sh" > /etc/passwd', "overwrite-critical-file"),
    ("mv ~/file /dev/null", "mv-dev-null"),
    ("mv /etc /tmp/etc.old", "mv-root"),
    ("kill -9 -1", "kill-all"),
    ("kill -KILL -1", "kill-all"),
    ("iptables -F", "firewall-flush"),
    ("iptables -P INPUT DROP", "firewall-flush"),
    ("nft flush ruleset", "firewall-flush"),
    ("crontab -r", "crontab-remove"),
    ("rsync -a --delete \"$SRC/\" /mnt/backup/", "rsync-delete"),
    ("rsync -a --delete ./empty/ /mnt/user/", "rsync-delete"),
    ("cryptsetup luksFormat /dev/sdb", "cryptsetup"),
    ("mdadm --zero-superblock /dev/sdb1", "mdadm"),
    ("lvremove -f vg0/data", "lvm-remove"),
    # Quoting and nesting do not hide a command that really runs.
    ('bash -c "rm -rf /"', "rm-root"),
    ("sudo sh -c 'rm -rf /var'", "rm-root"),
    ("ssh nas 'rm -rf /mnt/user/*'", "rm-root"),
    ('eval "rm -rf /etc"', "rm-root"),
    ('echo "rm -rf /" | sh', "rm-root"),
    ("echo $(rm -rf /)", "rm-root"),
    ("docker exec -it app rm -rf /", "rm-root"),
    ("bash <<'EOF'\nrm -rf /srv\nEOF", "rm-root"),
    ("x=1; rm -rf /; echo done", "rm-root"),
    ("cd /tmp && sudo rm -rf /", "rm-root"),
    # Syntax bashlex rejects still gets scanned by the fallback tokenizer.
    ("if [[ -d $X ]]; then rm -rf $X; fi", "rm-unquoted-var"),
    ("case $a in\n  x) rm -rf /;;\nesac", "rm-root"),
    ("echo $(( 1+2 )); rm -rf /var", "rm-root"),
    ("arr=(a b); rm -rf /etc", "rm-root"),
    ("if true; then\n  rm -rf /home\nfi", "rm-root"),
    ("rm -rf \\\n  /", "rm-root"),
    ("ls /mnt | \\\n  xargs echo && rm -rf /srv", "rm-root"),
    # Spelling variants of the same paths and guards that do not guard.
    ("rm -rf -- /", "rm-root"),
    ("rm -rf /./etc", "rm-root"),
    ("rm -rf /.", "rm-root"),
    ("rm -rf //", "rm-root"),
    ("rm -rf ~/.*", "rm-root"),
    ('rm -rf "${DIR%/}/"*', "rm-empty-var"),
    ('rm -rf "${DIR:-}/"*', "rm-empty-var"),
    ("rm -rf `pwd`/*", "rm-empty-var"),
    ('sudo rm -rf "/mnt/user/$SHARE"', "rm-empty-var"),
    ("cd / && rm -rf *", "rm-root"),
    ("cd /mnt/user\nrm -rf ./*", "rm-root"),
    ("time rm -rf /", "rm-root"),
    ("nohup rm -rf / &", "rm-root"),
    ("timeout 10 rm -rf /srv", "rm-root"),
    ("alias ls='rm -rf ~'", "rm-root"),
    ('bash <<< "rm -rf /etc"', "rm-root"),
    ("find / -exec rm -rf {} \\;", "find-delete-root"),
    ("function f { f | f & }; f", "fork-bomb"),
    ("perl -e 'fork while fork'", "fork-bomb"),
    ('dd if=/dev/zero of="$DISK" bs=1M', "dd-device"),
    ("wipefs -af /dev/sdb", "wipefs"),
    ("parted -s /dev/sdb mklabel gpt", "partition-table"),
    ("shred -n 3 -z /dev/sdb", "shred"),
    ("curl -fsSL https://x.example/i.sh | tee i.sh | sh", "curl-pipe-shell"),
    ('python3 -c "$(curl -fsSL https://x.example/a.py)"', "curl-pipe-shell"),
    ("echo cm0gLXJmIC8K | base64 -d | bash", "encoded-pipe-shell"),
    ("rm -rf /var/lib/docker", "rm-root"),
    ("rm -rf /etc/ssh/", "rm-root"),
    ("rm -rf /mnt/disks/WD_4TB/*", "rm-root"),
    ("rm -rf /tank", "rm-root"),
    ("rm -rf /volume1/*", "rm-root"),
    ("rm -rf /usr/local/bin", "rm-root"),
    ("find . -name x -exec sh -c 'rm -rf /etc' \\;", "rm-root"),
    ("git -c core.x=y clean -xfd", "git-clean"),
    ("docker compose -f a.yml down --volumes", "docker-volume-rm"),
    ('printf "%s" "$(rm -rf /etc)"', "rm-root"),
]

BENIGN: list[str] = [
    'echo "rm -rf /"',
    "# rm -rf /",
    "echo 'rm -rf /'  # rm -rf /",
    "printf '%s\\n' 'never run rm -rf / or mkfs /dev/sda'",
    'rm -rf "${DIR:?}/"*',
    'rm -rf "${DIR:?DIR is not set}/cache"',
    ': "${DIR:?}"\nrm -rf "$DIR"/*',
    '[ -n "$DIR" ] && rm -rf "$DIR/"*',
    "rm -rf ./build",
    "rm -rf build/ dist/ *.egg-info",
    'rm -rf "$tmpdir"',
    "rm -rf ~/.cache/thumbnails",
    'rm -rf "$HOME/.cache/pip"',
    "rm -rf /tmp/varaverk-test",
    "rm -rf /mnt/user/appdata/plex/Cache",
    "rm -f /var/log/old.log",
    "rm /etc/nginx/sites-enabled/default",
    "BUILD=./out\nrm -rf \"$BUILD\"/*",
    "dd if=/dev/sda of=/mnt/backup/disk.img bs=4M",
    "dd if=/dev/zero of=./test.img bs=1M count=10",
    "cat notes.txt > /dev/null",
    "command >/dev/null 2>&1",
    "wipefs /dev/sdb",
    "wipefs -n -a /dev/sdb",
    "sgdisk -p /dev/sdc",
    "lsblk -f",
    "chmod -R 755 ./public",
    "chown -R nobody:users /mnt/user/appdata/plex",
    "chmod 600 ~/.ssh/id_ed25519",
    "curl -fsSLo install.sh https://get.example.com && less install.sh",
    "curl -s https://api.example.com/status | jq .",
    "wget -qO- https://example.com/data.json | python3 parse.py",
    "echo ':(){ :|:& };:'",
    "git reset --soft HEAD~1",
    "git clean -n -d",
    "git status --short",
    "git push --force-with-lease origin feature",
    "docker system prune -f",
    "docker image prune -a",
    "docker compose down",
    "docker volume ls",
    "zfs destroy tank/data@auto-2024-01-01",
    "zfs list -t snapshot",
    "btrfs subvolume list /mnt/cache",
    "shutdown -c",
    "systemctl restart nginx",
    "find . -name '*.pyc' -delete",
    "find /var/log/harborlab -name '*.gz' -mtime +30 -delete",
    "find /mnt/user/photos -type f -name '*.jpg' | wc -l",
    "truncate -s 0 /var/log/syslog",
    "kill -HUP 1234",
    "kill -1 1234",
    "iptables -L -n",
    "crontab -l",
    "rsync -a --delete /mnt/user/photos/ backup@harbor02:/mnt/backup/photos/",
    'rsync -an --delete "$src" "$MIRROR_DEST/$share/" | grep -c "^del"',
    "mv old.conf /tmp/old.conf",
    "cat <<EOF > /tmp/notes.txt\nrm -rf /\nmkfs.ext4 /dev/sda\nEOF",
    "grep -rn 'rm -rf /' .",
    "man shutdown",
    "apt-get install -y smartmontools",
    "tar -czf backup.tgz /etc",
    "smartctl -a /dev/sda",
    'ssh nas "df -h /mnt/user"',
    'bash -c "echo rm -rf /"',
    "mkdir -p /mnt/user/backup && cp -a src/ /mnt/user/backup/",
    "cd /tmp/build && rm -rf ./*",
    "cd ~/src/app && rm -rf node_modules",
    "alias ll='ls -la'",
    'bash <<< "echo hi"',
    'dd if=/dev/zero of="$IMG" bs=1M count=100',
    "perl -e 'print 1'",
    'rm -rf "${TMPDIR:-/tmp}/varaverk"',
    "python3 -c 'import os; print(os.getcwd())'",
    "rm -rf /var/lib/apt/lists/*",
    "rm -rf /tmp/*",
    "rm -f /etc/nginx/sites-enabled/default",
    "rm -rf /etc/apt/sources.list.d/old.list",
    "chown -R nobody:users /mnt/user/appdata",
    "chown -R www-data:www-data /var/lib/nextcloud",
    "chmod -R go-w ~/",
    "echo rm -rf / > notes.txt",
    "git -C /srv/repo log --oneline",
]


@pytest.mark.parametrize("snippet,rule", DESTRUCTIVE, ids=[s for s, _ in DESTRUCTIVE])
def test_destructive_snippet_is_found(snippet, rule):
    findings = scan(snippet, markdown=False)
    assert findings, f"missed: {snippet!r}"
    assert rule in {f.rule for f in findings}, findings
    for f in findings:
        assert f.reason and f.snippet and f.line >= 1


@pytest.mark.parametrize("snippet", BENIGN, ids=BENIGN)
def test_benign_snippet_has_no_finding(snippet):
    assert scan(snippet, markdown=False) == []


def test_table_size():
    assert len(DESTRUCTIVE) >= 30 and len(BENIGN) >= 30


def test_finding_reports_the_line_of_the_command():
    script = "#!/bin/sh\nset -eu\n# rm -rf / is what we avoid\necho start\nrm -rf $TARGET/\necho end\n"
    findings = scan(script)
    assert [(f.line, f.rule) for f in findings] == [(5, "rm-empty-var")]
    assert findings[0].snippet == "rm -rf $TARGET/"
    assert "TARGET" in findings[0].reason and "/" in findings[0].reason


def test_markdown_answer_maps_findings_to_answer_lines():
    answer = (
        "Here is how to clean up:\n"          # 1
        "\n"                                  # 2
        "```bash\n"                           # 3
        "cd /srv/app\n"                       # 4
        "rm -rf ./build\n"                    # 5
        "rm -rf \"$OUT/\"*\n"                 # 6
        "```\n"                               # 7
        "\n"                                  # 8
        "Never run rm -rf / by hand.\n"       # 9  prose: not scanned
        "\n"                                  # 10
        "```python\n"                         # 11
        "os.system('rm -rf /')\n"             # 12 not shell: not scanned
        "```\n"                               # 13
        "```\n"                               # 14 untagged: scanned
        "sudo mkfs.ext4 /dev/sdb1\n"          # 15
        "```\n"                               # 16
        "~~~console\n"                        # 17
        "$ git reset --hard\n"                # 18
        "HEAD is now at 1234abc\n"            # 19 output, not a command
        "~~~\n"                               # 20
    )
    findings = scan(answer)
    assert [(f.line, f.rule) for f in findings] == [
        (6, "rm-empty-var"), (15, "mkfs"), (18, "git-reset-hard")]
    assert findings[2].snippet == "git reset --hard"


def test_markdown_mode_never_reads_prose_as_commands():
    answer = "Reboot the server, then run the check.\nshutdown is not needed."
    assert scan(answer, markdown=True) == []
    assert [f.rule for f in scan("reboot\n", markdown=False)] == ["power"]


def test_extract_shell_blocks_reports_first_code_line():
    blocks = extract_shell_blocks("a\n```sh\nls\npwd\n```\n")
    assert blocks == [(3, "ls\npwd\n")]


def test_unterminated_quote_does_not_crash_and_still_scans_earlier_lines():
    findings = scan("rm -rf /etc\necho \"unterminated\n", markdown=False)
    assert [f.rule for f in findings] == ["rm-root"]


def test_finding_to_dict_is_json_ready():
    f = scan("rm -rf /", markdown=False)[0]
    assert isinstance(f, Finding)
    assert set(f.to_dict()) == {"line", "reason", "snippet", "rule"}


# ── the console script ──

def run_cli(*args, stdin: str | None = None):
    return subprocess.run([sys.executable, str(ROOT / "Tools" / "varaverk_tools" / "ai_scan_shell.py"), *args],
                          input=stdin, capture_output=True, text=True, timeout=60)


def test_cli_exit_1_and_lists_findings_for_a_destructive_file(tmp_path):
    script = tmp_path / "cleanup.sh"
    script.write_text("#!/bin/bash\necho ok\nrm -rf \"$STEAMROOT/\"*\n", encoding="utf-8")
    out = run_cli(str(script))
    assert out.returncode == 1, out.stderr
    assert f"{script}:3:" in out.stdout
    assert "STEAMROOT" in out.stdout


def test_cli_exit_0_for_a_benign_file(tmp_path):
    script = tmp_path / "ok.sh"
    script.write_text("#!/bin/sh\n# rm -rf /\necho 'rm -rf /'\nrm -rf ./build\n", encoding="utf-8")
    out = run_cli(str(script))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout == ""


def test_cli_reads_stdin_with_dash():
    out = run_cli("-", stdin="ls\nsudo wipefs -a /dev/sdb\n")
    assert out.returncode == 1
    assert "<stdin>:2:" in out.stdout and "wipefs" in out.stdout


def test_cli_markdown_file_uses_answer_lines(tmp_path):
    md = tmp_path / "answer.md"
    md.write_text("Text\n\n```bash\nrm -rf /\n```\n", encoding="utf-8")
    out = run_cli(str(md))
    assert out.returncode == 1
    assert f"{md}:4:" in out.stdout


def test_cli_usage_errors_exit_2(tmp_path):
    assert run_cli(str(tmp_path / "missing.sh")).returncode == 2
    assert run_cli("a", "b").returncode == 2


@pytest.mark.parametrize("snippet,rule", DESTRUCTIVE, ids=[s for s, _ in DESTRUCTIVE])
def test_fallback_tokenizer_alone_misses_nothing(monkeypatch, snippet, rule):
    """With bashlex failing on everything, the quote-aware fallback still finds each one."""
    import bashlex

    def refuse(_text):
        raise NotImplementedError("forced fallback")

    monkeypatch.setattr(bashlex, "parse", refuse)
    assert rule in {f.rule for f in scan(snippet, markdown=False)}


@pytest.mark.parametrize("snippet", BENIGN, ids=BENIGN)
def test_fallback_tokenizer_alone_keeps_benign_snippets_clean(monkeypatch, snippet):
    import bashlex

    def refuse(_text):
        raise NotImplementedError("forced fallback")

    monkeypatch.setattr(bashlex, "parse", refuse)
    assert scan(snippet, markdown=False) == []
