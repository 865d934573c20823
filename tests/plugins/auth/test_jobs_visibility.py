"""A project-limited token pages through its own jobs: the visibility filter runs in SQL,
before the page's LIMIT (it once ran after it, so newer jobs of other projects could fill a
page and end the listing with ``next_cursor: null`` while more of the token's jobs existed)."""

from __future__ import annotations

import time

import falcon.testing

from tests.plugins.auth.helpers import server_config
from tests.support import make_kernel


def test_a_limited_token_pages_through_every_job_of_its_project(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(server_config(tmp_path, {"a": tmp_path / "repo-a",
                                               "b": tmp_path / "repo-b"}))
    kernel = make_kernel(tmp_path / "home", plugins=["auth", "memory"], config=config)
    try:
        tokens = kernel.state("auth").tokens
        admin = tokens.create("admin", "admin", "*")[0]
        reader_a = tokens.create("reader-a", "reader", ["a"])[0]
        client = falcon.testing.TestClient(kernel.app, headers={"Host": "127.0.0.1"})

        def call(method, path, token, **kw):
            return client.simulate_request(method, path, headers={
                "Authorization": f"Bearer {token}"}, **kw)

        for project in ("a", "a", "a", "b", "b", "b"):  # b's jobs are the newest
            r = call("POST", f"/v1/projects/{project}/memories/maintenance", admin,
                     params={"wait": "true"})
            assert r.status_code == 200, r.text
            time.sleep(0.002)  # created_at counts milliseconds: no two jobs tie
        seen, cursor = [], None
        while True:
            r = call("GET", "/v1/jobs", reader_a,
                     params={"limit": "2", **({"cursor": cursor} if cursor else {})})
            assert r.status_code == 200, r.text
            seen += [j["project_id"] for j in r.json["items"]]
            cursor = r.json["next_cursor"]
            if cursor is None:
                break
        assert seen == ["a", "a", "a"]
        everything = call("GET", "/v1/jobs", admin, params={"limit": "200"}).json["items"]
        # newest first; two jobs made within one millisecond may come either way round
        assert sorted(j["project_id"] for j in everything) == ["a"] * 3 + ["b"] * 3
        assert [j["project_id"] for j in everything][:2] == ["b", "b"]
    finally:
        kernel.shutdown()
