"""Plugin state belongs to its kernel: two kernels in one process, each with its own home,
keep their own projects, memories and code index (the index plugin once served the first
kernel's service to the second)."""

from __future__ import annotations

import falcon.testing

from tests.support import DEFAULT_PLUGINS, make_kernel


def _kernel(home):
    return make_kernel(home, plugins=DEFAULT_PLUGINS)


def _client(kernel):
    token = (kernel.home / "token").read_text().strip()
    return falcon.testing.TestClient(kernel.app, headers={
        "Host": "127.0.0.1", "Authorization": f"Bearer {token}"})


def test_two_kernels_in_one_process_keep_their_own_data(tmp_path):
    repos = []
    for name in ("a", "b"):
        repo = tmp_path / f"repo_{name}"
        repo.mkdir()
        (repo / f"only_in_{name}.py").write_text(f"def only_in_{name}():\n    return 1\n")
        repos.append(repo)
    kernels = [_kernel(tmp_path / "home_a"), _kernel(tmp_path / "home_b")]
    try:
        clients = [_client(k) for k in kernels]
        assert kernels[0].state("index") is not kernels[1].state("index")
        assert kernels[0].state("memory") is not kernels[1].state("memory")
        pids = []
        for client, repo, name in zip(clients, repos, "ab"):
            r = client.simulate_post("/v1/projects", json={"path": str(repo)})
            assert r.status_code == 201, r.text
            pid = r.json["id"]
            pids.append(pid)
            r = client.simulate_post(f"/v1/projects/{pid}/memories",
                                     json={"title": f"decision {name}", "rationale": "why"})
            assert r.status_code == 201, r.text
            r = client.simulate_post(f"/v1/projects/{pid}/build", json={"wait": True})
            assert r.status_code == 200, r.text

        for i, (client, pid, name) in enumerate(zip(clients, pids, "ab")):
            listed = client.simulate_get("/v1/projects").json["items"]
            assert [p["id"] for p in listed] == [pid]
            titles = [m["title"] for m in
                      client.simulate_get(f"/v1/projects/{pid}/memories").json["items"]]
            assert titles == [f"decision {name}"]
            hits = client.simulate_post(f"/v1/projects/{pid}/search", json={
                "query": "only_in", "mode": "keyword"}).json["results"]
            assert {h["source_file"] for h in hits} == {f"only_in_{name}.py"}
            stats = client.simulate_get(f"/v1/projects/{pid}/stats").json
            assert stats["files"] == 1
            jobs = client.simulate_get("/v1/jobs").json["items"]
            assert [(j["kind"], j["project_id"], j["status"]) for j in jobs] == [
                ("build", pid, "done")]
            # the other kernel's token is refused here
            other = (kernels[1 - i].home / "token").read_text().strip()
            assert client.simulate_get("/v1/projects", headers={
                "Authorization": f"Bearer {other}"}).status_code == 401
    finally:
        for k in kernels:
            k.shutdown()
    assert all(k.state("index") is None and k.state("memory") is None for k in kernels)
