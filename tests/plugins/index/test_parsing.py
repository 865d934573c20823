"""The chunker on its own: symbols, qualified names, edges per language, and grammars that
come from the installed wheels (nothing is fetched: there is no network here at all)."""

from __future__ import annotations

import sys
import sysconfig

from plugins.index import chunker, parse_treesitter
from plugins.index.build import embed_text
from plugins.index.models import IndexSettings
from tests.plugins.index.conftest import FILES


def kinds(parsed):
    return [(n.kind, n.qualname) for n in parsed.nodes]


def edges(parsed, kind):
    return {(parsed.nodes[e.src].qualname, e.target) for e in parsed.edges if e.kind == kind}


def test_python_symbols_and_edges():
    p = chunker.parse("shop/cart.py", FILES["shop/cart.py"])
    assert kinds(p) == [("module", "shop.cart"), ("class", "Cart"), ("method", "Cart.add_item"),
                        ("method", "Cart.total"), ("function", "compute_sales_tax")]
    assert ("shop.cart", "shop.prices") in edges(p, "imports")
    assert ("Cart.total", "round_money") in edges(p, "calls")
    assert ("Cart", "object") in edges(p, "inherits")
    assert ("Cart", "Cart.add_item") in edges(p, "contains")
    cls = p.nodes[1]
    assert "def add_item(self, sku, qty):" in cls.text and "self.items[sku]" not in cls.text


def test_tree_sitter_languages():
    js = chunker.parse("web/server.js", FILES["web/server.js"])
    assert {("class", "HttpServer"), ("method", "HttpServer.listen"), ("function", "sendEmail"),
            ("function", "retryFetch")} <= set(kinds(js))
    assert ("HttpServer", "BaseServer") in edges(js, "inherits")
    assert ("HttpServer.listen", "bindSocket") in edges(js, "calls")
    assert js.nodes[1].docstring == "Starts the HTTP listener on a port."
    go = chunker.parse("svc/main.go", FILES["svc/main.go"])
    assert ("method", "Greeter.Greet") in kinds(go) and ("svc.main", "fmt") in edges(go, "imports")
    rs = chunker.parse("svc/lib.rs", FILES["svc/lib.rs"])
    assert ("method", "Stack.push") in kinds(rs)
    java = chunker.parse("svc/App.java", FILES["svc/App.java"])
    assert ("method", "App.run") in kinds(java) and ("App", "Base") in edges(java, "inherits")
    ts = chunker.parse("web/types.ts", FILES["web/types.ts"])
    assert {("class", "Order"), ("function", "orderTotal")} <= set(kinds(ts))


def test_markdown_sections_and_whole_file_fallback():
    md = chunker.parse("README.md", FILES["README.md"])
    assert kinds(md) == [("file", "README.md"), ("section", "Demo shop"),
                         ("section", "Demo shop > Install")]
    broken = chunker.parse("old.py", "print 'python 2'\n")
    assert kinds(broken) == [("file", "old.py")] and broken.nodes[0].text == "print 'python 2'"
    toml = chunker.parse("pyproject.toml", "[a]\nb = 1\n")
    assert toml.language == "toml" and kinds(toml) == [("file", "pyproject.toml")]


def test_headings_inside_a_fence_are_text_however_the_fence_is_written():
    """Fences as CommonMark reads them: a ```` block holding ``` (the example of a fence),
    tildes, and a backtick line whose info string holds a backtick (no fence) — counted odd
    and even, the inner ``` closed the block and its heading became a section."""
    text = ("# Guide\n\n````md\n```sh\n# not a section\n```\n````\n\n~~~\n# nor this\n~~~\n"
            "\n``` `x` is no fence\n\n## Usage\n")
    doc = chunker.parse("GUIDE.md", text)
    assert kinds(doc) == [("file", "GUIDE.md"), ("section", "Guide"),
                          ("section", "Guide > Usage")]


def test_grammars_load_from_installed_wheels_never_a_downloader():
    site = sysconfig.get_paths()["purelib"]
    for language, spec in parse_treesitter.SPECS.items():
        parse_treesitter.parser_for(language)
        module = sys.modules[spec.module]
        assert module.__file__.startswith(site), module.__file__
    assert "tree_sitter_language_pack" not in sys.modules


def test_embed_text_leaves_out_path_and_trivial_modules():
    p = chunker.parse("a/b/cart.py", FILES["shop/cart.py"])
    q = chunker.parse("elsewhere/cart.py", FILES["shop/cart.py"])
    texts = [chunker.embed_text(n.kind, n.qualname, n.text, n.docstring, n.whole, 512)
             for n in p.nodes]
    moved = [chunker.embed_text(n.kind, n.qualname, n.text, n.docstring, n.whole, 512)
             for n in q.nodes]
    assert texts[1:] == moved[1:]  # a rename re-embeds no symbol
    # docstring first, the name as words, then the code without its docstring
    assert texts[4] == ("compute sales tax\nReturn the tax owed on an amount at a percentage "
                        "rate.\ndef compute_sales_tax(amount, rate):\n"
                        "    return round_money(amount * rate / 100)")
    n = p.nodes[4]
    assert chunker.embed_text(n.kind, n.qualname, n.text, n.docstring, n.whole, 512,
                              mode="code").startswith(
        "function compute_sales_tax\ndef compute_sales_tax(amount, rate):\n    \"\"\"Return")
    bare = chunker.parse("m.py", "import os\n\ndef f():\n    pass\n")
    assert chunker.embed_text(*(lambda n: (n.kind, n.qualname, n.text, n.docstring, n.whole))(
        bare.nodes[0]), 512) is None


def test_the_code_after_the_docstring_leaves_out_every_docstring_python_takes():
    """One-line strings in single quotes are docstrings too, a comment may precede one, and a
    quote in the header's comment does not hide the header: each docstring is embedded once."""
    heads = ['def f(x):\n    "Return x."\n', "def f(x):\n    'Return x.'\n",
             'def f(x):  # that\'s "it"\n    """Return x."""\n',
             'def f(x):\n    # a note\n    r"""Return x."""\n',
             "def f(x='#'):\n    '''Return\n    x.'''\n", 'def f(x):\n    "Return \\"x\\"."\n']
    for head in heads:
        node = chunker.parse("m.py", head + "    return x\n").nodes[1]
        code = chunker.without_docstring(node.kind, node.text)
        assert code == head.split("\n")[0] + "\n    return x", head
        assert embed_text(IndexSettings(), "m.py", node.kind, node.qualname, node.text,
                          node.docstring, node.whole, node.signature).count("Return") == 1
    module = chunker.parse("m.py", "'Invoices.'\nimport os\n").nodes[0]
    assert chunker.without_docstring("module", module.text) == "import os"


def test_a_module_vector_leaves_out_the_opening_comment_block():
    header = "#!/usr/bin/env python\n# Copyright 2024 Somebody\n#\n# Licensed under the MIT.\n\n"
    module = chunker.parse("pkg/m.py", header + '"""Read and write invoices."""\nimport os\n')
    text = chunker.embed_text(*(lambda n: (n.kind, n.qualname, n.text, n.docstring, n.whole))(
        module.nodes[0]), 512)
    assert text == "pkg m\nRead and write invoices.\nimport os"
    java = chunker.embed_text("module", "App", "/* Licence\n * text */\n// more\nclass App {}",
                              "", True, 512)
    assert java == "app\n\nclass App {}"
    assert chunker.embed_text("module", "m", "# only a licence\n", "", True, 512) is None


def refs(parsed, kind):
    return {(parsed.nodes[e.src].qualname, e.ref, e.alias) for e in parsed.edges if e.kind == kind}


def test_python_references_and_bindings():
    p = chunker.parse("shop/sub/cart.py", (
        "import os.path, json as j\nfrom .prices import round_money as rm\nfrom ..core import *\n"
        "from . import helpers\n\nclass Cart(base.Model):\n    def total(self, req: Request):\n"
        "        super().total()\n        req.body.read()\n        make().save()\n"
        "        return rm(self.items) + helpers.fmt(j.dumps(1))\n\n"
        "def fixture_user(client):\n    return client.login()\n"))
    assert {("shop.sub.cart", "os.path", "os"), ("shop.sub.cart", "json", "j"),
            ("shop.sub.cart", "shop.sub.prices#round_money", "rm"),
            ("shop.sub.cart", "shop.core#*", "*"),
            ("shop.sub.cart", "shop.sub#helpers", "helpers")} <= refs(p, "imports")
    calls = {ref for _, ref, _ in refs(p, "calls")}
    assert {"super.total", "Request.body.read", "?.save", "rm", "helpers.fmt", "j.dumps",
            "@client.login"} <= calls
    assert ("Cart", "base.Model", "") in refs(p, "inherits")
    assert ("fixture_user", "()@client.login", "") in refs(p, "returns")


def test_tree_sitter_references_and_bindings():
    js = chunker.parse("web/a.ts", 'import x, {a as b} from "./m"; import * as ns from "../n";\n'
                       'const {p, q: r} = require("./s");\nexport * from "./x";\n'
                       "class A extends B.C { f() { this.g(); ns.h(); b(); make().run(); } }\n")
    assert {("web.a", "./m", "x"), ("web.a", "./m#a", "b"), ("web.a", "../n", "ns"),
            ("web.a", "./s#p", "p"), ("web.a", "./s#q", "r"),
            ("web.a", "./x#*", "*")} <= refs(js, "imports")
    assert {"self.g", "ns.h", "b", "?.run"} <= {r for _, r, _ in refs(js, "calls")}
    assert ("A", "B.C", "") in refs(js, "inherits")
    go = chunker.parse("svc/main.go", 'package main\nimport (\n "fmt"\n u "example.com/p/util"\n)\n'
                       "func (g *Greeter) Greet() { fmt.Println(1); g.helper(); u.Do() }\n")
    assert ("svc.main", "example.com/p/util", "u") in refs(go, "imports")
    assert {"fmt.Println", "self.helper", "u.Do"} <= {r for _, r, _ in refs(go, "calls")}
    rs = chunker.parse("src/lib.rs", "use crate::a::b::{C, D as E};\nuse std::io::*;\nmod foo;\n"
                       "impl S { fn f(&self) { Self::make(); C::new(); foo::bar(); } }\n")
    assert {("src.lib", "crate::a::b#C", "C"), ("src.lib", "crate::a::b#D", "E"),
            ("src.lib", "std::io#*", "*"), ("src.lib", "self#foo", "foo")} <= refs(rs, "imports")
    assert {"self::make", "C::new", "foo::bar"} <= {r for _, r, _ in refs(rs, "calls")}
    java = chunker.parse("com/x/App.java", "package com.x;\nimport com.x.util.Helper;\n"
                         "import static com.x.util.Strings.join;\nimport com.x.model.*;\n"
                         "class App extends Base { void run() { start(); this.stop(); "
                         "Helper.help(); join(); } }\n")
    assert {("com.x.App", "com.x.util#Helper", "Helper"),
            ("com.x.App", "com.x.util.Strings#join", "join"),
            ("com.x.App", "com.x.model#*", "*")} <= refs(java, "imports")
    assert {"start", "self.stop", "Helper.help", "join"} <= {r for _, r, _ in refs(java, "calls")}


def test_test_code_is_told_apart_by_where_it_lives_and_how_it_is_named():
    tests = ["tests/test_app.py", "test/util.py", "src/testing/client.py", "pkg/test_x.py",
             "conftest.py", "pkg/store_test.go", "web/app.test.ts", "web/Button.spec.jsx",
             "lib/x.test.mjs"]
    code = ["src/app.py", "src/contest.py", "pkg/latest.py", "pkg/attest.go", "web/app.ts",
            "docs/testing.md.txt", "f12.py"]
    assert [p for p in tests if not chunker.is_test(p)] == []
    assert [p for p in code if chunker.is_test(p)] == []


def test_test_code_is_embedded_cut_at_test_embed_chars():
    """Issue 16 item 5: a test's vector is made of its first ``test_embed_chars`` characters
    (its name as words first), other code of ``embed_chars``; the keyword index keeps both
    whole."""
    body = "def test_cookie_is_secure(client):\n" + "    assert client.get('/x').ok\n" * 30
    settings = IndexSettings(embed_chars=320, test_embed_chars=128)
    as_test = embed_text(settings, "tests/test_cookies.py", "function", "test_cookie_is_secure",
                         body, "", True, "")
    as_code = embed_text(settings, "src/cookies.py", "function", "test_cookie_is_secure", body,
                         "", True, "")
    assert len(as_test) == 128 and as_test.startswith("test cookie is secure\n")
    assert len(as_code) == 320 and as_code.startswith(as_test)


def test_a_re_export_binds_its_names_for_the_modules_importing_it():
    """``export … from`` is a binding, as an import is: a module importing the barrel finds
    the re-exported names through it (docs/index.md, the structural graph)."""
    barrel = chunker.parse("lib/index.ts", 'export { formatName as fmtName, b } from "./helpers";\n'
                           'export * from "./x";\nexport * as ns from "./y";\n'
                           'export { default as Foo } from "./w";\nexport type { T } from "./t";\n')
    assert refs(barrel, "imports") == {
        ("lib.index", "./helpers#formatName", "fmtName"), ("lib.index", "./helpers#b", "b"),
        ("lib.index", "./x#*", "*"), ("lib.index", "./y", "ns"), ("lib.index", "./w", "Foo"),
        ("lib.index", "./t#T", "T")}


def test_rust_calls_in_a_macro_s_tokens():
    """The grammar leaves a macro's arguments as a token tree: an identifier followed by a
    parenthesised group is a call, with the path or receiver written before it."""
    rs = chunker.parse("src/a.rs", "fn t() {\n"
                       "    assert_eq!(area(&s), 1.0);\n"
                       '    println!("{}", Sq::new(2.0).side());\n'
                       "    assert!(self.f(x) && crate::m::g(1) && Self::make(1));\n"
                       "    let v = vec![foo(1); n];\n"
                       '    write!(f, "{}", format!("{}", bar(if (x) {1} else {2})));\n'
                       "    assert!(<T as Tr>::h(1) && x.iter().any(|v| v == 1));\n}\n")
    calls = {r for _, r, _ in refs(rs, "calls")}
    assert {"area", "Sq::new", "?.side", "self.f", "crate::m::g", "self::make", "foo", "bar",
            "format", "?.h", "x.iter", "?.any", "assert_eq", "println"} <= calls
    assert not calls & {"if", "else", "s", "x", "n", "f", "T", "Tr"}


def test_rust_use_in_an_inline_module_starts_from_it():
    """In ``mod tests { use super::*; }`` of shapes.rs, ``super`` is shapes itself (``self``
    from the file); ``self::`` inside it is ``self::tests::``."""
    rs = chunker.parse("m/shapes.rs", "use super::Shape;\npub fn area() -> f64 { 1.0 }\n"
                       "mod tests {\n    use super::*;\n    use self::inner::X;\n"
                       "    use super::super::other::Y;\n"
                       "    mod deeper { use super::super::area as a2; use super::Z; }\n}\n")
    assert refs(rs, "imports") == {
        ("m.shapes", "super#Shape", "Shape"), ("m.shapes", "self#*", "*"),
        ("m.shapes", "self::tests::inner#X", "X"), ("m.shapes", "super::other#Y", "Y"),
        ("m.shapes", "self#area", "a2"), ("m.shapes", "self::tests#Z", "Z")}


def test_a_class_defined_in_a_function_keeps_its_bases_on_the_function():
    py = chunker.parse("tests/test_config.py", "import flask\n\n"
                       "def test_custom_config_class():\n"
                       "    class Config(flask.Config):\n        pass\n"
                       "    def helper():\n        class Deep(Other):\n            pass\n"
                       "    app = flask.Flask(__name__)\n")
    assert [n.qualname for n in py.nodes] == ["tests.test_config", "test_custom_config_class"]
    assert refs(py, "inherits") == {("test_custom_config_class", "flask.Config", ""),
                                    ("test_custom_config_class", "Other", "")}
    js = chunker.parse("a.js", "function f() { class A extends B { m() { g(); } }; "
                       "const C = class extends D.E {}; return new A(); }\n")
    assert refs(js, "inherits") == {("f", "B", ""), ("f", "D.E", "")}


def test_lock_files_and_dot_files_are_config():
    typed = {p: chunker.file_type_of(chunker.language_of(p), p) for p in (
        "uv.lock", "sub/Cargo.lock", "yarn.lock", "go.sum", ".gitignore", "web/.npmrc",
        ".env.example", "package-lock.json", "README.md", "notes.txt", "docs/guide.rst",
        "LICENSE", ".eslintrc.js", "app.py", "dotenv/py.typed")}
    assert typed == {"uv.lock": "config", "sub/Cargo.lock": "config", "yarn.lock": "config",
                     "go.sum": "config", ".gitignore": "config", "web/.npmrc": "config",
                     ".env.example": "config", "package-lock.json": "config",
                     "README.md": "docs", "notes.txt": "docs", "docs/guide.rst": "docs",
                     "LICENSE": "docs", ".eslintrc.js": "code", "app.py": "code",
                     "dotenv/py.typed": "config"}


def test_source_without_a_parser_is_code_and_nothing_else_moves():
    """`.pyx`, `.pxd` (and other source no parser here reads) were `text`, so `docs`: a docs
    query quoted Cython. Prose, settings and parsed code keep their types."""
    def typed(paths):
        return {p: chunker.file_type_of(chunker.language_of(p), p) for p in paths}
    source = ("fast/_speedups.pyx", "fast/_speedups.pxd", "fast/defs.pxi", "lib/x.cxx",
              "lib/x.hh", "lib/x.hxx", "init.lua", "tool.pl", "Lib.pm", "env.zsh", "run.ps1",
              "plot.R", "app.dart", "mix.ex", "mix.exs", "srv.erl", "Main.hs", "a.ml", "a.mli",
              "core.clj", "build.groovy", "m.jl", "main.zig", "App.vue", "App.svelte")
    assert typed(source) == dict.fromkeys(source, "code")
    kept = {"README.md": "docs", "notes.txt": "docs", "docs/guide.rst": "docs",
            "LICENSE": "docs", "CHANGES": "docs", "AUTHORS.in": "docs", ".gitignore": "config",
            "uv.lock": "config", "setup.cfg": "config", "a.json": "config", "app.py": "code",
            "lib.c": "code", "lib.h": "code", "run.sh": "code", "Makefile": "code",
            "tox.ini": "config", "page.html": "code"}
    assert typed(kept) == kept
    whole = chunker.parse("fast/_speedups.pyx", "cdef int add(int a, int b):\n    return a + b\n")
    assert whole.language == "cython" and kinds(whole) == [("file", "fast/_speedups.pyx")]

