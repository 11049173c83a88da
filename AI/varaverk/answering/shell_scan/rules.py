"""The rules: one method per command name, each deciding whether that command is destructive.

A rule is ``_rule_<name>(cmd, name, args, values, add)``: ``args`` are the command's words after
its name (prefixes such as ``sudo`` already stripped), ``values`` their quote-removed text, and
``add(reason, rule_id)`` records a finding on the command's line. Rules read ``self.env``
(what is known of variables) and ``self.cwd``, which the scanner keeps as it walks the text.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from .commands import Command, Word, after_options, basename, operands, short_flags
from .paths import (BLOCK_DEVICE, CRITICAL_FILES, SAFE_DEV, SYSTEM_FILE_DIRS, resolve,
                    root_kind)

Add = Callable[[str, str], None]
_MKFS_NAMES = ("mkswap", "mkdosfs", "mkntfs", "mkexfatfs", "mkreiserfs")


class Rules:
    """The destructive-command table, mixed into the scanner."""

    env: dict[str, str]
    cwd: str | None

    def rule_for(self, name: str) -> Callable | None:
        """The rule for command ``name`` (a basename), or None when it has none."""
        if name.startswith(("mkfs", "mke2fs")) or name in _MKFS_NAMES:
            return self._rule_mkfs
        if re.fullmatch(r"python[0-9.]*", name):
            return None
        return getattr(self, "_rule_" + re.sub(r"[^a-z0-9]", "_", name.lower()), None)

    def _in_cwd(self, path: str) -> str:
        """``path`` made absolute against a known working directory (else unchanged)."""
        if self.cwd is None or not path or path.startswith(("/", "~", "\x01")):
            return path
        return posixpath.join(self.cwd, path)

    @staticmethod
    def _guarded_inline(cmd: Command, var: str) -> bool:
        """``[ -n "$X" ] && rm -rf "$X/"*`` on one line guards X for that line."""
        return bool(re.search(r"(-[nd]|-e)\s+\"?\$\{?" + re.escape(var) + r"\b[^&|;]*\]+\s*&&",
                              cmd.guard_text))

    def _recursive_delete_targets(self, cmd: Command, targets: list[Word], what: str, add,
                                  rule: str) -> None:
        for w in targets:
            r = resolve(w.raw, self.env)
            kind = root_kind(self._in_cwd(r.full))
            if kind:
                add(f"{what} {kind}", rule)
                continue
            risky = [v for v in r.maybe_empty if not self._guarded_inline(cmd, v.strip("${}()`"))]
            if risky:
                empty_kind = root_kind(r.empty_case) if r.empty_case else None
                if empty_kind:
                    add(f"{what} {w.raw}: if {risky[0]} is empty or unset this becomes "
                        f"{r.empty_case} ({empty_kind}); guard it with ${{{risky[0]}:?}}",
                        "rm-empty-var")
                    continue
            unquoted = [v for v in r.unquoted if not self._guarded_inline(cmd, v)]
            if unquoted:
                add(f"{what} the unquoted variable {w.raw}: empty, it can widen to another "
                    f"path, and word splitting or globbing can hit others; quote it and guard "
                    f"with ${{{unquoted[0]}:?}}", "rm-unquoted-var")

    def _rule_rm(self, cmd, name, args, values, add) -> None:
        flags = short_flags(values)
        if "--no-preserve-root" in flags:
            add("rm --no-preserve-root disables the last protection of /", "rm-root")
        if not flags & {"-r", "-R", "--recursive"}:
            return
        self._recursive_delete_targets(cmd, operands(args), "recursive delete of", add,
                                       "rm-root")

    def _rule_find(self, cmd, name, args, values, add) -> None:
        deletes = "-delete" in values or any(
            v in ("-exec", "-execdir", "-ok") and i + 1 < len(values)
            and basename(values[i + 1]) in ("rm", "shred", "unlink")
            for i, v in enumerate(values))
        if not deletes:
            return
        starts: list[Word] = []
        for w in args:
            if w.value.startswith(("-", "(", "!")) and w.value not in ("-H", "-L", "-P"):
                break
            if w.value not in ("-H", "-L", "-P"):
                starts.append(w)
        for w in starts:
            kind = root_kind(resolve(w.raw, self.env).full)
            if kind:
                add(f"find deletes files under {kind}", "find-delete-root")
                return
        self._recursive_delete_targets(cmd, starts, "find deletes under", add, "find-delete-root")

    def _rule_dd(self, cmd, name, args, values, add) -> None:
        for w in args:
            if w.value.startswith("of="):
                target = w.raw.split("=", 1)[1]
                path = resolve(target, self.env).full
                if path.startswith("/dev/") and not SAFE_DEV.match(path):
                    add(f"dd writes onto the device {path}, overwriting whatever is on it",
                        "dd-device")
                elif re.fullmatch(r"\x01[A-Za-z_]*(DISK|DEV|DRIVE|BLK|BLOCK|NVME|TARGET)"
                                  r"[A-Za-z0-9_]*\x01", path, re.I):
                    add(f"dd writes onto {target}, which by its name is a disk: check it is "
                        "the device you mean before running", "dd-device")

    def _rule_mkfs(self, cmd, name, args, values, add) -> None:
        if set(values) & {"--help", "-V", "--version"}:
            return
        if name.startswith(("mke2fs", "mkfs.ext")) and "-n" in short_flags(values):
            return
        target = next((v for v in reversed(values) if v.startswith("/dev/") or "$" in v), "a device")
        add(f"{name} creates a new filesystem on {target}, erasing everything on it", "mkfs")

    def _rule_wipefs(self, cmd, name, args, values, add) -> None:
        flags = short_flags(values)
        if flags & {"-a", "--all", "-o", "--offset"} and not flags & {"-n", "--no-act"}:
            add("wipefs erases filesystem, RAID and partition-table signatures", "wipefs")

    def _rule_sgdisk(self, cmd, name, args, values, add) -> None:
        if set(values) & {"-Z", "-z", "--zap", "--zap-all", "-o", "--clear"} or any(
                v.startswith(("--zap", "--clear")) for v in values):
            add("sgdisk wipes the partition table (GPT and MBR)", "sgdisk-zap")
        elif set(values) & {"-d", "--delete"} or any(v.startswith("--delete=") for v in values):
            add("sgdisk deletes a partition", "sgdisk-zap")

    def _rule_sfdisk(self, cmd, name, args, values, add) -> None:
        if not set(values) & {"-l", "--list", "-d", "--dump", "-s", "--show-size", "-V",
                              "--verify", "-n", "--no-act", "-J", "--json", "--help",
                              "-r", "--reorder"} and any(v.startswith("/dev/") or "$" in v
                                                         for v in values):
            add("sfdisk rewrites the partition table of the device", "partition-table")

    def _rule_parted(self, cmd, name, args, values, add) -> None:
        lowered = [v.lower() for v in values]
        if set(lowered) & {"mklabel", "mktable", "rm", "mkpart", "resizepart"}:
            add("parted changes the partition table (mklabel/rm erase partitions)",
                "partition-table")

    def _rule_fdisk(self, cmd, name, args, values, add) -> None:
        if not set(values) & {"-l", "--list", "--help", "-V"} and (
                cmd.index > 0 or cmd.heredoc is not None or any(op == "<" for op, _ in cmd.redirects)):
            add(f"{name} is being fed scripted input: it will write a new partition table",
                "partition-table")

    _rule_gdisk = _rule_fdisk

    def _rule_blkdiscard(self, cmd, name, args, values, add) -> None:
        if "--help" not in values:
            add("blkdiscard discards every block of the device: its data is gone at once",
                "blkdiscard")

    def _rule_shred(self, cmd, name, args, values, add) -> None:
        for w in operands(args):
            path = resolve(w.raw, self.env).full
            if BLOCK_DEVICE.match(path) or root_kind(path):
                add(f"shred overwrites {path} beyond recovery", "shred")

    def _rule_cryptsetup(self, cmd, name, args, values, add) -> None:
        if set(values) & {"luksFormat", "erase", "luksErase", "luksKillSlot", "reencrypt"}:
            add("cryptsetup formats or erases LUKS key slots: the data becomes unreadable",
                "cryptsetup")

    def _rule_mdadm(self, cmd, name, args, values, add) -> None:
        if set(values) & {"--zero-superblock", "--create", "-C"}:
            add("mdadm erases or rewrites RAID superblocks", "mdadm")

    def _rule_lvremove(self, cmd, name, args, values, add) -> None:
        if not set(values) & {"-t", "--test", "--help"}:
            add(f"{name} removes LVM volumes and the data on them", "lvm-remove")

    _rule_vgremove = _rule_pvremove = _rule_lvremove

    def _rule_hdparm(self, cmd, name, args, values, add) -> None:
        if any(v.startswith(("--security-erase", "--trim-sector-ranges")) for v in values):
            add("hdparm secure-erases or trims the drive", "disk-erase")

    def _rule_nvme(self, cmd, name, args, values, add) -> None:
        if values[:1] in (["format"], ["sanitize"]):
            add(f"nvme {values[0]} erases the namespace", "disk-erase")

    def _rule_chmod(self, cmd, name, args, values, add) -> None:
        flags = short_flags(values)
        if not flags & {"-R", "--recursive"}:
            return
        targets = operands(args)
        if not any(v.startswith("--reference") for v in values):
            targets = targets[1:]  # the mode or the owner
        for w in targets:
            kind = root_kind(self._in_cwd(resolve(w.raw, self.env).full), system_only=True)
            if kind:
                add(f"recursive {name} on {kind} breaks permissions that services and logins "
                    "depend on", "recursive-perms")
                return

    _rule_chown = _rule_chgrp = _rule_setfacl = _rule_chmod

    def _rule_git(self, cmd, name, args, values, add) -> None:
        rest = after_options(values, {"-C", "-c", "--git-dir", "--work-tree",
                                            "--namespace"})
        if not rest:
            return
        sub, opts = rest[0], rest[1:]
        flags = short_flags(opts)
        if sub == "reset" and "--hard" in opts:
            add("git reset --hard discards every uncommitted change without a copy",
                "git-reset-hard")
        elif sub == "clean" and ("-f" in flags or "--force" in flags) and (
                flags & {"-d", "-x", "-X"}) and not flags & {"-n", "--dry-run"}:
            add("git clean -f with -d/-x deletes untracked and ignored files, including local "
                "configuration and data", "git-clean")
        elif sub == "push" and (flags & {"-f", "--force"} or any(o.startswith("+") for o in opts)):
            add("git push --force rewrites the remote's history (use --force-with-lease)",
                "git-push-force")

    def _rule_docker(self, cmd, name, args, values, add) -> None:
        rest = after_options(values, {"-H", "--host", "--context", "-c", "--config",
                                            "-f", "--file", "-p", "--project-name"})
        if not rest:
            return
        if rest[0] == "compose":
            rest = after_options(rest[1:], {"-f", "--file", "-p", "--project-name",
                                                  "--env-file", "--profile"})
            rest = ["compose-" + rest[0]] + rest[1:] if rest else []
        if not rest:
            return
        sub, opts = rest[0], rest[1:]
        flags = short_flags(opts)
        if sub == "system" and opts[:1] == ["prune"] and "--volumes" in flags:
            add(f"{name} system prune --volumes deletes every unused volume: container data "
                "that is not running right now is gone", "docker-prune-volumes")
        elif sub == "volume" and opts[:1] and opts[0] in ("rm", "remove", "prune"):
            add(f"{name} volume {opts[0]} deletes container data volumes", "docker-volume-rm")
        elif sub in ("compose-down",) and flags & {"-v", "--volumes"}:
            add(f"{name} compose down -v deletes the project's named volumes", "docker-volume-rm")

    _rule_podman = _rule_docker

    def _rule_docker_compose(self, cmd, name, args, values, add) -> None:
        if values[:1] == ["down"] and short_flags(values[1:]) & {"-v", "--volumes"}:
            add("docker-compose down -v deletes the project's named volumes", "docker-volume-rm")

    def _rule_zpool(self, cmd, name, args, values, add) -> None:
        if values[:1] in (["destroy"], ["labelclear"], ["create"]):
            add(f"zpool {values[0]} destroys a pool or the labels of its disks", "zfs-destroy")

    def _rule_zfs(self, cmd, name, args, values, add) -> None:
        if values[:1] == ["destroy"]:
            flags = short_flags(values[1:])
            targets = operands([Word(v, v) for v in values[1:]])
            if flags & {"-r", "-R"} or any("@" not in t.value for t in targets):
                add("zfs destroy removes a dataset (and with -r every child and snapshot)",
                    "zfs-destroy")
        elif values[:1] == ["rollback"] and short_flags(values[1:]) & {"-r", "-R"}:
            add("zfs rollback -r destroys every later snapshot", "zfs-destroy")

    def _rule_btrfs(self, cmd, name, args, values, add) -> None:
        ops = [v for v in values if not v.startswith("-")]
        if len(ops) >= 2 and "subvolume".startswith(ops[0]) and len(ops[0]) >= 2 and \
                "delete".startswith(ops[1]):
            add("btrfs subvolume delete removes the subvolume and its data", "btrfs-delete")
        elif ops[:1] and "check".startswith(ops[0]) and len(ops[0]) >= 2 and "--repair" in values:
            add("btrfs check --repair can make a damaged filesystem worse; run it read-only "
                "first", "btrfs-repair")

    def _rule_shutdown(self, cmd, name, args, values, add) -> None:
        if set(values) & {"-c", "--help", "--show"}:
            return
        add(f"{name} takes the host down for everyone using it", "power")

    _rule_reboot = _rule_poweroff = _rule_halt = _rule_shutdown

    def _rule_init(self, cmd, name, args, values, add) -> None:
        if values[:1] in (["0"], ["6"]):
            add(f"{name} {values[0]} halts or reboots the host", "power")

    _rule_telinit = _rule_init

    def _rule_systemctl(self, cmd, name, args, values, add) -> None:
        ops = [v for v in values if not v.startswith("-")]
        if ops[:1] and ops[0] in ("poweroff", "reboot", "halt", "kexec", "soft-reboot",
                                  "emergency", "rescue"):
            add(f"systemctl {ops[0]} takes the host down or out of service", "power")

    def _rule_kill(self, cmd, name, args, values, add) -> None:
        i = 0
        if values[:1] in (["-s"], ["-n"]):
            i = 2
        elif values[:1] and values[0].startswith("-") and values[0] != "--":
            i = 1
        if values[i:i + 1] == ["--"]:
            i += 1
        pids = values[i:]
        if "-1" in pids:
            add("kill -1 signals every process you may signal (as root: all of them)",
                "kill-all")
        elif "1" in pids:
            add("killing PID 1 (init) brings the host down", "kill-all")

    def _rule_killall5(self, cmd, name, args, values, add) -> None:
        add("killall5 signals every process on the host", "kill-all")

    def _rule_iptables(self, cmd, name, args, values, add) -> None:
        flags = short_flags(values)
        if "-F" in flags or "--flush" in flags:
            add(f"{name} --flush drops every firewall rule (with a DROP policy it locks you "
                "out; otherwise it opens the host)", "firewall-flush")
        elif ("-P" in flags or "--policy" in flags) and "DROP" in values:
            add(f"{name} -P ... DROP can lock you out of a remote host", "firewall-flush")

    _rule_ip6tables = _rule_iptables_legacy = _rule_iptables_nft = _rule_iptables

    def _rule_nft(self, cmd, name, args, values, add) -> None:
        if values[:2] == ["flush", "ruleset"]:
            add("nft flush ruleset drops every firewall rule", "firewall-flush")

    def _rule_ufw(self, cmd, name, args, values, add) -> None:
        if values[:1] == ["reset"]:
            add("ufw reset deletes every firewall rule", "firewall-flush")

    def _rule_truncate(self, cmd, name, args, values, add) -> None:
        zero = any(re.fullmatch(r"(-s|--size=?)\s*0", v) for v in values) or \
            any(v in ("-s", "--size") and i + 1 < len(values) and values[i + 1] == "0"
                for i, v in enumerate(values))
        if not zero:
            return
        for w in operands(args):
            path = resolve(w.raw, self.env).full
            if SYSTEM_FILE_DIRS.match(path) and path != "0":
                add(f"truncate -s 0 empties the system file {path}", "truncate-system-file")

    def _rule_mv(self, cmd, name, args, values, add) -> None:
        ops = operands(args)
        if len(ops) >= 2 and resolve(ops[-1].raw, self.env).full == "/dev/null":
            add("mv onto /dev/null replaces the device node and loses what was moved",
                "mv-dev-null")
            return
        for w in ops[:-1]:
            kind = root_kind(resolve(w.raw, self.env).full)
            if kind:
                add(f"mv moves {kind} away", "mv-root")
                return
        self._onto_device(ops[-1:] if len(ops) >= 2 else [], name, add)

    def _rule_cp(self, cmd, name, args, values, add) -> None:
        ops = operands(args)
        if len(ops) >= 2:
            self._onto_device(ops[-1:], name, add)
            dest = resolve(ops[-1].raw, self.env).full
            if ops[0].value == "/dev/null" and SYSTEM_FILE_DIRS.match(dest):
                add(f"cp /dev/null empties the system file {dest}", "truncate-system-file")

    def _rule_tee(self, cmd, name, args, values, add) -> None:
        self._onto_device(operands(args), name, add)
        if "-a" not in values and "--append" not in values:
            for w in operands(args):
                path = resolve(w.raw, self.env).full
                if CRITICAL_FILES.match(path):
                    add(f"tee overwrites the critical system file {path}",
                        "overwrite-critical-file")

    _rule_pv = _rule_tee

    def _onto_device(self, targets: list[Word], name: str, add) -> None:
        for w in targets:
            path = resolve(w.raw, self.env).full
            if BLOCK_DEVICE.match(path) and not SAFE_DEV.match(path):
                add(f"{name} writes onto the block device {path}", "write-device")

    def _rule_crontab(self, cmd, name, args, values, add) -> None:
        if "-r" in short_flags(values):
            add("crontab -r deletes every cron job of the user without asking",
                "crontab-remove")

    def _rule_rsync(self, cmd, name, args, values, add) -> None:
        if not any(v.startswith("--delete") or v in ("--del", "--remove-source-files")
                   for v in values):
            return
        if short_flags(values) & {"-n", "--dry-run"}:
            return  # a dry run only lists what it would delete
        ops = operands(args)
        if len(ops) < 2:
            return
        dest = resolve(ops[-1].raw, self.env)
        kind = root_kind(dest.full)
        if kind:
            add(f"rsync --delete makes {kind} a copy of the source, deleting the rest",
                "rsync-delete")
            return
        for w in ops[:-1]:
            r = resolve(w.raw, self.env)
            risky = [v for v in r.maybe_empty if not self._guarded_inline(cmd, v)]
            if risky:
                add(f"rsync --delete from {w.raw}: if {risky[0]} is empty the source is wrong "
                    f"and the destination is emptied; guard it with ${{{risky[0]}:?}}",
                    "rsync-delete")
                return
