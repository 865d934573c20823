"""The project registry over HTTP: ids, the denylist, paging, server-mode aliases."""

import hashlib
import os

import pytest


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
    for path in (home, ssh, os.path.join(home, ".config"), str(link)):
        r = kapp.post("/v1/projects", {"path": path})
        assert r.status == 403 and r.error["code"] == "path_not_allowed", path


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
    assert (state / pid / "memory.db").is_file()
    assert sorted(p.name for p in repo.iterdir()) == ["a.py"]
