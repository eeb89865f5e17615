"""A throwaway local PostgreSQL cluster (the suite, `provider_topology.sh DB=postgres`): Debian's
binaries from /usr/lib/postgresql/<version>/bin (not on PATH), a fresh data directory, listening
only on a Unix socket in that directory.

PostgreSQL refuses to run as root, so as root `initdb`, `pg_ctl` and the server run as the
`postgres` user (`runuser`), in a directory that user owns: pytest's /tmp/pytest-of-root is mode
0700, which that user cannot enter. As any other user they run as that user.

    python -m sglang_mx.provider.pg_local start DIR [--port P]   # prints the database URL
    python -m sglang_mx.provider.pg_local stop DIR [--port P]
    python -m sglang_mx.provider.pg_local serve DIR [--port P]   # start; stop on SIGTERM/SIGINT

`serve` writes the URL to DIR/url once the database accepts connections (scripts wait for it)."""

from __future__ import annotations

import argparse
import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

DBNAME = "sglang_mx"
SUPERUSER = "postgres"
RUN_AS = "postgres"  # the system user the server runs as when we are root


def bin_dir() -> Path:
    """The newest installed PostgreSQL's bin directory (Debian layout), else initdb's on PATH."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3])
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise FileNotFoundError(
        "PostgreSQL's initdb was not found (Debian: apt-get install postgresql; make setup "
        "installs it as root)"
    )


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", RUN_AS, "--", *cmd] if os.geteuid() == 0 else cmd


@dataclass(frozen=True)
class LocalCluster:
    root: Path  # owned by the server's user; holds data/, the socket and server.log
    port: int  # names the socket file (.s.PGSQL.<port>); nothing listens on TCP

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@/{DBNAME}?host={self.root}&port={self.port}"

    def _run(self, *args: str, timeout: float = 60) -> None:
        out = subprocess.run(
            _as_owner([str(bin_dir() / args[0]), *args[1:]]),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if out.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({out.returncode}): {out.stderr[-2000:]}")

    def start(self) -> None:
        """Start the server (initdb first when the data directory is new); returns once it
        accepts connections."""
        opts = f"-k {self.root} -p {self.port} -c listen_addresses=''"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                  "-o", opts, "-w", "-t", "60", "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """fast: roll back open transactions and shut down cleanly; immediate: a crash (the
        next start replays the WAL)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()


def create(root: Path | None = None, port: int = 5432) -> LocalCluster:
    """initdb a new cluster in `root` (a fresh temporary directory by default), start it and
    create the database; the caller stops it (and may delete root)."""
    if root is None:
        root = Path(tempfile.mkdtemp(prefix="sglang-mx-pg-", dir="/tmp"))
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        user = pwd.getpwnam(RUN_AS)
        os.chown(root, user.pw_uid, user.pw_gid)
    root.chmod(0o700)
    cluster = LocalCluster(root, port)
    if not (cluster.data / "PG_VERSION").exists():
        # --no-sync: initdb's own files; the server itself fsyncs as configured.
        cluster._run("initdb", "-D", str(cluster.data), "-U", SUPERUSER, "--auth=trust",
                     "-E", "UTF8", "--locale=C", "--no-sync")  # fmt: skip
    cluster.start()
    sock = ["-h", str(root), "-p", str(port), "-U", SUPERUSER]
    probe = subprocess.run(
        [str(bin_dir() / "psql"), *sock, "-d", "postgres", "-tAc",
         f"SELECT 1 FROM pg_database WHERE datname='{DBNAME}'"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if probe.stdout.strip() != "1":
        subprocess.run(
            [str(bin_dir() / "createdb"), *sock, DBNAME], check=True, timeout=30, cwd=root
        )
    return cluster


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sglang_mx.provider.pg_local")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start", help="initdb (if new) and start a cluster in DIR; print its URL")
    s.add_argument("dir", type=Path)
    s.add_argument("--port", type=int, default=5432, help="names the socket; no TCP listener")
    t = sub.add_parser("stop", help="stop the cluster in DIR")
    t.add_argument("dir", type=Path)
    t.add_argument("--port", type=int, default=5432)
    v = sub.add_parser("serve", help="start the cluster in DIR; stop it on SIGTERM or SIGINT")
    v.add_argument("dir", type=Path)
    v.add_argument("--port", type=int, default=5432)
    args = p.parse_args(argv)
    if args.cmd == "start":
        print(create(args.dir.resolve(), args.port).url)
    elif args.cmd == "stop":
        LocalCluster(args.dir.resolve(), args.port).stop()
    else:
        serve(args.dir.resolve(), args.port)
    return 0


def serve(root: Path, port: int) -> None:
    cluster = create(root, port)
    stop = [False]

    def on_signal(signum, frame) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    (root / "url").write_text(cluster.url + "\n")
    try:
        while not stop[0]:
            signal.pause()
    finally:
        (root / "url").unlink(missing_ok=True)
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
