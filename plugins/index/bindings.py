"""What an import statement binds, for the tree-sitter languages: ``(ref, alias)`` pairs in
the form ``chunker.Edge`` documents (``module#member``, alias the local name; ``#*`` and
alias ``*`` for a wildcard). The graph resolves them after the build."""

from __future__ import annotations

from collections.abc import Iterator

Binding = tuple[str, str]  # (ref, alias)
_STRINGS = ("string", "interpreted_string_literal", "raw_string_literal")


def _text(node) -> str:
    return node.text.decode("utf-8", "replace") if node is not None else ""


def _string(node) -> str | None:
    """The unquoted text of the first string child (a JS module, a Go import path)."""
    for child in node.named_children:
        if child.type in _STRINGS:
            return _text(child).strip("\"'`")
    return None


def javascript(node) -> Iterator[Binding]:
    """``import …`` and ``export … from`` statements (JS and TS): what each binds (a
    re-export binds its names for the modules that import this one)."""
    source = node.child_by_field_name("source")
    spec = _text(source).strip("\"'`") if source is not None else _string(node)
    if not spec:
        return
    if node.type == "export_statement":
        yield from _reexports(node, spec)
        return
    clause = next((c for c in node.named_children if c.type == "import_clause"), None)
    if clause is None:
        yield spec, ""  # a side-effect import
        return
    for part in clause.named_children:
        if part.type == "identifier":  # the default export
            yield spec, _text(part)
        elif part.type == "namespace_import":
            yield spec, _text(part.named_children[-1])
        elif part.type == "named_imports":
            for item in part.named_children:
                if item.type == "import_specifier":
                    name = _text(item.child_by_field_name("name"))
                    alias = item.child_by_field_name("alias")
                    yield f"{spec}#{name}", _text(alias) if alias is not None else name


def _reexports(node, spec: str) -> Iterator[Binding]:
    """``export {a as b} from "m"`` binds ``b`` to ``m#a`` (``default``: the module, as a
    default import does), ``export * as ns from "m"`` binds ``ns`` to ``m``, ``export * from
    "m"`` is a wildcard: a module importing from this one finds them as its own names."""
    found = False
    for child in node.named_children:
        if child.type == "export_clause":
            for item in child.named_children:
                if item.type != "export_specifier":
                    continue
                name = item.child_by_field_name("name")
                alias = item.child_by_field_name("alias")
                name_text = _text(name) if name is not None else "default"
                bound = _text(alias) if alias is not None else name_text
                found = True
                yield (spec if name_text == "default" else f"{spec}#{name_text}"), bound
        elif child.type == "namespace_export":
            found = True
            yield spec, _text(child.named_children[-1])
    if not found:
        yield (f"{spec}#*", "*") if any(c.type == "*" for c in node.children) else (spec, "")


def require(declarator) -> Iterator[Binding]:
    """``const x = require("m")`` and ``const {a, b: c} = require("m")``."""
    value = declarator.child_by_field_name("value")
    if value is None or value.type != "call_expression":
        return
    if _text(value.child_by_field_name("function")) != "require":
        return
    spec = _string(value.child_by_field_name("arguments"))
    name = declarator.child_by_field_name("name")
    if not spec or name is None:
        return
    if name.type == "identifier":
        yield spec, _text(name)
    elif name.type == "object_pattern":
        for item in name.named_children:
            if item.type == "shorthand_property_identifier_pattern":
                yield f"{spec}#{_text(item)}", _text(item)
            elif item.type == "pair_pattern":
                key, value = item.child_by_field_name("key"), item.child_by_field_name("value")
                if value is not None and value.type == "identifier":
                    yield f"{spec}#{_text(key)}", _text(value)


def go(node) -> Iterator[Binding]:
    """One ``import_spec``: the package path, bound to its alias or its last component."""
    path = _text(node.child_by_field_name("path")).strip("\"`")
    if not path:
        return
    alias = _text(node.child_by_field_name("name"))
    if alias == "_":
        yield path, ""
    elif alias == ".":
        yield f"{path}#*", "*"
    else:
        yield path, alias or path.rsplit("/", 1)[-1]


def _rust_paths(node, prefix: list[str]) -> Iterator[tuple[list[str], str]]:
    kind = node.type
    if kind in ("identifier", "crate", "self", "super", "scoped_identifier"):
        path = prefix + _text(node).split("::")
        yield path, path[-1]
    elif kind == "use_as_clause":
        path = prefix + _text(node.child_by_field_name("path")).split("::")
        yield path, _text(node.child_by_field_name("alias"))
    elif kind == "use_wildcard":
        head = _text(node).rsplit("::", 1)[0] if "::" in _text(node) else ""
        yield prefix + [p for p in head.split("::") if p] + ["*"], "*"
    elif kind == "scoped_use_list":
        path = node.child_by_field_name("path")
        inner = prefix + (_text(path).split("::") if path is not None else [])
        yield from _rust_paths(node.child_by_field_name("list"), inner)
    elif kind == "use_list":
        for child in node.named_children:
            yield from _rust_paths(child, prefix)


def rust(node) -> Iterator[Binding]:
    """``use a::b::{C, D as E}`` and ``mod m;`` (a module declared in its own file)."""
    if node.type == "mod_item":
        name = _text(node.child_by_field_name("name"))
        yield f"self#{name}", name
        return
    argument = node.child_by_field_name("argument")
    if argument is None:
        return
    for path, alias in _rust_paths(argument, []):
        if path[-1] == "self":  # `use a::b::{self}` binds b
            path, alias = path[:-1], path[-2] if len(path) > 1 else alias
        if path:
            yield "::".join(path[:-1]) + "#" + path[-1], "" if alias == "self" else alias


def java(node) -> Iterator[Binding]:
    """``import a.b.C;``, ``import a.b.*;``, ``import static a.b.C.m;``."""
    name = next((c for c in node.named_children
                 if c.type in ("scoped_identifier", "identifier")), None)
    if name is None:
        return
    path = _text(name)
    if any(c.type == "asterisk" for c in node.named_children):
        yield f"{path}#*", "*"
    elif "." in path:
        module, member = path.rsplit(".", 1)
        yield f"{module}#{member}", member


READERS = {"javascript": javascript, "typescript": javascript, "tsx": javascript, "go": go,
           "rust": rust, "java": java}
