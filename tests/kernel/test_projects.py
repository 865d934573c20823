"""The project registry over HTTP: ids, the denylist, paging, server-mode aliases."""

import hashlib
import os

import pytest

from tests.support import SESSION


def expected_id(path):
    return "p_" + hashlib.sha256(os.path.realpath(path).encode()).hexdigest()[:12]


def test_register_is_idempotent_with_a_stable_id(kapp, tmp_path):
    d = tmp_path / "proj"
    d.mkdir()
    r1 = kapp.post("/v1/projects", {"path": str(d)})
    r2 = kapp.post("/v1/projects", {"path": str(d) + "/"})
    assert (r1.status, r2.status) == (201, 200)
    assert r1.json["id"] == r2.json["id"] == expected_id(d)
    assert r1.json["path"] == os.path.realpath(d) and r1.json["name"] == "proj"
    got = kapp.get(f"/v1/projects/{r1.json['id']}")
    assert got.status == 200 and got.json["id"] == r1.json["id"]


@pytest.mark.parametrize("path", [".", "repo", "../repo", "./"])
def test_a_relative_path_is_refused_not_resolved_in_the_servers_directory(kapp, tmp_path,
                                                                          monkeypatch, path):
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")  # where the server runs: not where the caller is
    before = kapp.get("/v1/projects?limit=200").json["items"]
    r = kapp.post("/v1/projects", {"path": path})
    assert r.status == 422 and r.error["details"]["errors"] == [{
        "loc": ["body", "path"], "type": "path_invalid",
        "msg": f"{path!r} is relative: give an absolute path (the server's working directory "
               "is not yours)"}]
    assert kapp.get("/v1/projects?limit=200").json["items"] == before


def test_symlink_resolves_to_the_same_project(kapp, tmp_path):
    d = tmp_path / "real"
    d.mkdir()
    (tmp_path / "link").symlink_to(d)
    a = kapp.post("/v1/projects", {"path": str(tmp_path / "link")})
    assert a.json["id"] == expected_id(d)


@pytest.mark.parametrize("path", ["/", "/etc", "/etc/ssl", "/proc/self", "/sys", "/dev",
                                  "/boot", "/run"])
def test_system_paths_refused(kapp, path):
    r = kapp.post("/v1/projects", {"path": path})
    assert r.status == 403 and r.error["code"] == "path_not_allowed"


def test_home_and_credential_dirs_refused_even_through_a_symlink(kapp, tmp_path, monkeypatch):
    home = str(tmp_path / "user-home")
    monkeypatch.setenv("HOME", home)  # the server is this process: its ~ is this HOME
    ssh = os.path.join(home, ".ssh", "keys")
    os.makedirs(ssh, exist_ok=True)
    os.makedirs(os.path.join(home, ".config"), exist_ok=True)
    link = tmp_path / "innocent"
    link.symlink_to(ssh)
    for path in (home, ssh, os.path.join(home, ".config"), str(link), str(tmp_path)):  # the
        # last holds the home, as /home does: its build would index every credential folder
        r = kapp.post("/v1/projects", {"path": path})
        assert r.status == 403 and r.error["code"] == "path_not_allowed", path


def test_the_folders_of_every_users_home_are_refused_whoever_serves(kapp, tmp_path,
                                                                    monkeypatch):
    """A server whose own home is elsewhere (root's /root, a service account's): /home, /Users
    and any folder holding a home the user database lists still index users' credentials."""
    import pwd
    monkeypatch.setenv("HOME", str(tmp_path / "service-home"))
    listed = os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)  # this user's, in passwd
    assert listed != "/", "a user database whose home for this user is / checks nothing here"
    # (/, which holds /root, is a system path, refused as such)
    for path in {"/home", "/Users", listed, os.path.dirname(listed)} - {"/"}:
        r = kapp.post("/v1/projects", {"path": path})
        assert r.status == 403 and r.error["code"] == "path_not_allowed", path
        assert "users' homes" in r.error["message"], path
    inside = tmp_path / "repo"  # a folder beside the homes, holding none, still is one
    inside.mkdir()
    assert kapp.post("/v1/projects", {"path": str(inside)}).status == 201


def test_gits_own_data_is_no_project(kapp, tmp_path):
    """A bare repository or a .git folder holds git's config, remote URLs with their tokens
    among it: refused, naming what to give instead."""
    bare = tmp_path / "bare.git"
    for folder in ("objects", "refs"):
        (bare / folder).mkdir(parents=True)
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "work" / ".git" / "hooks").mkdir(parents=True)
    for path in (bare, tmp_path / "work" / ".git", tmp_path / "work" / ".git" / "hooks"):
        r = kapp.post("/v1/projects", {"path": str(path)})
        assert r.status == 403 and r.error["code"] == "path_not_allowed", path
        assert "not a working tree" in r.error["message"]
    assert kapp.post("/v1/projects", {"path": str(tmp_path / "work")}).status in (200, 201)


def test_not_a_directory_is_422_and_changes_nothing(kapp, tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("x")
    before = kapp.get("/v1/projects?limit=200").json["items"]
    for path in (str(f), str(tmp_path / "missing")):
        r = kapp.post("/v1/projects", {"path": path})
        assert r.status == 422 and r.error["details"]["errors"][0]["loc"] == ["body", "path"]
    assert kapp.get("/v1/projects?limit=200").json["items"] == before


def test_paging_visits_every_project_once(kapp, tmp_path):
    ids = set()
    for i in range(7):
        d = tmp_path / f"p{i}"
        d.mkdir()
        ids.add(kapp.register(d))
    seen, cursor = [], None
    while True:
        r = kapp.get("/v1/projects?limit=3" + (f"&cursor={cursor}" if cursor else ""))
        assert r.status == 200 and len(r.json["items"]) <= 3
        seen += [p["id"] for p in r.json["items"]]
        cursor = r.json["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)) and ids <= set(seen)
    assert kapp.get("/v1/projects?limit=201").status == 422
    assert kapp.get("/v1/projects?cursor=%%%").status == 422


def test_delete_unregisters_and_leaves_files(kapp, tmp_path):
    d = tmp_path / "keep"
    d.mkdir()
    (d / "a.py").write_text("x = 1\n")
    pid = kapp.register(d)
    assert kapp.delete(f"/v1/projects/{pid}").status == 204
    assert kapp.get(f"/v1/projects/{pid}").error["code"] == "project_not_found"
    assert kapp.delete(f"/v1/projects/{pid}").status == 404
    assert (d / "a.py").read_text() == "x = 1\n"


def test_a_project_whose_directory_is_gone_is_refused_until_it_is_removed(make_server, tmp_path):
    import shutil
    repo = tmp_path / "gone"
    repo.mkdir()
    server = make_server(plugins=["auth", "memory", "index"])
    pid = server.register(repo)
    assert server.post(f"/v1/projects/{pid}/memories", {"title": "T", "rationale": "r"}
                       ).status == 201
    shutil.rmtree(repo)
    for method, tail, body in (("GET", "/memories", None), ("POST", "/build", {"wait": True}),
                               ("POST", "/memories", {"title": "U", "rationale": "r"})):
        r = server.request(method, f"/v1/projects/{pid}{tail}", json_body=body)
        assert r.status == 409 and r.error["code"] == "project_directory_missing", tail
        assert str(repo) in r.error["message"] and "neuralmind project remove" in r.error["message"]
    assert not repo.exists()  # nothing made it anew
    shown = server.get(f"/v1/projects/{pid}").json
    assert shown["status"] == {"directory_missing": True}
    assert server.get("/v1/projects").json["items"][0]["status"] == {"directory_missing": True}
    assert server.delete(f"/v1/projects/{pid}").status == 204 and not repo.exists()


def test_server_mode_uses_config_aliases_only(make_server, tmp_path):
    from tests.plugins.auth.helpers import create_token
    repo = tmp_path / "api"
    repo.mkdir()
    cfg = (f'[server]\nallow_remote = true\n[kernel]\nstate_dir = "{tmp_path / "state"}"\n'
           f'[[projects]]\nid = "api"\npath = "{repo}"\n')
    server = make_server(config=cfg)
    token = create_token(server.home, server.home / "config.toml", "alice", "admin")["token"]
    r = server.post("/v1/projects", {"path": str(tmp_path)}, token=token)
    assert r.status == 403 and r.error["code"] == "registration_disabled"
    items = server.get("/v1/projects", token=token).json["items"]
    assert [p["id"] for p in items] == ["api"]
    assert server.get("/v1/projects/api", token=token).json["alias"] is True
    missing = server.get("/v1/projects/p_000000000000", token=token)
    assert missing.error["code"] == "project_not_found"


def test_state_dir_keeps_plugin_state_out_of_the_repository(make_server, tmp_path):
    repo, state = tmp_path / "ro-repo", tmp_path / "state"
    repo.mkdir()
    (repo / "a.py").write_text("def f():\n    return 1\n")
    server = make_server(plugins=["auth", "memory"], config=f'[kernel]\nstate_dir = "{state}"\n')
    pid = server.register(repo)
    r = server.post(f"/v1/projects/{pid}/memories", {"title": "Keep state outside",
                                                      "rationale": "repositories may be read-only"})
    assert r.status == 201
    # on PostgreSQL the records live in the shared database, not in a file of the state dir
    assert (state / pid / "memory.db").is_file() == (SESSION.backend == "sqlite")
    assert sorted(p.name for p in repo.iterdir()) == ["a.py"]


# -- issue 13 items 1–3: config projects pass the denylist, NeuralMind's own state is never a
# project, and a NUL byte is a 422 wherever a path reaches the OS

def server_mode_config(projects: dict[str, str], extra: str = "") -> str:
    return "[server]\nallow_remote = true\n" + extra + "".join(
        f'[[projects]]\nid = "{pid}"\npath = "{path}"\n' for pid, path in projects.items())


@pytest.mark.parametrize("target", ["/etc", "/etc/ssl", "symlink"])
def test_a_config_project_on_the_denylist_stops_the_server_naming_it(tmp_path, target):
    from kernel.config import ConfigError, load_settings
    from kernel.serving import gunicorn_options
    from tests.support import make_kernel
    if target == "symlink":
        (tmp_path / "innocent").symlink_to("/etc")
        target = str(tmp_path / "innocent")
    (tmp_path / "ok").mkdir()
    config = tmp_path / "config.toml"
    config.write_text(server_mode_config({"fine": str(tmp_path / "ok"), "etc": target},
                                         "insecure_http = true\n"))
    with pytest.raises(ConfigError, match=r"id = 'etc'.*reserved system"):
        make_kernel(tmp_path / "home", plugins=["auth"], config=config)
    # `neuralmind serve` checks it before gunicorn forks: one line, not a worker's traceback
    with pytest.raises(ConfigError, match=r"id = 'etc'"):
        gunicorn_options(load_settings(config, kernel={"home": str(tmp_path / "home")}))


def test_an_id_given_to_two_config_projects_stops_the_server(tmp_path):
    from kernel.config import ConfigError
    from tests.support import make_kernel
    (tmp_path / "one").mkdir(), (tmp_path / "two").mkdir()
    config = tmp_path / "config.toml"
    config.write_text(server_mode_config({"api": str(tmp_path / "one")}, "insecure_http = true\n")
                      + f'[[projects]]\nid = "api"\npath = "{tmp_path / "two"}"\n')
    with pytest.raises(ConfigError, match=rf"^\[\[projects\]\] id = 'api' is given twice in "
                                          rf"{config}: an id names one project$"):
        make_kernel(tmp_path / "home", plugins=["auth"], config=config)


def test_a_config_project_that_names_no_directory_stops_the_server_naming_it(tmp_path):
    from kernel.config import ConfigError, load_settings
    from kernel.serving import gunicorn_options
    (tmp_path / "notes.txt").write_text("a file\n")
    for path, why in ((tmp_path / "gone", "no such directory"),
                      (tmp_path / "notes.txt", "not a directory")):
        config = tmp_path / "config.toml"
        config.write_text(server_mode_config({"api": str(path)}, "insecure_http = true\n"))
        with pytest.raises(ConfigError) as refused:
            gunicorn_options(load_settings(config, kernel={"home": str(tmp_path / "home")}))
        assert str(refused.value) == (f"[[projects]] id = 'api', path = '{path}' in {config} is "
                                      f"refused: {why}")


def test_a_config_project_holding_the_state_home_is_refused(tmp_path):
    from kernel.config import ConfigError
    from tests.support import make_kernel
    config = tmp_path / "config.toml"
    config.write_text(server_mode_config({"all": str(tmp_path)}))
    with pytest.raises(ConfigError, match=r"id = 'all'.*NeuralMind's own state"):
        make_kernel(tmp_path / "home", plugins=["auth"], config=config)


def test_the_state_home_and_state_folders_are_never_projects(kapp, tmp_path):
    home = kapp.home
    inside = home / "models"
    inside.mkdir(exist_ok=True)
    dotted = tmp_path / "repo" / ".neuralmind"
    dotted.mkdir(parents=True)
    link = tmp_path / "to-home"
    link.symlink_to(home)
    for path in (home, home.parent, inside, dotted, dotted.parent.parent / "repo/.neuralmind",
                 link):
        r = kapp.post("/v1/projects", {"path": str(path)})
        assert r.status == 403 and r.error["code"] == "path_not_allowed", (path, r.body)
        assert "NeuralMind" in r.error["message"]
    # the repository around a .neuralmind folder is a project, of course
    assert kapp.post("/v1/projects", {"path": str(dotted.parent)}).status == 201


def test_a_project_state_root_is_refused_and_an_old_row_holding_the_home_is_not_served(
        make_server, tmp_path):
    state = tmp_path / "state"
    (state / "p_x").mkdir(parents=True)
    server = make_server(config=f'[kernel]\nstate_dir = "{state}"\n')
    for path in (state, state / "p_x", tmp_path):
        r = server.post("/v1/projects", {"path": str(path)})
        assert r.status == 403 and r.error["code"] == "path_not_allowed", path
    # a row registered before this check (its folder holds the home) is neither listed nor served
    with server.kernel.db.transaction() as conn:
        conn.execute("INSERT INTO projects (id, path, name, registered_at) VALUES (?, ?, ?, ?)",
                     ("p_oldhomerow0", str(tmp_path), "x", "2026-01-01T00:00:00Z"))
    assert server.get("/v1/projects/p_oldhomerow0").error["code"] == "project_not_found"
    assert "p_oldhomerow0" not in [p["id"] for p in server.get("/v1/projects").json["items"]]


def test_a_nul_byte_in_a_path_is_422_and_changes_nothing(kapp, tmp_path):
    before = kapp.get("/v1/projects?limit=200").json["items"]
    r = kapp.post("/v1/projects", {"path": f"{tmp_path}/x\u0000y"})
    assert r.status == 422, r.body
    assert r.error["details"]["errors"][0]["loc"] == ["body", "path"]
    assert kapp.get("/v1/projects?limit=200").json["items"] == before
    assert kapp.get("/v1/docs/assets/swagger-ui.css%00.js").status == 422  # before any lookup


def test_a_nul_byte_in_a_config_path_is_a_config_error(tmp_path):
    from kernel.config import ConfigError, load_settings
    config = tmp_path / "config.toml"
    config.write_text(server_mode_config({"x": "/tmp/a\\u0000b"}))
    with pytest.raises(ConfigError, match="NUL"):
        load_settings(config)
    for section, key in (("kernel", "state_dir"), ("kernel", "home"), ("server", "tls_cert"),
                         ("server", "tokens_file"), ("embeddings", "model_dir")):
        with pytest.raises(ConfigError, match="NUL"):
            load_settings(**{section: {key: "/tmp/a\0b"}})


def test_a_nul_byte_in_a_memory_file_is_422_not_500(make_server, tmp_path):
    server = make_server(plugins=["auth", "memory"])
    (tmp_path / "r").mkdir()
    pid = server.register(tmp_path / "r")
    for files in (["/abs/a\u0000b.py"], ["a\u0000b.py"]):
        r = server.post(f"/v1/projects/{pid}/memories",
                        {"title": "t", "rationale": "r", "files_affected": files})
        assert r.status == 422, r.body
        assert r.error["details"]["errors"][0]["loc"] == ["body", "files_affected", 0]
    assert server.get(f"/v1/projects/{pid}/memories").json["items"] == []


def test_a_projects_state_folder_is_ignored_by_git(make_server, tmp_path):
    """Issue 13 item 13: `.neuralmind/` showed in `git status` of every indexed repository;
    it holds a `.gitignore` of `*` from the moment it is made."""
    import subprocess
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "a.py").write_text("x = 1\n")
    server = make_server(plugins=["auth", "memory"])
    pid = server.register(repo)
    assert server.post(f"/v1/projects/{pid}/memories",
                       {"title": "t", "rationale": "r"}).status == 201
    assert (repo / ".neuralmind" / ".gitignore").read_text() == "*\n"
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                            capture_output=True, text=True, check=True).stdout
    assert status.splitlines() == ["?? a.py"]


@pytest.mark.sqlite_only("a project's files under its .neuralmind folder, deleted by hand")
def test_a_project_cloned_afresh_under_the_running_server_is_said_not_written_to_the_lost_file(
        make_server, tmp_path, backend):
    """``rm -rf repo && git clone … repo`` while the daemon runs: the server held the deleted
    .neuralmind files open — builds and writes went into them (gone at its next start) and
    new threads met an empty file (500s). Now 409 project_state_replaced, nothing written,
    saying the quick way out (it said to restart the server): remove the project and add it
    again, which serves the folder as it is now at once."""
    import shutil
    server = make_server(plugins=["auth", "memory"])
    repo = tmp_path / "repo"
    repo.mkdir()
    pid = server.register(repo)
    memories = f"/v1/projects/{pid}/memories"
    assert server.post(memories, {"title": "Use WAL", "rationale": "readers"}).status == 201
    shutil.rmtree(repo)
    repo.mkdir()  # the fresh clone
    assert server.register(repo) == pid  # registered already: that changes nothing
    for r in (server.post(memories, {"title": "Lost?", "rationale": "no"}), server.get(memories)):
        assert r.status == 409 and r.error["code"] == "project_state_replaced"
        assert ("Remove the project and add it again to serve the folder as it is now "
                "(`neuralmind project remove`, then `neuralmind project add`, in the folder); "
                "what the deleted state held is gone with it") in r.error["message"]
    assert not (repo / ".neuralmind" / "memory.db").exists()
    assert server.delete(f"/v1/projects/{pid}").status == 204
    assert server.register(repo) == pid
    assert server.post(memories, {"title": "Use WAL again", "rationale": "r"}).status == 201
    assert [m["title"] for m in server.get(memories).json["items"]] == ["Use WAL again"]


@pytest.mark.sqlite_only("the state's files on disk")
def test_a_projects_state_folder_is_its_owners_alone(make_server, tmp_path):
    """The .neuralmind folder was 0755 with its databases 0644: any local user who could enter
    the repository read every memory and the index (the home is 0700)."""
    import stat
    fresh, older = tmp_path / "fresh", tmp_path / "older"
    fresh.mkdir(), (older / ".neuralmind").mkdir(parents=True)
    (older / ".neuralmind").chmod(0o755)  # as an earlier release left it
    server = make_server(plugins=["auth", "memory"])
    for repo in (fresh, older):
        pid = server.register(repo)
        r = server.post(f"/v1/projects/{pid}/memories", {"title": "t", "rationale": "secret"})
        assert r.status == 201, r.body
        assert stat.S_IMODE((repo / ".neuralmind").stat().st_mode) == 0o700, repo
