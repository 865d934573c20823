"""A permission's default roles are role names the configuration knows: ``("admin")`` — the
string "admin", a comma missing — is refused where the Permission is made, and a role no
configuration knows (``"admn"``) stops start-up naming the permission and the known roles,
rather than a route every token is refused."""

from __future__ import annotations

import pytest

from neuralmind import ConfigError, Permission, hookimpl
from kernel.plugins import PluginError
from tests.support import make_kernel

pytestmark = pytest.mark.sqlite_only("refused as the kernel is assembled, before any request")


class Rolly:
    """A plugin registering ``roles`` for its one permission."""

    def __init__(self, roles):
        self.roles = roles

    @hookimpl
    def register_permissions(self, kernel):
        return [Permission("rolly.admin", "Administer rolly", self.roles)]


def test_roles_are_a_tuple_of_role_names():
    with pytest.raises(TypeError) as ex:
        Permission("rolly.admin", "Administer rolly", ("admin"))
    assert str(ex.value) == ("Permission 'rolly.admin': roles must be a tuple of role names, "
                             "not 'admin' (one role needs a comma: ('admin',))")
    with pytest.raises(TypeError, match=r"^Permission 'rolly.admin': roles must be role names, "
                                        r"not \('admin', 1\)$"):
        Permission("rolly.admin", "Administer rolly", ("admin", 1))
    assert Permission("rolly.admin", "Administer rolly", ["builder", "admin"]).roles == (
        "builder", "admin")  # a list is taken, as a tuple


def test_a_plugins_permission_with_a_string_for_roles_stops_start_up_naming_both(tmp_path):
    with pytest.raises(PluginError) as ex:
        make_kernel(tmp_path / "home", plugins=["auth"], extra_plugins=[Rolly("admin")])
    assert str(ex.value) == (
        "plugin 'Rolly' failed in register_permissions: TypeError: Permission 'rolly.admin': "
        "roles must be a tuple of role names, not 'admin' (one role needs a comma: ('admin',))")


def test_a_role_no_configuration_knows_stops_start_up(tmp_path):
    with pytest.raises(ConfigError) as ex:
        make_kernel(tmp_path / "home", plugins=["auth"], extra_plugins=[Rolly(("admn",))])
    assert str(ex.value) == (
        "permission 'rolly.admin' grants unknown role(s) admn; known roles: reader, builder, "
        "admin (the built-in ones and those [auth.roles] defines)")
    # a role [auth.roles] defines is known
    config = tmp_path / "roles.toml"
    config.write_text('[auth.roles]\nadmn = ["rolly.admin", "system.read"]\n')
    kernel = make_kernel(tmp_path / "home2", plugins=["auth"], config=config,
                         extra_plugins=[Rolly(("admn", "admin"))])
    try:
        policy = kernel.state("auth").policy
        assert {role for role, held in policy.grants.items() if "rolly.admin" in held} == {
            "admn", "admin"}
    finally:
        kernel.shutdown()
