"""The local daemon's discovery file: ``$NEURALMIND_HOME/daemon.json`` (dir 0700, file 0600),
how clients find the server, and start/stop/status around it."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from neuralmind.client import daemon_health as health  # what /v1/health answers at a file's address
from neuralmind.client import daemon_pid as serving_pid  # the pid holding a home (claim_home)
from neuralmind.client import older_daemon  # a daemon of a NeuralMind from before claim_home

DISCOVERY = "daemon.json"
DEFAULT_PORT = 8765
MIGRATING = "storage migrate"  # what holds the home (:func:`holding`) while it is copied


def code_stamp() -> str:
    """Which code this is, past its version number (every development build, and a reinstall
    that kept the number, says the same): a digest of the path, size and time of each Python
    file of the packages. A daemon started before an upgrade carries another one."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for package in ("kernel", "plugins", "neuralmind"):
        for path in sorted((root / package).rglob("*.py")):
            stat = path.stat()
            digest.update(f"{path.relative_to(root)} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def other_code(info: dict[str, Any]) -> str:
    """What to say of a running daemon that runs other code than this command (started
    before an upgrade): it answers as that code does; "" when it runs this code."""
    if info.get("code") == code_stamp():
        return ""
    return ("; it runs the NeuralMind installed when it started, not this one: restart it "
            "(`neuralmind daemon stop`, then `neuralmind daemon start`) to use this one")


def discovery_path(home: Path) -> Path:
    return Path(home) / DISCOVERY


def write_private(path: Path, text: str) -> None:
    """Write ``text`` atomically with mode 0600 inside a 0700 directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


class DiscoveryDamaged(RuntimeError):
    """``daemon.json`` is there but says no daemon's address: a command must not take it for
    "no daemon" (a second one would start on the same home)."""

    exit_code = 1

    def __init__(self, home: Path, why: str):
        pid = serving_pid(home)
        super().__init__(
            f"{discovery_path(home)} is damaged ({why}): " + (
                f"the daemon serving this home is pid {pid} — `neuralmind daemon stop` stops it"
                if pid else "no daemon holds this home: delete the file, then start the daemon"))


def discovered(home: Path) -> dict[str, Any] | None:
    """The running daemon's discovery info, None when there is no file, :class:`DiscoveryDamaged`
    when the file cannot be read or is not a daemon's."""
    path = discovery_path(home)
    try:
        info = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except OSError as ex:
        raise DiscoveryDamaged(home, f"cannot be read: {ex.strerror}") from None
    except ValueError:
        raise DiscoveryDamaged(home, "not JSON") from None
    if not (isinstance(info, dict) and isinstance(info.get("host"), str)
            and all(type(info.get(k)) is int for k in ("pid", "port"))):
        raise DiscoveryDamaged(home, "no pid, host and port in it")
    return info


def read_discovery(home: Path) -> dict[str, Any] | None:
    """:func:`discovered`, with a damaged file taken as none (for what only reads a field)."""
    try:
        return discovered(home)
    except DiscoveryDamaged:
        return None


def write_discovery(home: Path, info: dict[str, Any]) -> None:
    """Write the file, naming the home it was written for unless ``info`` names one already
    (a rewrite keeps the daemon's): a home renamed while its daemon runs is told apart
    (``neuralmind.client.moved``)."""
    info = {"home": str(Path(home).resolve()), **info}
    write_private(discovery_path(home), json.dumps(info, indent=2))


def forget_discovery(home: Path, pid: int) -> None:
    """Remove the discovery file as daemon ``pid`` exits (however it was stopped), unless
    another daemon has written its own since."""
    info = read_discovery(home)
    if info is not None and info.get("pid") == pid:
        discovery_path(home).unlink(missing_ok=True)


def update_discovery(home: Path, **fields: Any) -> bool:
    """Add fields (the auth plugin's token) to the running daemon's file, if this process
    belongs to that daemon."""
    info = read_discovery(home)
    if info is None or os.environ.get("NEURALMIND_DAEMON_PID") != str(info.get("pid")):
        return False
    info.update(fields)
    write_discovery(home, info)
    return True


def choose_port(given: int | None, default: int = DEFAULT_PORT) -> int:
    """The port the daemon listens on: the one given (flag or config) as it is, else
    ``default`` when it is free, else 0 — the OS picks one and daemon.json says which, so a
    second user or a stale process on 8765 never stops a daemon from starting."""
    if given is not None:
        return given
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
        try:
            probe.bind(("127.0.0.1", default))
        except OSError:
            return 0
    return default


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def held(home: Path) -> dict[str, Any] | None:
    """The discovery info when the daemon it names holds ``home`` (:func:`claim_home`), else
    None: a file a crashed daemon left names an address any program may listen on now, and
    one copied with a home names the original's daemon. :class:`DiscoveryDamaged` when the
    file is damaged."""
    info = discovered(home)
    return info if info and serving_pid(home) == info["pid"] else None


def status(home: Path) -> dict[str, Any] | None:
    """The discovery info of the daemon that holds ``home`` and answers, else None
    (:class:`DiscoveryDamaged` when its file is damaged)."""
    info = held(home)
    return info if info and health(info) else None


class HomeBusy(RuntimeError):
    """Another command holds the home (:func:`holding`); ``holder`` says which and its pid."""

    def __init__(self, home: Path, holder: str):
        super().__init__(f"{holder or 'another command'} is using {home}")
        self.holder = holder


def _open_lock(home: Path, name: str) -> int:
    """The home's lock file ``name`` opened, the home made first (a start on a new home)."""
    Path(home).mkdir(parents=True, exist_ok=True)
    return os.open(Path(home) / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _locked_within(fd: int, wait: float) -> bool:
    """``flock`` the open lock file ``fd`` alone, trying for up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


@contextmanager
def holding(home: Path, what: str, wait: float = 0.0) -> Iterator[None]:
    """The home to this command alone (``flock`` on ``.lock`` in it) while the block runs:
    two starts of the daemon, or a start during ``storage migrate``'s copy, go one after the
    other. :class:`HomeBusy` when another holds it past ``wait`` seconds. The lock is the
    open file's: it ends with the process, however that ends."""
    fd = _open_lock(home, ".lock")
    try:
        if not _locked_within(fd, wait):
            raise HomeBusy(Path(home), os.pread(fd, 200, 0).decode(errors="replace"))
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{what} (pid {os.getpid()})".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)


SERVING = ".daemon.lock"
# :func:`serving_pid` (and each client) holds the lock shared for an instant to test it: a
# start then waits that out rather than take the tester for a daemon
CLAIM_WAIT_S = 1.0


_claimed: list[int] = []  # the held locks' fds: the master's alone


def _let_go_in_child() -> None:
    while _claimed:
        os.close(_claimed.pop())


os.register_at_fork(after_in_child=_let_go_in_child)


def claim_home(home: Path) -> None:
    """Hold the home as its one daemon for the rest of this process's life (``flock`` on
    ``.daemon.lock``, with the pid in it): :class:`HomeBusy` when another daemon holds it —
    whatever ``daemon.json`` says, two daemons never serve one home. Only the gunicorn master
    holds it (a worker outliving a killed master never keeps the next daemon out)."""
    fd = _open_lock(home, SERVING)
    if not _locked_within(fd, CLAIM_WAIT_S):
        pid = os.pread(fd, 20, 0).decode(errors="replace").strip()
        os.close(fd)
        raise HomeBusy(Path(home), f"the daemon (pid {pid})")
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _claimed.append(fd)  # it stays open: the lock is the process's


SERVED = ".serving.lock"


def serve_home(home: Path) -> None:
    """Hold the home as one of its servers for the rest of this process's life (a shared
    ``flock`` on ``.serving.lock``; the gunicorn master's alone, as :func:`claim_home`): several
    servers may serve one home, but ``storage migrate`` copies it only while none does
    (:func:`unserved`). :class:`HomeBusy`, naming the migrate, while one copies it."""
    fd = _open_lock(home, SERVED)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise HomeBusy(Path(home), holder(home)) from None
    _claimed.append(fd)


class Served(RuntimeError):
    """A server or the daemon serves the home :func:`unserved` was asked for."""

    def __init__(self, home: Path, pids: list[int], daemon: int | None):
        if daemon:
            who = (f"a daemon serves {home} (pid {daemon}): stop it first "
                   "(`neuralmind daemon stop`)")
        elif len(pids) > 1:
            who = f"servers serve {home} (pids {', '.join(map(str, pids))}): stop them first"
        else:
            who = f"a server serves {home}{f' (pid {pids[0]})' if pids else ''}: stop it first"
        super().__init__(f"{who}, so nothing is written while the home is copied")


@contextmanager
def unserved(home: Path) -> Iterator[None]:
    """The home with no server on it while the block runs (``storage migrate``'s copy): an
    exclusive ``flock`` on ``.serving.lock``, which every server holds shared for its life
    (:func:`serve_home`), so a server start meanwhile is refused. :class:`Served` when one
    serves it — or a daemon started before that lock existed holds ``.daemon.lock``, or a
    daemon of a NeuralMind from before either lock serves it (:func:`older_daemon`)."""
    fd = _open_lock(home, SERVED)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Served(Path(home), _holders(fd), serving_pid(home)) from None
        if daemon := serving_pid(home) or (older_daemon(home) or {}).get("pid"):
            raise Served(Path(home), [], daemon)
        yield
    finally:
        os.close(fd)


def _holders(fd: int) -> list[int]:
    """The pids holding a ``flock`` on ``fd``'s file, from ``/proc/locks`` (Linux; none
    found elsewhere, or where that file names the device otherwise)."""
    st = os.fstat(fd)
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    return sorted({int(f[4]) for f in map(str.split, lines)
                   if len(f) > 5 and f[1] == "FLOCK" and f[5] == where})


def holder(home: Path) -> str:
    """Who holds the home (:func:`holding`) — ``"storage migrate (pid 41)"`` — or "" (a
    holder killed before it let go leaves its name; the lock itself went with it)."""
    try:
        return (Path(home) / ".lock").read_text(errors="replace")
    except OSError:
        return ""


class DaemonExited(RuntimeError):
    """The daemon stopped before it answered; ``exit_code`` is its own (2: its config)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def spawn(home: Path, argv: list[str], timeout: float = 60.0) -> dict[str, Any]:
    """Start ``neuralmind daemon start --foreground …`` detached; wait until it answers."""
    Path(home).mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    before = read_discovery(home)
    with open(Path(home) / "daemon.log", "ab") as log:  # the child keeps its own copy
        start = log.seek(0, os.SEEK_END)
        # -P: the working directory (the user's repository) is not put on sys.path, or its
        # own kernel/ or plugins/ package would be imported in place of NeuralMind's
        proc = subprocess.Popen([sys.executable, "-P", "-m", "neuralmind.cli", *argv],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = _errors_since(Path(home) / "daemon.log", start)
            raise DaemonExited(f"the daemon exited with code {proc.returncode}"
                               + (f": {said}" if said else "")
                               + f"; see {Path(home) / 'daemon.log'}", proc.returncode)
        info = read_discovery(home)
        if info and info != before and info.get("pid") == proc.pid and health(info):
            return info
        time.sleep(0.1)
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    raise RuntimeError(f"the daemon did not answer within {timeout:.0f} s; see {Path(home) / 'daemon.log'}")


GUNICORN_LINE = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [^]]*\] \[\d+\] ")


def _errors_since(log: Path, offset: int) -> str:
    """The CLI's own error lines (``neuralmind: …``, a config mistake, a worker's start-up
    fault) the daemon wrote to ``log`` from ``offset`` on, for the command that started it to
    show — without gunicorn's own log lines around them (its worker failed to boot)."""
    with open(log, "rb") as fh:
        fh.seek(offset)
        lines = [line for line in fh.read().decode(errors="replace").splitlines()
                 if not GUNICORN_LINE.match(line)]
    said = [line.removeprefix("neuralmind: ") for line in lines]
    first = next((i for i, line in enumerate(lines) if line.startswith("neuralmind: ")), None)
    return "" if first is None else "\n".join(said[first:]).strip()


def stop(home: Path, timeout: float = 15.0) -> bool:
    """Stop the daemon holding ``home`` (:func:`claim_home`) — never the one a discovery file
    alone names (after a crash the file's pid may be another process's now; in a copy of a
    home, the original's daemon) — or else the daemon of an older NeuralMind serving it
    (:func:`older_daemon`), whose file goes only once it has exited; a damaged file with no
    daemon holding the home is :class:`DiscoveryDamaged`."""
    pid = serving_pid(home)
    if pid is None:
        if discovered(home) and (old := older_daemon(home)):
            if _ended(old["pid"], timeout):
                forget_discovery(home, old["pid"])
            return True
        discovery_path(home).unlink(missing_ok=True)
        return False
    _ended(pid, timeout)
    discovery_path(home).unlink(missing_ok=True)
    return True


def _ended(pid: int, timeout: float) -> bool:
    """SIGTERM to ``pid``, SIGKILL when it is still there after ``timeout`` seconds; whether
    it has exited."""
    os.kill(pid, signal.SIGTERM)
    if _gone_within(pid, timeout):
        return True
    os.kill(pid, signal.SIGKILL)
    return _gone_within(pid, 2.0)


def _gone_within(pid: int, wait: float) -> bool:
    deadline = time.monotonic() + wait
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not pid_alive(pid)
