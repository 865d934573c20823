"""Plugins: the third-party example package through entry points, enable/disable, start-up
errors, and secure-by-default with no authenticating plugin."""

import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from kernel.api import operation
from kernel.app import Kernel, StartupError
from kernel.config import load_settings
from kernel import __version__
from kernel.models import Model
from kernel.plugins import PluginError, hookimpl, make_plugin_manager
from tests.support import EXAMPLE, ROOT, Server, plugin_site, run_cli


def test_example_plugin_route_is_served_documented_and_guarded(kapp):
    assert kapp.get("/v1/hello", auth=False).status == 401
    r = kapp.get("/v1/hello")
    assert r.status == 200 and r.json["message"] == "hello" and r.json["actor"] == "local"
    doc = kapp.get("/v1/openapi.json", auth=False).json
    assert doc["paths"]["/v1/hello"]["get"]["x-permission"] == "hello.read"


def test_example_plugin_comes_from_its_entry_point_not_an_install(kapp, tmp_path_factory):
    from importlib.metadata import entry_points

    import neuralmind_example
    [ep] = [ep for ep in entry_points(group="neuralmind", name="example")
            if Path(ep.dist.locate_file("")).is_relative_to(tmp_path_factory.getbasetemp())]
    assert ep.value == "neuralmind_example.plugin"
    assert Path(neuralmind_example.__file__).is_relative_to(EXAMPLE)  # the fixture's source


def test_example_plugin_absent_when_not_enabled(make_server, example_plugin):
    server = make_server(plugins=["auth"])
    assert server.get("/v1/hello").status == 404
    assert "/v1/hello" not in server.get("/v1/openapi.json").json["paths"]


def test_plugins_enabled_from_config_file(make_server, example_plugin, monkeypatch):
    config = '[kernel]\nplugins = ["auth", "example"]\n'
    assert make_server(plugins=None, config=config).get("/v1/hello").status == 200
    monkeypatch.setenv("NEURALMIND_PLUGINS", "auth")
    assert make_server(plugins=None, config=config).get("/v1/hello").status == 404  # env wins


def test_no_authenticating_plugin_means_401_everywhere(make_server, example_plugin):
    server = make_server(plugins=["example"])
    for path in ("/v1/hello", "/v1/projects", "/v1/jobs"):
        assert server.get(path, token="anything").status == 401
    assert server.get("/v1/health", auth=False).status == 200
    assert server.get("/v1/openapi.json", auth=False).status == 200


@pytest.mark.sqlite_only("a start-up refusal, before any storage opens")
def test_unknown_plugin_is_a_clear_startup_error(tmp_path):
    server = Server(tmp_path / "h", plugins=["auth", "nosuch"])
    with pytest.raises(RuntimeError) as ex:
        server.start(timeout=30)
    assert "unknown plugin 'nosuch'" in str(ex.value)


def test_broken_plugin_names_itself(tmp_path):
    pkg = tmp_path / "brokenplug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('missing thing')\n")
    with pytest.raises(PluginError, match="failed to load: ImportError: missing thing"):
        from kernel.plugins import _load
        sys.path.insert(0, str(tmp_path))
        try:
            _load("brokenplug", {"brokenplug": "brokenplug"})
        finally:
            sys.path.remove(str(tmp_path))


def test_misspelled_hook_fails_check_pending():
    plugin = types.ModuleType("typo")

    @hookimpl
    def register_route(kernel):  # missing "s"
        return []

    plugin.register_route = register_route
    with pytest.raises(PluginError, match="register_route"):
        make_plugin_manager([], extra=[plugin], load_entrypoints=False)


class _NoOperation:
    def on_get(self, req, resp):
        pass


class _UnknownPermission:
    @operation(permission="nothing.here")
    def on_get(self, req, resp):
        pass


@pytest.mark.parametrize("resource,message", [(_NoOperation, "has no @operation"),
                                              (_UnknownPermission, "unknown permission")])
def test_routes_must_declare_a_known_operation(tmp_path, monkeypatch, resource, message):
    monkeypatch.setenv("NEURALMIND_HOME", str(tmp_path))
    plugin = types.SimpleNamespace(register_routes=hookimpl(lambda kernel: [("/v1/x", resource())]))
    with pytest.raises(StartupError, match=message):
        Kernel(load_settings(), plugins=[], extra_plugins=[plugin], load_entrypoints=False)


def test_a_hook_that_does_not_exist_is_named_with_its_plugin():
    plugin = types.ModuleType("ext_typo")
    plugin.check_pending = hookimpl(lambda kernel: None)
    with pytest.raises(PluginError) as bad:
        make_plugin_manager([], extra=[plugin])
    assert str(bad.value) == ("plugin 'ext_typo' implements a hook that does not exist (unknown "
                              "hook 'check_pending'; kernel/hookspecs.py lists them)")

    class Typo:
        @hookimpl
        def strtup(self, kernel):
            pass

    with pytest.raises(PluginError, match=r"^plugin 'Typo' implements a hook that does not"):
        make_plugin_manager([], extra=[Typo()])


def test_a_plugin_whose_startup_raises_stops_start_up_with_its_name(tmp_path):
    plugin = types.ModuleType("ext_store")

    def startup(kernel):
        raise RuntimeError("cannot open my store")

    plugin.startup = hookimpl(startup)
    ran = []

    class Around:  # a wrapper still wraps (the hook is called as pluggy calls it)
        @hookimpl(wrapper=True)
        def startup(self, kernel):
            ran.append("before")
            try:
                return (yield)
            finally:
                ran.append("after")

    settings = load_settings(None, kernel={"home": str(tmp_path)}, embeddings={"warm": False})
    with pytest.raises(StartupError) as stopped:
        Kernel(settings, plugins=[], extra_plugins=[plugin, Around()], load_entrypoints=False)
    assert str(stopped.value) == ("plugin 'ext_store' did not start: RuntimeError: cannot open "
                                  "my store")
    assert ran == ["before", "after"]

    class Exploding:  # an object registered without a name is named by its class
        @hookimpl
        def startup(self, kernel):
            raise OSError("no disk")

    with pytest.raises(StartupError, match=r"^plugin 'Exploding' did not start: OSError: no disk$"):
        Kernel(settings, plugins=[], extra_plugins=[Exploding()], load_entrypoints=False)


def test_cli_lists_plugin_failures_without_a_traceback(tmp_path):
    env = {"NEURALMIND_HOME": str(tmp_path), "NEURALMIND_PLUGINS": "auth,nosuch", "PATH": ""}
    proc = subprocess.run([sys.executable, "-m", "neuralmind.cli", "openapi"], cwd=ROOT,
                          env=env, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "unknown plugin 'nosuch'" in proc.stderr


def test_two_plugins_serving_one_route_stop_start_up(tmp_path):
    """Falcon would let the second resource at a template replace the first in silence."""
    class Twice:
        @hookimpl
        def register_routes(self, kernel):
            class Resource:
                @operation(permission=None)
                def on_get(self, req, resp, project_id):
                    return {"answer": 1}
            return [("/v1/projects/{project_id}/twice", Resource())]

    settings = load_settings(None, kernel={"home": str(tmp_path)}, embeddings={"warm": False})
    with pytest.raises(StartupError, match=r"/v1/projects/\{project_id\}/twice is already served "
                                           r"by plugin 'Twice' \(each route"):
        Kernel(settings, plugins=[], extra_plugins=[Twice(), Twice()], load_entrypoints=False)


def _kernel_with(tmp_path, *plugins):
    settings = load_settings(None, kernel={"home": str(tmp_path)}, embeddings={"warm": False})
    return Kernel(settings, plugins=[], extra_plugins=list(plugins), load_entrypoints=False)


def _plugin(name: str, **hooks):
    plugin = types.ModuleType(name)
    for hook, fn in hooks.items():
        setattr(plugin, hook, hookimpl(fn))
    return plugin


def test_a_hook_with_an_argument_its_spec_lacks_is_named_with_its_plugin():
    def register_routes(kernel, app):
        return []

    with pytest.raises(PluginError) as bad:
        make_plugin_manager([], extra=[_plugin("wrongarg", register_routes=register_routes)])
    assert str(bad.value).startswith("plugin 'wrongarg' does not fit kernel/hookspecs.py: "
                                     "hookimpl definition: register_routes(kernel, app); ")
    assert "{'app'}" in str(bad.value)


class _Hello:
    @operation(permission=None)
    def on_get(self, req, resp):
        return {"hello": 1}


class _Plain:  # not a model: pydantic can neither validate nor publish it
    pass


class _Hooked(Model):
    name: str
    hook: Callable | None = None  # validates, but has no JSON Schema


def _declared(**declaration):
    """A resource whose one responder carries ``declaration``."""
    class Declared:
        @operation(permission=None, **declaration)
        def on_post(self, req, resp):
            return None
    return Declared()


class _Stamp:
    def process_response(self, req, resp, resource, req_succeeded):
        resp.set_header("X-Stamp", "1")


@pytest.mark.parametrize("hooks,error,message", [
    ({"register_routes": lambda kernel: 1 / 0}, PluginError,
     "plugin 'ext' failed in register_routes: ZeroDivisionError: division by zero"),
    ({"register_routes": lambda kernel: ("/v1/hello", _Hello())}, StartupError,
     "plugin 'ext' register_routes: '/v1/hello' is not (uri, resource[, suffix]); it returns a "
     "list of them"),
    ({"register_routes": lambda kernel: {"/v1/hello": _Hello()}}, StartupError,
     "plugin 'ext' register_routes must return a list of (uri, resource[, suffix]), not dict"),
    ({"register_routes": lambda kernel: [("v1/hello", _Hello())]}, StartupError,
     "plugin 'ext': uri_template must start with '/'"),
    ({"register_routes": lambda kernel: [("/v1/health", _Hello())]}, StartupError,
     "plugin 'ext': _Hello at /v1/health: /v1/health is already served by the kernel"),
    ({"register_routes": lambda kernel: [("/v1/x", _declared(response=_Hooked))]}, StartupError,
     "plugin 'ext': Declared.on_post (/v1/x): response=_Hooked has no JSON Schema, so the "
     "OpenAPI document cannot publish it: field 'hook' (Cannot generate a JsonSchema for "
     "core_schema.CallableSchema)"),
    ({"register_routes": lambda kernel: [("/v1/x", _declared(responses={202: _Hooked}))]},
     StartupError, "plugin 'ext': Declared.on_post (/v1/x): responses[202]=_Hooked has no JSON "),
    ({"register_routes": lambda kernel: [("/v1/x", _declared(body=dict))]}, StartupError,
     "plugin 'ext': Declared.on_post (/v1/x): body=dict is not a pydantic model (a "
     "neuralmind.Model subclass)"),
    ({"register_routes": lambda kernel: [("/v1/x", _declared(query=dict))]}, StartupError,
     "plugin 'ext': Declared.on_post (/v1/x): query=dict is not a pydantic model"),
    ({"register_routes": lambda kernel: [("/v1/x", _declared(response=_Plain))]}, StartupError,
     "plugin 'ext': Declared.on_post (/v1/x): response=_Plain is not a type pydantic can "
     "validate (Unable to generate pydantic-core schema for <class "
     "'tests.kernel.test_plugins._Plain'>)"),
    ({"register_permissions": lambda kernel: ["ext.read"]}, StartupError,
     "plugin 'ext' register_permissions: 'ext.read' is not a Permission"),
    ({"register_middleware": lambda kernel: object()}, StartupError,
     "plugin 'ext' register_middleware must return a list of middleware objects, not object"),
    ({"register_middleware": lambda kernel: ["not a middleware"]}, StartupError,
     "plugin 'ext' register_middleware: 'not a middleware' is not a middleware object (an "
     "instance with process_request, process_resource, process_response)"),
    ({"register_middleware": lambda kernel: [_Stamp]}, StartupError,  # the class, not one
     "plugin 'ext' register_middleware: <class 'tests.kernel.test_plugins._Stamp'> is not a "),
])
def test_what_a_plugin_hands_the_kernel_is_checked_and_named(tmp_path, hooks, error, message):
    with pytest.raises(error) as bad:
        _kernel_with(tmp_path, _plugin("ext", **hooks))
    assert str(bad.value).startswith(message)


def test_a_hook_the_kernel_calls_plugin_by_plugin_cannot_be_wrapped(tmp_path):
    """``shutdown``, ``describe_project``, ``track_event``, ``forget_project``: each plugin's
    is called on its own, so one that fails is left out; a wrapper would never run."""
    class Around:
        @hookimpl(wrapper=True)
        def describe_project(self, kernel, project):
            return (yield)

    with pytest.raises(PluginError, match=r"^plugin 'Around' wraps describe_project, which the "
                                          r"kernel calls plugin by plugin"):
        _kernel_with(tmp_path, Around())


def test_a_permission_registered_twice_names_both_owners(tmp_path):
    from kernel.auth import Permission
    perm = lambda kernel: [Permission("dup.read", "read")]  # noqa: E731
    with pytest.raises(StartupError, match=r"^permission 'dup\.read' is registered twice \(by "
                                           r"(one and two|two and one)\)$"):
        _kernel_with(tmp_path, _plugin("one", register_permissions=perm),
                     _plugin("two", register_permissions=perm))
    with pytest.raises(StartupError, match=r"'projects\.read' is registered twice \(by kernel "
                                           r"and mine\)"):
        _kernel_with(tmp_path, _plugin("mine", register_permissions=lambda kernel: [
            Permission("projects.read", "again")]))


def test_config_sections_must_map_names_to_models(tmp_path):
    for answer, says in [({"ext": dict}, "plugin 'ext' config_sections: [ext] maps to <class "
                                         "'dict'>, not a pydantic model"),
                         (["ext"], "plugin 'ext' config_sections must return {section: "
                                   "model}, not list")]:
        pm = make_plugin_manager([], extra=[_plugin("ext", config_sections=lambda a=answer: a)],
                                 load_entrypoints=False)
        with pytest.raises(PluginError) as bad:
            load_settings(None, kernel={"home": str(tmp_path)}).check_sections(pm)
        assert str(bad.value) == says


def test_operation_refuses_errors_and_headers_of_the_wrong_shape():
    with pytest.raises(TypeError, match=r"^@operation errors: 409: <class 'dict'> is not an "):
        operation(permission=None, errors={409: dict})
    with pytest.raises(TypeError, match=r"^@operation errors: '409': "):
        operation(permission=None, errors={"409": "`x`: why"})
    with pytest.raises(TypeError, match=r"^@operation headers: \('X-Rich', 'read'\) is not \("
                                        r"name, description, required\[, values\]\)$"):
        operation(permission=None, headers=[("X-Rich", "read")])
    assert operation(permission=None, errors={409: "`x`: why"},
                     headers=[("X-Rich", "read", False, ("a", "b"))]) is not None


def test_a_plugin_whose_commands_fail_leaves_out_only_its_own(tmp_path, monkeypatch):
    site = plugin_site(tmp_path / "site", "neuralmind-cliboom", {"cliboom": "cliboom"})
    (site / "cliboom.py").write_text(
        "from neuralmind import hookimpl\n\n\n@hookimpl\ndef register_commands(kernel, "
        "subparsers):\n    subparsers.add_parser('job')  # the kernel's: argparse refuses\n")
    monkeypatch.syspath_prepend(str(site))
    env = {"NEURALMIND_HOME": str(tmp_path / "home"), "NEURALMIND_PLUGINS": "auth,cliboom"}
    code, out, err = run_cli("--version", env=env)
    assert (code, out) == (0, f"neuralmind {__version__}\n")
    assert err == ("neuralmind: plugin 'cliboom' adds no commands: ArgumentError: argument "
                   "command: conflicting subparser: job\n")
