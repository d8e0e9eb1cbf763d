#!/usr/bin/env python3
"""Power-cut simulator: cut the power under a loaded confabd, many times, and check what survived.

The crash loop (scripts/crashloop.py) kills confabd with SIGKILL, which the page cache
survives: it cannot tell "synced" from "written". This runs the same load and the same checks,
but confabd runs with scripts/powercut/shim.c preloaded, which journals every write, create,
rename, unlink, mkdir and sync on the data directory, with a copy of each file as each sync
covered it and the listing each directory sync covered. After the SIGKILL the data directory
is rebuilt as a disk could hold it after a power cut at that moment, then the daemon restarts
on it and the checks run:

  strict           every file as of its last completed fdatasync/fsync; a name exists only
                   as its directory's last fsync listed it (a new log whose directory was
                   never synced is gone, an unlink or rename not synced is undone)
  prefix           strict, plus a random part of what was appended since a file's last sync
                   (write-back in file order, cut at any byte: torn last lines)
  metadata         names as the kernel had them at the kill (the file system's journal
                   committed), contents as of their last sync: a file created or renamed
                   but never synced is empty
  metadata+prefix  both

Every cut picks one at random. A file whose bytes did not change is left as it is (same
inode and mtime), so the index of summaries is trusted where it would be after a real cut.
Every third round (--clean-stop-every) the load starts from an index a clean stop wrote: the
daemon is stopped with SIGTERM after the checks and started again on what it left, taken as
what the disk holds. The index is never synced, so after other cuts it is old, empty or torn
and every log is read; after these, the start finds that index with the entries the load
made stale, and must read the logs they no longer describe (the summary gives what each such
start listed from the index and how many logs it read; a strict or prefix cut after which
nothing was listed from it is a failure, as the stale-index path did not run).

Subcommands for tests (Tests/IntegrationTests/PowerCutTests.swift):
  powercut.py shim OUT.so               build the shim with cc
  powercut.py snapshot DATA JOURNAL     record DATA as the state the disk holds now
  powercut.py rebuild DATA JOURNAL MODE rebuild DATA after a cut; prints a JSON summary
"""
import json, os, random, re, shutil, signal, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import crashloop  # noqa: E402

SHIM_SOURCE = os.path.join(HERE, "powercut", "shim.c")
MODES = ("strict", "prefix", "metadata", "metadata+prefix")


def build_shim(output):
    compiler = shutil.which("cc") or shutil.which("clang") or "cc"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", output, SHIM_SOURCE, "-ldl", "-lpthread"],
                   check=True)
    return output


def unescape(name):
    """The shim writes names with bytes <= space, '%' and >= 0x7f as %XX."""
    out, i = bytearray(), 0
    raw = name.encode()
    while i < len(raw):
        if raw[i] == 0x25 and i + 2 < len(raw):
            out.append(int(raw[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", "surrogateescape")


def listing(directory):
    """name -> (inode, 'f' or 'd') for regular files and directories."""
    entries = {}
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            entries[entry.name] = (entry.inode(), "d")
        elif entry.is_file(follow_symlinks=False):
            entries[entry.name] = (entry.inode(), "f")
    return entries


def snapshot(data, journal):
    """Records DATA as durable: its tree (names, inodes) and a copy of every file."""
    os.makedirs(data, exist_ok=True)
    os.makedirs(journal, exist_ok=True)
    base = os.path.join(journal, "base")
    dirs = {}
    for root, subdirs, _ in os.walk(data):
        rel = os.path.relpath(root, data)
        dirs[rel] = listing(root)
        for name, (inode, kind) in dirs[rel].items():
            if kind == "f":
                target = os.path.join(base, rel, name)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(os.path.join(root, name), target)
    with open(os.path.join(journal, "base.json"), "w") as f:
        json.dump({rel: {name: list(entry) for name, entry in entries.items()} for rel, entries in dirs.items()}, f)


def read_file(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def rebuild(data, journal, mode, rng):
    """Rewrites DATA as the disk would hold it after a power cut at the end of the journal.
    Returns counts of what the cut did."""
    with open(os.path.join(journal, "base.json")) as f:
        base = {rel: {name: tuple(entry) for name, entry in entries.items()} for rel, entries in json.load(f).items()}
    life = {}                        # inode -> how many times a new file took that number
    content = {}                     # (inode, life) -> bytes durable for it, or the base copy's path
    dirs = {}                        # directory -> {name: (inode, kind, life)} as last synced
    for rel, entries in base.items():
        dirs[rel] = {name: (inode, kind, 0) for name, (inode, kind) in entries.items()}
        for name, (inode, kind) in entries.items():
            if kind == "f":
                content[(inode, 0)] = ("base", os.path.join(journal, "base", rel, name))
    stats = dict(mode=mode, writes=0, syncs=0, dirsyncs=0, creates=0, renames=0, unlinks=0, truncates=0,
                 failed_syncs=0, unrecorded=0, files_changed=0, files_removed=0, bytes_lost=0, torn_tails=0)
    path = os.path.join(journal, "journal")
    lines = open(path, "rb").read().split(b"\n") if os.path.exists(path) else []
    for line in lines:
        words = line.decode("utf-8", "replace").split(" ")
        op = words[0]
        if op == "create" or (op == "open" and words[-1] == "size=0"):
            inode = int(words[1])
            life[inode] = life.get(inode, 0) + 1
            stats["creates"] += 1
        elif op == "sync":
            inode = int(words[1])
            content[(inode, life.get(inode, 0))] = ("blob", os.path.join(journal, "blobs", words[2]))
            stats["syncs"] += 1
        elif op == "dirsync":
            entries = {}
            for word in words[2:]:
                name, inode, kind = word.rsplit(":", 2)
                entries[unescape(name)] = (int(inode), kind, life.get(int(inode), 0))
            dirs[unescape(words[1])] = entries
            stats["dirsyncs"] += 1
        elif op in ("write", "pwrite"):
            stats["writes"] += 1
        elif op == "rename":
            stats["renames"] += 1
        elif op == "unlink":
            stats["unlinks"] += 1
        elif op == "truncate":
            stats["truncates"] += 1
        elif op == "syncfail":
            stats["failed_syncs"] += 1
        elif op == "unrecorded":
            stats["unrecorded"] += 1

    def durable(inode, kind_life):
        source = content.get((inode, kind_life))
        if source is None:
            return b""
        return read_file(source[1]) or b""

    def target_entries(rel):
        if mode.startswith("metadata"):
            here = os.path.join(data, rel)
            if not os.path.isdir(here):
                return {}
            return {name: (inode, kind, life.get(inode, 0)) for name, (inode, kind) in listing(here).items()}
        return dirs.get(rel, {})

    def apply(rel):
        here = os.path.normpath(os.path.join(data, rel))
        os.makedirs(here, exist_ok=True)
        wanted = target_entries(rel)
        for name, (inode, kind) in listing(here).items():
            if name not in wanted or wanted[name][1] != kind:
                victim = os.path.join(here, name)
                if kind == "d":
                    shutil.rmtree(victim)
                else:
                    stats["bytes_lost"] += os.path.getsize(victim)
                    os.unlink(victim)
                stats["files_removed"] += 1
        for name, (inode, kind, generation) in sorted(wanted.items()):
            if kind == "d":
                apply(os.path.normpath(os.path.join(rel, name)))
                continue
            if kind != "f":
                continue
            file = os.path.join(here, name)
            now = read_file(file)
            bytes_ = durable(inode, generation)
            if mode.endswith("prefix") and now is not None and os.stat(file).st_ino == inode \
                    and len(now) > len(bytes_) and now.startswith(bytes_):
                # Some of what was written since the sync reached the disk, in file order.
                kept = rng.randint(0, len(now) - len(bytes_))
                if kept and not now[:len(bytes_) + kept].endswith(b"\n"):
                    stats["torn_tails"] += 1
                bytes_ = now[:len(bytes_) + kept]
            if now == bytes_:
                continue                                     # untouched: same inode, same mtime
            stats["files_changed"] += 1
            stats["bytes_lost"] += max(0, len(now or b"") - len(bytes_))
            mode_flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            fd = os.open(file, mode_flags, 0o600)
            try:
                os.write(fd, bytes_)
            finally:
                os.close(fd)

    apply(".")
    return stats


class PowerCutLoop(crashloop.Loop):
    """The crash loop with a power cut at every kill."""
    name = "powercut"
    index_damage_expected = True
    lost_steps_allowed = True

    def __init__(self, args):
        super().__init__(args)
        self.cut_rng = random.Random(args.seed ^ 0x5EED)
        self.journal = None
        self.shim = args.shim or build_shim(os.path.join(self.tmp, "libconfab-powercut.so"))
        self.cuts = []
        self.journals = 0
        # Rounds whose load started from an index a clean stop wrote (--clean-stop-every), and
        # what the start after their cut made of it: (round, cut mode, listed from the index, logs read).
        self.clean_base = set()
        self.stale_starts = []
        self.cut_modes = {}
        os.makedirs(self.data, exist_ok=True)

    def before_load(self, round_no, log_path):
        """Every --clean-stop-every rounds the load starts from an index a clean stop wrote: the
        daemon is stopped with SIGTERM (it writes the index whole at a clean stop), the data
        directory as it left it is taken as what the disk holds (a machine stopped cleanly,
        its page cache written back), and a daemon started on it. The cut that ends the round
        then leaves that index with entries the load made stale (strict and prefix cuts undo
        the renames of the newer ones that were not synced), and the next start must read the
        logs those entries no longer describe (checked by every check after it)."""
        every = self.args.clean_stop_every
        if not every or round_no % every:
            return
        self.daemon.send_signal(signal.SIGTERM)
        try:
            code = self.daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.failures.add(round_no, "confabd did not stop within 30 s of SIGTERM")
            self.daemon.kill()
            self.daemon.wait()
            return
        if code != 0:
            self.failures.add(round_no, "confabd exited with status %s after SIGTERM" % code)
        index = os.path.join(self.data, "index.jsonl")
        if not os.path.exists(index) or os.path.getsize(index) == 0:
            self.failures.add(round_no, "a clean stop left no index")
        self.start_daemon(round_no)      # its log goes on in log_path, read whole after the kill
        self.clean_base.add(round_no)

    def scan_daemon_log(self, round_no, log_path):
        """Besides the crash loop's reading: after the cut of a round that started from a clean
        stop's index, what the start after it made of that index (its first start-up line)."""
        super().scan_daemon_log(round_no, log_path)
        if round_no - 1 not in self.clean_base:
            return
        found = re.findall(r"(\d+) conversations listed from the index, (\d+) logs read", self.read(log_path))
        if not found:
            self.failures.add(round_no, "the start after a cut logged no 'listed from the index' line")
            return
        listed, read = (int(n) for n in found[0])
        self.stale_starts.append((round_no - 1, self.cut_modes[round_no - 1], listed, read))

    def daemon_environment(self, round_no):
        self.journals += 1
        self.journal = os.path.join(self.tmp, "journal-%04d-%d" % (round_no, self.journals))
        snapshot(self.data, self.journal)
        environment = dict(os.environ)
        environment.update(LD_PRELOAD=self.shim, CONFAB_POWERCUT_DIR=os.path.realpath(self.data),
                           CONFAB_POWERCUT_JOURNAL=self.journal)
        if self.args.daemon_fault:
            environment["CONFAB_DEBUG_FAULT"] = self.args.daemon_fault
        return environment

    def after_kill(self, round_no):
        mode = self.cut_rng.choice(MODES)
        stats = rebuild(self.data, self.journal, mode, self.cut_rng)
        self.cuts.append(stats)
        self.cut_modes[round_no] = mode
        if stats["unrecorded"]:
            self.failures.add(round_no, "the shim could not record %d syncs (see %s)" % (stats["unrecorded"], self.journal))
        # A round that began with a clean stop starts a fresh daemon, which a kill within its
        # first milliseconds leaves with nothing synced yet; every other round has synced (the
        # start after a cut writes its index), so none there means the shim is not loaded.
        if stats["syncs"] == 0 and round_no not in self.clean_base:
            self.failures.add(round_no, "the shim recorded no sync: is it loaded?")
        if self.args.verbose:
            print("  cut %d: %s" % (round_no, json.dumps(stats)), flush=True)
        if not self.args.keep:
            shutil.rmtree(self.journal, ignore_errors=True)

    def extra_summary(self):
        for round_no, mode in self.stale_index_missed():
            self.failures.add(round_no + 1, "the start after a %s cut listed nothing from the index a clean stop wrote" % mode)
        if not self.cuts:
            return []
        total = lambda key: sum(c[key] for c in self.cuts)
        modes = {m: sum(1 for c in self.cuts if c["mode"] == m) for m in MODES}
        return ["power cuts: %d (%s)" % (len(self.cuts), ", ".join("%s %d" % kv for kv in modes.items())),
                "journalled before the cuts: %d writes, %d file syncs, %d directory syncs, %d creates, %d renames, %d unlinks"
                % (total("writes"), total("syncs"), total("dirsyncs"), total("creates"), total("renames"), total("unlinks")),
                "the cuts changed %d files and removed %d, losing %d unsynced bytes; %d torn tails left"
                % (total("files_changed"), total("files_removed"), total("bytes_lost"), total("torn_tails")),
                "rounds started from a clean stop's index: %d; the starts after their cuts listed %s"
                % (len(self.clean_base), ", ".join("%d from the index and read %d logs (%s)" % (listed, read, mode)
                                                   for _, mode, listed, read in self.stale_starts) or "nothing")]

    def stale_index_missed(self):
        """A strict or prefix cut after a clean stop keeps that stop's index: a start after one
        that listed nothing from it means the stale-index path did not run."""
        return [(r, mode) for r, mode, listed, _ in self.stale_starts if mode in ("strict", "prefix") and listed == 0]


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("shim", "snapshot", "rebuild"):
        command, rest = sys.argv[1], sys.argv[2:]
        if command == "shim" and len(rest) == 1:
            build_shim(rest[0])
        elif command == "snapshot" and len(rest) == 2:
            snapshot(*rest)
        elif command == "rebuild" and len(rest) == 3 and rest[2] in MODES:
            print(json.dumps(rebuild(rest[0], rest[1], rest[2], random.Random(0))))
        else:
            sys.exit("usage: powercut.py shim OUT | snapshot DATA JOURNAL | rebuild DATA JOURNAL %s" % "|".join(MODES))
        return
    parser = crashloop.arguments()
    parser.description = __doc__.split("\n")[0]
    parser.add_argument("--shim", default=None, help="a built libconfab-powercut.so (default: build one with cc)")
    parser.add_argument("--clean-stop-every", type=int, default=3,
                        help="every N rounds, stop the daemon cleanly before the load so the cut finds the index it wrote "
                             "(0: never; default 3)")
    parser.set_defaults(kills=100, max_seconds=600)
    args = parser.parse_args()
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "big")
    if args.no_fsync:
        print("powercut: --no-fsync makes confabd promise nothing a power cut keeps; expect failures", flush=True)
    sys.exit(PowerCutLoop(args).run())


if __name__ == "__main__":
    main()
