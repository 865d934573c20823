"""The resolved structural graph through the routes: references resolved per language
(imports and aliases, self and bases, typed receivers and pytest fixtures; JS/TS import and
require; Go import paths; Rust mod/use; Java imports, packages and implicit this), impact
with its paths and the decisions on each file, neighbours, unresolved references, re-linking
after an incremental build, and bad input."""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.index.conftest import build
from tests.support import LocalServer

REPO = {
    "app/__init__.py": "from .models import Order as Order\n",
    "app/models.py": '''class Base:
    def save(self):
        return store_row(self)


class Order(Base):
    def total(self):
        return self.save() + len([])


def store_row(row):
    print(row)
    return row
''',
    "app/service.py": '''import app.models
from app import models as m
from .models import Order


def place(order: Order):
    order.total()
    return m.store_row(order)


def place_again():
    return app.models.store_row(1)


def checkout():
    return Order()
''',
    "tests/conftest.py": '''import pytest
from app.models import Order


@pytest.fixture
def order():
    return Order()
''',
    "tests/test_orders.py": '''from app.service import place


def test_place(order):
    place(order)
    assert order.total()
''',
    "web/util.js": "export function formatPrice(x) { return x; }\n",
    "web/cart.ts": 'import { formatPrice as fp } from "./util";\n'
                   "export function show(): number { return fp(1); }\n",
    "web/legacy.js": 'const util = require("./util");\nconst { formatPrice } = require("./util");\n'
                     "function old() { util.formatPrice(2); return formatPrice(3); }\n",
    "go.mod": "module example.com/shop\n\ngo 1.22\n",
    "pricing/price.go": "package pricing\n\nfunc Round(x int) int { return x }\n",
    "main.go": 'package main\n\nimport p "example.com/shop/pricing"\n\n'
               "func main() { p.Round(1) }\n",
    "rs/src/lib.rs": "mod money;\nmod m;\nuse crate::money::Cents;\n"
                     "use crate::m::shapes::{area, Square as Sq};\n\n"
                     "pub fn total() -> Cents { Cents::new(1) }\n\n"
                     'pub fn report() { let s = Sq::new(2.0); println!("{}", area(&s)); }\n',
    # a call inside a macro's tokens, and `use super::*` in an inline `mod tests`
    "rs/src/m/mod.rs": "pub mod shapes;\n\npub fn unit() -> f64 { 1.0 }\n",
    "rs/src/m/shapes.rs": "pub struct Square { side: f64 }\n\n"
                          "impl Square { pub fn new(side: f64) -> Square { Square { side } } }\n\n"
                          "pub fn area(s: &Square) -> f64 { s.side * s.side }\n\n"
                          "#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n"
                          "    fn unit_square() {\n        let s = Square::new(1.0);\n"
                          "        assert_eq!(area(&s), 1.0);\n    }\n}\n",
    # a re-export through a barrel file, with its alias, and `export * from`
    "web/lib/names.js": "export function formatName(u) { return u.first; }\n",
    "web/lib/more.js": "export function shout(s) { return s + \"!\"; }\n",
    "web/lib/index.js": 'export { formatName as fmtName } from "./names";\n'
                        'export * from "./more";\n',
    "web/only.js": 'import { fmtName, shout } from "./lib";\n'
                   "export function useIt() { return shout(fmtName({})); }\n",
    # a class defined inside a test function: its base is kept on the function
    "tests/test_nested.py": "from app import models as m\n\n\ndef test_custom_order():\n"
                            "    class Custom(m.Order):\n        pass\n\n"
                            "    assert Custom\n",
    "rs/src/money.rs": "pub struct Cents(u32);\n\n"
                       "impl Cents { pub fn new(v: u32) -> Cents { Cents(v) } }\n",
    "java/com/shop/util/Money.java": "package com.shop.util;\n\n"
                                     "public class Money { public static int round(int x) "
                                     "{ return x; } }\n",
    "java/com/shop/app/App.java": "package com.shop.app;\n\nimport com.shop.util.Money;\n\n"
                                  "public class App {\n  void run() { Money.round(1); helper(); }\n"
                                  "  void helper() {}\n}\n",
}


def write(root, files=REPO):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("graph")
    with LocalServer(base / "home", plugins=["auth", "index", "memory"]) as server:
        root = write(base / "repo")
        pid = server.register(root)
        build(server, pid)
        yield server, pid, root


def node_id(server, pid, label, path):
    doc = server.get(f"/v1/projects/{pid}/documents?path={path}").json
    return next(n["id"] for n in doc["nodes"] if n["label"] == label)


def neighbours(server, pid, **query):
    r = server.get(f"/v1/projects/{pid}/neighbors/structural?{urllib.parse.urlencode(query)}")
    assert r.status == 200, r.body
    return r.json


def labels(items):
    return {(i["node"]["path"], i["node"]["label"]) for i in items}


def test_python_impact_follows_imports_aliases_self_bases_and_fixtures(served):
    server, pid, _ = served
    target = node_id(server, pid, "store_row", "app/models.py")
    r = server.post(f"/v1/projects/{pid}/impact", {"nodes": [target], "depth": 3})
    assert r.status == 200, r.body
    out = r.json
    found = {(i["node"]["label"], i["distance"]) for i in out["impacted"]}
    # m.store_row (alias), app.models.store_row (import a.b), the module-level name
    assert {("place", 1), ("place_again", 1), ("Base.save", 1)} <= found
    assert ("Order.total", 2) in found  # self.save() found in the base class
    assert ("test_place", 2) in found  # through place()
    distances = [i["distance"] for i in out["impacted"]]
    assert distances == sorted(distances)
    total = next(i for i in out["impacted"] if i["node"]["label"] == "Order.total")
    assert [(s["src"]["label"], s["kind"], s["dst"]["label"]) for s in total["path"]] == [
        ("Order.total", "calls", "Base.save"), ("Base.save", "calls", "store_row")]
    assert all(s["how"] == "exact" for i in out["impacted"] for s in i["path"])
    assert out["changed"][0]["label"] == "store_row" and not out["truncated"]


def test_typed_parameters_and_pytest_fixtures_type_their_calls(served):
    server, pid, _ = served
    total = node_id(server, pid, "Order.total", "app/models.py")
    callers = labels(neighbours(server, pid, node=total)["callers"])
    # `order: Order` in place(); the `order` fixture in tests/conftest.py for test_place()
    assert {("app/service.py", "place"), ("tests/test_orders.py", "test_place")} <= callers


@pytest.mark.parametrize("label, path, callers", [
    ("formatPrice", "web/util.js", {("web/cart.ts", "show"), ("web/legacy.js", "old")}),
    ("Round", "pricing/price.go", {("main.go", "main")}),
    ("Cents.new", "rs/src/money.rs", {("rs/src/lib.rs", "total")}),
    ("Money.round", "java/com/shop/util/Money.java", {("java/com/shop/app/App.java", "App.run")}),
    ("App.helper", "java/com/shop/app/App.java", {("java/com/shop/app/App.java", "App.run")}),
])
def test_each_language_resolves_calls_through_its_imports(served, label, path, callers):
    server, pid, _ = served
    out = neighbours(server, pid, node=node_id(server, pid, label, path))
    assert labels(out["callers"]) == callers
    assert all(i["how"] == "exact" for i in out["callers"])


@pytest.mark.parametrize("label, path", [("formatName", "web/lib/names.js"),
                                         ("shout", "web/lib/more.js")])
def test_a_re_export_through_a_barrel_resolves_to_the_function(served, label, path):
    """`export {formatName as fmtName} from "./names"` and `export * from "./more"` in
    web/lib/index.js: `fmtName()` in a module importing "./lib" calls names.formatName, not
    the barrel module, and impact of formatName reaches its caller."""
    server, pid, _ = served
    target = node_id(server, pid, label, path)
    callers = neighbours(server, pid, node=target)["callers"]
    assert [(i["node"]["path"], i["node"]["label"], i["how"]) for i in callers] == [
        ("web/only.js", "useIt", "exact")]
    out = server.post(f"/v1/projects/{pid}/impact", {"nodes": [target]}).json
    assert ("web/only.js", "useIt") in labels(out["impacted"])
    callees = neighbours(server, pid, node=node_id(server, pid, "useIt", "web/only.js"))
    assert {i["node"]["kind"] for i in callees["callees"]} == {"function"}  # no module called


def test_rust_calls_inside_macros_are_edges(served):
    """`assert_eq!(area(&s), 1.0)` in a test and `println!("{}", area(&s))`: the grammar
    leaves a macro's arguments as tokens, and the calls in them are read from those."""
    server, pid, _ = served
    out = neighbours(server, pid, node=node_id(server, pid, "area", "rs/src/m/shapes.rs"))
    assert labels(out["callers"]) == {("rs/src/lib.rs", "report"),
                                      ("rs/src/m/shapes.rs", "tests.unit_square")}
    assert all(i["how"] == "exact" for i in out["callers"])
    impact = server.post(f"/v1/projects/{pid}/impact", {"files": ["rs/src/m/shapes.rs"]}).json
    assert ("rs/src/lib.rs", "report") in labels(impact["impacted"])


def test_use_super_in_an_inline_module_is_the_file_itself(served):
    """`use super::*` inside `mod tests { … }` of m/shapes.rs names shapes, not m/mod.rs."""
    server, pid, _ = served
    out = neighbours(server, pid, file="rs/src/m/shapes.rs")
    assert "rs/src/m/mod.rs" not in {i["node"]["path"] for i in out["imports"]}
    assert "super::*" not in {u["ref"] for u in out["unresolved"]}
    importers = neighbours(server, pid, file="rs/src/m/mod.rs")["importers"]
    assert "rs/src/m/shapes.rs" not in {i["node"]["path"] for i in importers}


def test_a_class_defined_in_a_function_keeps_its_bases_on_the_function(served):
    """`class Custom(m.Order)` inside test_custom_order() is no node; its base is kept as an
    `inherits` edge of the test, so impact of the base's file lists the test."""
    server, pid, _ = served
    order = node_id(server, pid, "Order", "app/models.py")
    subclasses = neighbours(server, pid, node=order)["subclasses"]
    assert [(i["node"]["path"], i["node"]["label"], i["how"]) for i in subclasses] == [
        ("tests/test_nested.py", "test_custom_order", "exact")]
    out = server.post(f"/v1/projects/{pid}/impact", {"files": ["app/models.py"]}).json
    assert "tests/test_nested.py" in {f["path"] for f in out["files"]}


def test_file_neighbours_and_unresolved_references(served):
    server, pid, _ = served
    out = neighbours(server, pid, file="app/service.py")
    assert out["file"] == "app/service.py" and out["node"] is None
    assert ("app/models.py", "store_row") in labels(out["callees"])
    assert ("tests/test_orders.py", "test_place") in labels(out["callers"])
    assert ("app/models.py", "Order") in labels(out["imports"])
    assert all(i["node"]["path"] != "app/service.py" for k in ("callers", "callees")
               for i in out[k])
    models = neighbours(server, pid, file="app/models.py")
    assert ("app/models.py", "Base") not in labels(models["bases"])  # same file: left out
    unresolved = {(u["source"]["label"], u["ref"]) for u in models["unresolved"]}
    assert {("store_row", "print"), ("Order.total", "len")} <= unresolved
    depth2 = neighbours(server, pid, file="app/models.py", depth=2)
    assert ("tests/test_orders.py", "test_place") in labels(depth2["callers"])


def test_impact_of_files_lists_every_file_with_its_decisions(served):
    server, pid, _ = served
    r = server.post(f"/v1/projects/{pid}/memories",
                    {"title": "Orders are placed through the service",
                     "rationale": "one place validates them", "files_affected": ["app/service.py"]})
    assert r.status == 201, r.body
    out = server.post(f"/v1/projects/{pid}/impact", {"files": ["app/models.py"]}).json
    files = {f["path"]: f for f in out["files"]}
    assert files["app/models.py"]["distance"] == 0
    assert files["app/service.py"]["distance"] == 1 and files["app/service.py"]["nodes"] >= 2
    assert [d["title"] for d in files["app/service.py"]["decisions"]] == [
        "Orders are placed through the service"]
    assert files["app/service.py"]["decisions"][0]["kind"] == "decision"


def test_an_incremental_build_relinks_what_changed(served):
    server, pid, root = served
    models = root / "app/models.py"
    before = models.read_text()
    try:
        models.write_text(before.replace("def store_row", "def persist_row"))
        result = build(server, pid)
        assert result["files_changed"] == 1 and result["edges_linked"]
        out = neighbours(server, pid, file="app/service.py")
        assert all(i["node"]["label"] != "store_row" for i in out["callees"])
        assert "m.store_row" in {u["ref"] for u in out["unresolved"]}
    finally:
        models.write_text(before)
        build(server, pid)
    target = node_id(server, pid, "store_row", "app/models.py")
    assert ("app/service.py", "place") in labels(neighbours(server, pid, node=target)["callers"])


def test_bad_graph_requests_say_what_is_wrong(served, tmp_path):
    server, pid, _ = served
    base = f"/v1/projects/{pid}"
    r = server.post(base + "/impact", {"nodes": ["n_0000000000000000"]})
    assert r.status == 404 and r.error["code"] == "node_not_found"
    r = server.post(base + "/impact", {"files": ["logo.png"]})
    assert r.status == 404 and r.error["code"] == "file_not_indexed"
    assert r.error["message"] == (f"logo.png is not an indexed file of {pid} (ignored, "
                                  "binary, or not built yet)")
    r = server.post(base + "/impact", {"files": ["../outside.py"]})
    assert r.status == 422 and r.error["details"]["errors"][0]["type"] == "path_outside_project"
    for body in ({}, {"files": []}, {"files": ["a.py"], "depth": 0},
                 {"files": ["a.py"], "depth": 7}, {"nodes": [""]}, {"files": "app/models.py"}):
        r = server.post(base + "/impact", body)
        assert r.status == 422 and r.error["code"] == "validation_error", body
    r = server.get(base + "/neighbors/structural")
    assert r.status == 422 and "exactly one of node and file" in r.body.decode()
    r = server.get(base + "/neighbors/structural?node=x&file=app/models.py")
    assert r.status == 422
    fresh = server.register(write(tmp_path / "unbuilt", {"a.py": "x = 1\n"}))
    r = server.post(f"/v1/projects/{fresh}/impact", {"files": ["a.py"]})
    assert r.status == 409 and r.error["code"] == "index_not_built"


def test_a_directory_is_named_a_directory_not_a_file_left_out(served):
    """`project impact odd`, odd a folder of the repository, answered `odd is not an indexed
    file … (ignored, binary, or not built yet)`: it says it is a directory and takes files."""
    server, pid, _ = served
    said = f"app is a directory of {pid}, not a file: name the files in it"
    r = server.post(f"/v1/projects/{pid}/impact", {"files": ["app/"]})
    assert (r.status, r.error["code"], r.error["message"]) == (404, "file_not_indexed", said)
    r = server.get(f"/v1/projects/{pid}/neighbors/structural?file=app")
    assert (r.status, r.error["message"]) == (404, said)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(st.sampled_from(["files", "nodes", "depth", "limit", "guessed", "x"]),
                            st.one_of(st.none(), st.booleans(), st.integers(-5, 2000),
                                      st.text(max_size=30), st.lists(st.text(max_size=40),
                                                                     max_size=3))))
def test_impact_never_answers_500(served, body):
    server, pid, _ = served
    r = server.post(f"/v1/projects/{pid}/impact", body)
    assert r.status in (200, 404, 422), (body, r.body)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.dictionaries(st.sampled_from(["node", "file", "depth", "limit", "guessed"]),
                             st.text(alphabet=st.characters(blacklist_categories=("Cs",)),
                                     max_size=20), max_size=3))
def test_neighbours_never_answer_500(served, query):
    server, pid, _ = served
    r = server.get(f"/v1/projects/{pid}/neighbors/structural?{urllib.parse.urlencode(query)}")
    assert r.status in (200, 404, 422), (query, r.body)
