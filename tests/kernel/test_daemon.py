"""The local daemon: discovery file, loopback-only bind, start/stop/status from the CLI."""

import json
import os
import stat
import subprocess
import sys

import pytest

from tests.support import ROOT, free_port, request

pytestmark = pytest.mark.sqlite_only("the daemon's processes and files, started by hand here")


def run(home, *args, timeout=90):
    env = {**os.environ, "NEURALMIND_HOME": str(home), "NEURALMIND_PLUGINS": "auth",
           "NEURALMIND_EMBEDDINGS_WARM": "0"}
    return subprocess.run([sys.executable, "-m", "neuralmind.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def start(home, cwd, *args) -> subprocess.Popen:
    """``neuralmind daemon start`` as the console script runs it (-P: not from ``cwd``)."""
    env = {**os.environ, "NEURALMIND_HOME": str(home), "NEURALMIND_PLUGINS": "auth",
           "NEURALMIND_EMBEDDINGS_WARM": "0"}
    return subprocess.Popen([sys.executable, "-P", "-m", "neuralmind.cli", "daemon", "start",
                             *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_daemon_start_status_stop(tmp_path):
    """Two starts at once (a second `up`, a client's autostart): one daemon, both succeed —
    started in a repository with kernel/ and plugins/ packages of its own, which the daemon
    imported in place of NeuralMind's (python -m puts the working directory first)."""
    home = tmp_path / "nmhome"
    repo = tmp_path / "repo"
    for package in ("kernel", "plugins"):
        (repo / package).mkdir(parents=True)
        (repo / package / "__init__.py").write_text("raise SystemExit('not NeuralMind')\n")
    port = free_port()
    both = [start(home, repo, "--port", str(port)) for _ in range(2)]
    said = [(p.wait(90), *p.communicate()) for p in both]
    try:
        assert [code for code, _, _ in said] == [0, 0], said
        outs = sorted(out for _, out, _ in said)
        assert outs[0].startswith("daemon already running at") and "restart" not in outs[0]
        assert outs[1].startswith("daemon running at"), said
        info = json.loads((home / "daemon.json").read_text())
        assert stat.S_IMODE(os.stat(home).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(home / "daemon.json").st_mode) == 0o600
        assert {"host", "port", "pid", "version", "started_at", "token"} <= set(info)
        assert info["host"] == "127.0.0.1" and info["port"] == port
        assert info["plugins"] == ["auth"]  # the CLI offers the commands of what it serves
        assert info["token"] == (home / "token").read_text().strip()
        health = request(port, "GET", "/v1/health")
        assert health.status == 200 and health.json["uptime_s"] >= 0
        assert request(port, "GET", "/v1/projects", token=info["token"]).status == 200
        status = run(home, "daemon", "status", "--json")
        assert status.returncode == 0 and json.loads(status.stdout)["pid"] == info["pid"]
        again = run(home, "daemon", "start", "--port", str(port))
        assert "already running" in again.stdout
        info["code"] = "0" * 16  # as a daemon started before an upgrade left it
        (home / "daemon.json").write_text(json.dumps(info))
        status = run(home, "daemon", "status")
        assert status.stdout.rstrip().endswith(
            "it runs the NeuralMind installed when it started, not this one: restart it "
            "(`neuralmind daemon stop`, then `neuralmind daemon start`) to use this one")
    finally:
        stopped = run(home, "daemon", "stop")
    assert "stopped" in stopped.stdout
    assert not (home / "daemon.json").exists()
    assert run(home, "daemon", "status").returncode == 1
    assert json.loads(run(home, "daemon", "stop", "--json").stdout) == {"stopped": False}


def test_daemon_refuses_a_non_loopback_host(tmp_path):
    r = run(tmp_path, "daemon", "start", "--host", "0.0.0.0", "--foreground")
    assert r.returncode == 2 and "server mode" in r.stderr and "neuralmind serve" in r.stderr


@pytest.mark.parametrize("command", [("daemon", "start"), ("up",)])
def test_a_file_where_the_home_goes_is_one_line_before_any_process(tmp_path, command):
    from tests.support import run_cli
    home = tmp_path / "home"
    home.touch()
    code, out, err = run_cli(*command, env={"NEURALMIND_HOME": str(home)})
    assert (code, out, err) == (2, "", f"neuralmind: [kernel] home {home} is not a directory "
                                       "(a file is in its place)\n")


def test_serve_refuses_remote_bind_without_server_mode(tmp_path):
    r = run(tmp_path, "serve", "--host", "0.0.0.0", "--port", str(free_port()))
    assert r.returncode == 2 and "server mode" in r.stderr


def test_serve_refuses_a_port_another_server_listens_on(tmp_path):
    """Workers bind their own SO_REUSEPORT sockets; a port already in use is refused up front
    instead of being shared with whatever listens there — and with one worker or as the
    daemon, instead of gunicorn retrying it for 5 s and ending in a traceback."""
    import socket
    port = free_port()
    with socket.socket() as other:
        other.bind(("127.0.0.1", port))
        other.listen()
        for argv in (("serve", "--port", str(port), "--workers", "2"),
                     ("serve", "--port", str(port), "--workers", "1"),
                     ("daemon", "start", "--foreground", "--port", str(port))):
            r = run(tmp_path, *argv)
            assert r.returncode == 2, (argv, r.stderr)
            assert r.stderr == f"neuralmind: cannot listen on 127.0.0.1:{port}: Address " \
                               "already in use\n", (argv, r.stderr)


def test_serve_names_a_database_it_cannot_reach_before_any_worker(tmp_path):
    """A shared database out of reach at start-up is one line and exit 2, its password hidden
    — not each worker's 30 s of pool retries ending in a traceback."""
    port = free_port()  # nothing listens there
    cfg = tmp_path / "pg.toml"
    cfg.write_text(f'[storage]\nbackend = "postgres"\n'
                   f'dsn = "postgresql://nm:secret@127.0.0.1:{port}/nm"\n')
    r = run(tmp_path, "serve", "--config", str(cfg), "--port", str(free_port()))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith("neuralmind: the database at user=nm password=*** dbname=nm "
                               f"host=127.0.0.1 port={port} cannot be reached: ")
    assert "secret" not in r.stderr and "Traceback" not in r.stderr


def test_what_only_a_worker_finds_wrong_is_one_line_and_the_boot_error(tmp_path):
    """A role naming a permission no plugin registers is found as each worker builds its app
    (the permissions come from the plugins' hooks): a line per worker and gunicorn's boot-error
    status, not a traceback per worker and one more from the master's halt."""
    cfg = tmp_path / "roles.toml"
    cfg.write_text('[auth.roles]\nreader = ["projects.read", "memories.raed"]\n')
    r = run(tmp_path, "serve", "--config", str(cfg), "--port", str(free_port()),
            "--workers", "2")
    assert r.returncode == 3, r.stderr
    assert "neuralmind: [auth.roles] reader: unknown permission(s) memories.raed" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_daemon_on_an_os_port_is_found_and_stops_through_the_api(tmp_path):
    """Issue 13 item 9: port 0 asks the OS (what the daemon does when 8765 is taken), the
    port it got is in daemon.json, and ``POST /v1/admin/shutdown`` stops it."""
    import time
    home = tmp_path / "nmhome"
    started = run(home, "daemon", "start", "--port", "0")
    info = json.loads((home / "daemon.json").read_text())
    try:
        assert started.returncode == 0, started.stderr
        assert info["port"] > 0 and f":{info['port']}" in started.stdout
        assert request(info["port"], "GET", "/v1/health").json["ok"] is True
        r = request(info["port"], "POST", "/v1/admin/shutdown", token=info["token"])
        assert r.status == 202 and r.json["stopping"] is True and r.json["pid"] == info["pid"]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and os.path.exists(f"/proc/{info['pid']}"):
            time.sleep(0.1)
        assert not os.path.exists(f"/proc/{info['pid']}")
        assert not (home / "daemon.json").exists()
    finally:
        run(home, "daemon", "stop")


def test_a_start_during_a_storage_migrate_is_refused_and_the_other_way_round(tmp_path):
    """The home is held while storage migrate copies it: a daemon start then writes nothing
    the copy would miss; and a migrate waits for no start in progress."""
    from kernel import daemon
    from tests.support import run_cli
    home = tmp_path / "nmhome"
    env = {"NEURALMIND_HOME": str(home)}
    with daemon.holding(home, daemon.MIGRATING):
        code, out, err = run_cli("daemon", "start", env=env)
    assert (code, out) == (1, "")
    assert err == (f"neuralmind: storage migrate (pid {os.getpid()}) is using {home}: start "
                   "the daemon when it ends\n")
    assert not (home / "daemon.json").exists()
    with daemon.holding(home, "daemon start"):
        code, out, err = run_cli("storage", "migrate", "--to", "postgres", "--dsn",
                                 "postgresql://x@127.0.0.1:1/x", env=env)
    assert code == 1 and err == (f"neuralmind: daemon start (pid {os.getpid()}) is using "
                                 f"{home}: nothing was copied; run it when that ends\n")
    assert daemon.holder(home) == ""  # let go: nobody holds it now


def test_a_damaged_discovery_file_never_lets_a_second_daemon_start(tmp_path):
    """daemon.json damaged while its daemon runs: status says so and names the daemon holding
    the home, a second start is refused (it once started a second daemon on the same files),
    and stop stops the one that holds the home."""
    home = tmp_path / "nmhome"
    started = run(home, "daemon", "start", "--port", "0", "--json")
    assert started.returncode == 0, started.stderr
    said = json.loads(started.stdout)
    pid = said["pid"]
    try:
        assert said["started"] is True and said["url"].startswith("http://127.0.0.1:")
        assert said["discovery"] == str(home / "daemon.json")
        (home / "daemon.json").write_text("{bad")
        status = run(home, "daemon", "status")
        assert (status.returncode, status.stdout) == (1, "")
        assert status.stderr == (f"neuralmind: {home / 'daemon.json'} is damaged (not JSON): the "
                                 f"daemon serving this home is pid {pid} — `neuralmind daemon "
                                 "stop` stops it\n")
        second = run(home, "daemon", "start", "--port", "0")
        assert second.returncode == 1 and "is damaged (not JSON)" in second.stderr
        migrate = run(home, "storage", "migrate", "--to", "postgres", "--dsn",
                      "postgresql://x@127.0.0.1:1/x")  # the home is held, whatever the file
        assert (migrate.returncode, migrate.stderr) == (1, (
            f"neuralmind: a daemon serves {home} (pid {pid}): stop it first (`neuralmind daemon "
            "stop`), so nothing is written while the home is copied\n"))
        # a file naming another daemon, gone (its own, rewritten by hand): the home is held
        (home / "daemon.json").write_text(json.dumps({"pid": 2 ** 22 + 1, "host": "127.0.0.1",
                                                      "port": 1}))
        foreground = run(home, "daemon", "start", "--foreground", "--port", "0")
        assert foreground.returncode == 1 and foreground.stderr == (
            f"neuralmind: the daemon (pid {pid}) is using {home}: one daemon serves a home\n")
        (home / "daemon.json").write_text(json.dumps({"pid": "x", "host": "127.0.0.1"}))
        assert "is damaged (no pid, host and port in it)" in run(home, "daemon", "status").stderr
    finally:
        stopped = run(home, "daemon", "stop")
    assert stopped.stdout == "daemon stopped\n" and not os.path.exists(f"/proc/{pid}")
    (home / "daemon.json").write_text("{bad")  # no daemon holds the home now: say to delete it
    status = run(home, "daemon", "status")
    assert status.returncode == 1 and status.stderr.endswith(
        "no daemon holds this home: delete the file, then start the daemon\n")


def test_the_home_is_held_by_the_master_alone(tmp_path):
    """A worker outliving its killed master (gunicorn's notice their parent is gone only on
    their next loop) never keeps the next daemon out: forked children let go of the lock."""
    import signal
    import time

    from kernel import daemon
    script = ("import os, sys, time\nfrom kernel import daemon\n"
              f"daemon.claim_home({str(tmp_path)!r})\n"
              "if os.fork() == 0:\n    time.sleep(30)\n    os._exit(0)\n"
              "print(os.getpid(), flush=True)\ntime.sleep(30)\n")
    master = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        pid = int(master.stdout.readline())
        assert daemon.serving_pid(tmp_path) == pid
        os.kill(pid, signal.SIGKILL)
        master.wait(10)
        deadline = time.monotonic() + 5
        while daemon.serving_pid(tmp_path) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert daemon.serving_pid(tmp_path) is None  # the child still sleeps, holding nothing
    finally:
        os.killpg(master.pid, signal.SIGKILL)


def test_storage_migrate_is_refused_while_team_servers_serve_the_home(tmp_path):
    """A team server holds its home for its life, as the daemon does: migrate copied a home
    two servers still wrote to (a verified copy of what they went on changing, or a partial
    one ending in a foreign-key error). Several servers may serve one home; migrate names
    each, copies nothing, and runs once they are gone."""
    import psycopg

    from tests.support import Server, fresh_pg_dsn, run_cli
    home = tmp_path / "nmhome"
    env = {"NEURALMIND_HOME": str(home), "NEURALMIND_PLUGINS": "auth"}
    migrate = ("storage", "migrate", "--to", "postgres", "--dsn", fresh_pg_dsn())
    servers = [Server(home, plugins=["auth"]).start() for _ in range(2)]
    try:
        pids = sorted(s.proc.pid for s in servers)
        assert run_cli(*migrate, env=env) == (1, "", (
            f"neuralmind: servers serve {home} (pids {pids[0]}, {pids[1]}): stop them first, so "
            "nothing is written while the home is copied\n"))
        servers[0].stop()
        assert run_cli(*migrate, env=env) == (1, "", (
            f"neuralmind: a server serves {home} (pid {servers[1].proc.pid}): stop it first, so "
            "nothing is written while the home is copied\n"))
        with psycopg.connect(migrate[-1]) as conn:  # not even the schema's bookkeeping
            assert conn.execute("SELECT to_regclass('nm_schema')").fetchone()[0] is None
    finally:
        for server in servers:
            server.stop()
    code, out, err = run_cli(*migrate, env=env)
    assert code == 0 and out.startswith("kernel ") and "verified" in out, err


def test_a_server_start_while_storage_migrate_copies_is_refused(tmp_path):
    """While migrate holds the home (its name in .lock, the serving lock alone), neither a
    team server nor a daemon in the foreground starts: one line each, exit 1."""
    from kernel import daemon
    home = tmp_path / "nmhome"
    with daemon.holding(home, daemon.MIGRATING), daemon.unserved(home):
        for argv, what in ((("serve", "--port", str(free_port())), "server"),
                           (("daemon", "start", "--foreground", "--port", "0"), "daemon")):
            r = run(home, *argv, timeout=30)  # a server that started would never end
            assert (r.returncode, r.stdout, r.stderr) == (1, "", (
                f"neuralmind: storage migrate (pid {os.getpid()}) is using {home}: start the "
                f"{what} when it ends\n")), argv
        config = tmp_path / "server.toml"  # plain gunicorn, as docs/operations.md runs it
        config.write_text(f"[server]\nport = {free_port()}\n")
        env = {**os.environ, "NEURALMIND_HOME": str(home), "NEURALMIND_CONFIG": str(config),
               "NEURALMIND_PLUGINS": "auth"}
        r = subprocess.run([sys.executable, "-m", "gunicorn", "-c", "conf/gunicorn.conf.py",
                            "kernel.wsgi:application"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=30)
        assert (r.returncode, r.stdout, r.stderr) == (1, "", (
            f"neuralmind: storage migrate (pid {os.getpid()}) is using {home}: start the server "
            "when it ends\n"))
    assert not (home / "daemon.json").exists()


def test_stop_never_kills_the_process_a_stale_discovery_file_names(tmp_path):
    """After a crash or a reboot, daemon.json can name a pid another process of the user has
    now; with no daemon holding the home and nothing answering at the file's address, stop
    removes the file and signals nobody."""
    from kernel.daemon import write_discovery
    from tests.support import run_cli
    home = tmp_path / "home"
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        write_discovery(home, {"pid": bystander.pid, "host": "127.0.0.1", "port": free_port()})
        code, out, err = run_cli("daemon", "stop", env={"NEURALMIND_HOME": str(home)})
        assert bystander.poll() is None  # alive
        assert code == 0 and "no daemon" in (out + err).lower()
        assert not (home / "daemon.json").exists()
    finally:
        bystander.kill()
        bystander.wait()


def test_a_copy_of_a_running_daemons_home_is_a_home_with_no_daemon(tmp_path):
    """A home copied while its daemon runs: the copy's daemon.json names the original's
    daemon, which holds the original alone — status on the copy said it ran, start started
    nothing, and stop killed the original's daemon."""
    import shutil
    home, copy = tmp_path / "nmhome", tmp_path / "copy"
    assert run(home, "daemon", "start", "--port", "0").returncode == 0
    pid = json.loads((home / "daemon.json").read_text())["pid"]
    copies = None
    try:
        shutil.copytree(home, copy)
        status = run(copy, "daemon", "status")
        assert (status.returncode, status.stdout) == (
            1, "not running — start it with `neuralmind daemon start`\n")
        stopped = run(copy, "daemon", "stop")
        assert stopped.stdout == "no daemon was running\n" and os.path.exists(f"/proc/{pid}")
        assert not (copy / "daemon.json").exists()  # stale: gone
        shutil.copy(home / "daemon.json", copy / "daemon.json")
        started = run(copy, "daemon", "start", "--port", "0", "--json")
        assert started.returncode == 0, started.stderr
        copies = json.loads(started.stdout)
        assert copies["started"] is True and copies["pid"] != pid
        assert json.loads(run(copy, "daemon", "status", "--json").stdout)["home"] == str(copy)
    finally:
        if copies:
            run(copy, "daemon", "stop")
        assert run(home, "daemon", "stop").stdout == "daemon stopped\n"


def test_status_names_a_daemon_that_holds_the_home_but_does_not_answer(tmp_path):
    """Its workers hung (stopped here): status said "not running — start it", and a start
    was then refused; it names the pid holding the home (exit 1)."""
    import signal
    home = tmp_path / "nmhome"
    assert run(home, "daemon", "start", "--port", "0").returncode == 0
    pid = json.loads((home / "daemon.json").read_text())["pid"]
    workers = [int(p) for p in
               open(f"/proc/{pid}/task/{pid}/children").read().split()]
    try:
        for worker in workers:
            os.kill(worker, signal.SIGSTOP)
        status = run(home, "daemon", "status")
        assert (status.returncode, status.stdout) == (1, (
            f"not answering — the daemon (pid {pid}) holds {home} but did not answer "
            "/v1/health within 2 s (starting, busy or hung): wait, or stop it with "
            "`neuralmind daemon stop`\n"))
        said = json.loads(run(home, "daemon", "status", "--json").stdout)
        assert said == {"running": False, "held_by": pid}
    finally:
        for worker in workers:
            os.kill(worker, signal.SIGCONT)
        run(home, "daemon", "stop")


def test_a_home_renamed_under_its_daemon_is_named_with_the_path_it_serves(tmp_path):
    """The daemon keeps holding the renamed home but reads its token and files at the old
    path (every call was 401 while status said "running"): status says so (exit 1), start
    does not take it for the home's daemon, and stop stops it."""
    old, moved = tmp_path / "nmhome", tmp_path / "moved"
    assert run(old, "daemon", "start", "--port", "0").returncode == 0
    pid = json.loads((old / "daemon.json").read_text())["pid"]
    os.rename(old, moved)
    said = (f"the daemon holding {moved} (pid {pid}) serves it as {old}: the home was moved "
            "while the daemon ran — restart it (`neuralmind daemon stop`, then `neuralmind "
            "daemon start`)")
    try:
        status = run(moved, "daemon", "status")
        assert status.returncode == 1 and status.stdout.endswith(f"; but {said}\n")
        assert json.loads(run(moved, "daemon", "status", "--json").stdout)["moved"] is True
        start = run(moved, "daemon", "start", "--port", "0")
        assert (start.returncode, start.stderr) == (1, f"neuralmind: {said}\n")
    finally:
        stopped = run(moved, "daemon", "stop")
    assert stopped.stdout == "daemon stopped\n" and not os.path.exists(f"/proc/{pid}")


def test_a_start_waits_out_a_client_testing_the_homes_lock(tmp_path):
    """Each client tests the home's lock (does its daemon hold it?) by holding it shared for
    an instant: a daemon starting at that instant must not take the client for a daemon."""
    import fcntl
    import time
    script = ("import sys\nfrom kernel import daemon\nprint('ready', flush=True)\n"
              f"sys.stdin.readline()\ndaemon.claim_home({str(tmp_path)!r})\nprint('held')\n")
    start = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert start.stdout.readline() == "ready\n"
    fd = os.open(tmp_path / ".daemon.lock", os.O_RDONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        start.stdin.write("go\n")
        start.stdin.flush()
        time.sleep(0.3)
    finally:
        os.close(fd)
    out, err = start.communicate(timeout=30)
    assert (start.returncode, out) == (0, "held\n"), err
