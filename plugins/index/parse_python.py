"""Python through the standard ``ast``: classes, functions and methods with qualified
names, signatures and docstrings; imports, calls (by name, best effort) and base classes."""

from __future__ import annotations

import ast

from plugins.index.chunker import Edge, Node, Parsed

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = (ast.If, ast.Try, ast.With, ast.AsyncWith)


def _name(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Subscript):
        return _name(expr.value)
    if isinstance(expr, ast.Call):
        return _name(expr.func)
    return None


def _signature(stmt) -> str:
    prefix = "async def" if isinstance(stmt, ast.AsyncFunctionDef) else "def"
    sig = f"{prefix} {stmt.name}({ast.unparse(stmt.args)})"
    return sig + (f" -> {ast.unparse(stmt.returns)}" if stmt.returns else "")


def _start(stmt) -> int:
    return min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])


def _calls(stmt) -> list[str]:
    seen: dict[str, None] = {}
    for sub in ast.walk(stmt):
        if isinstance(sub, ast.Call):
            name = _name(sub.func)
            if name:
                seen.setdefault(name)
    return list(seen)


def parse_python(source: str, module: str) -> Parsed | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    out = Parsed("python")
    lines = source.count("\n") + 1
    root = out.add(Node("module", module.rsplit(".", 1)[-1], module, 1, lines,
                        docstring=ast.get_docstring(tree) or ""))
    for sub in ast.walk(tree):
        if isinstance(sub, ast.Import):
            out.edges.extend(Edge(root, "imports", a.name) for a in sub.names)
        elif isinstance(sub, ast.ImportFrom):
            base = "." * sub.level + (sub.module or "")
            out.edges.append(Edge(root, "imports", base))

    def visit(body, parent: int, prefix: str, in_class: bool) -> None:
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                bases = [ast.unparse(b) for b in stmt.bases]
                idx = out.add(Node("class", stmt.name, prefix + stmt.name, _start(stmt),
                                   stmt.end_lineno,
                                   signature=f"class {stmt.name}({', '.join(bases)})" if bases
                                   else f"class {stmt.name}",
                                   docstring=ast.get_docstring(stmt) or "", parent=parent))
                out.edges.extend(Edge(idx, "inherits", n) for n in map(_name, stmt.bases) if n)
                visit(stmt.body, idx, prefix + stmt.name + ".", True)
            elif isinstance(stmt, _DEFS):
                idx = out.add(Node("method" if in_class else "function", stmt.name,
                                   prefix + stmt.name, _start(stmt), stmt.end_lineno,
                                   signature=_signature(stmt),
                                   docstring=ast.get_docstring(stmt) or "", parent=parent))
                out.edges.extend(Edge(idx, "calls", n) for n in _calls(stmt))
            elif isinstance(stmt, _BLOCKS):
                inner = list(stmt.body) + list(getattr(stmt, "orelse", ()))
                inner += list(getattr(stmt, "finalbody", ()))
                for handler in getattr(stmt, "handlers", ()):
                    inner += handler.body
                visit(inner, parent, prefix, in_class)

    visit(tree.body, root, "", False)
    return out
