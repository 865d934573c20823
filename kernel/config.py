"""Settings from a TOML file and ``NEURALMIND_*`` environment variables.

The kernel validates its own sections; a plugin validates its own section with
``kernel.settings.section(name, Model)``.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import tomllib
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kernel.errors import error_message

log = logging.getLogger("neuralmind.config")

DEFAULT_PLUGINS = ["auth", "memory", "index", "mcp", "ask", "ui"]
DEFAULT_MAX_BODY = 1024 * 1024


class ConfigError(Exception):
    """A config file or environment value the server cannot start with. Its message is
    :func:`masked`: a refusal quotes what it refuses, and a DSN or URL in it may carry a
    password, printed, then kept in daemon.log or a container's log."""

    def __init__(self, message: str):
        super().__init__(masked(message))


# a URL's user information (``user:password@``, or a key given as the user), and the value of
# a key that names a secret (``?api_key=…``, a DSN's ``password=…``, quoted or not)
_USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]*://)([^\s/?#]*)@", re.I)
_SECRET_VALUE = re.compile(r"\b([\w.-]*(?:pass|pwd|secret|token|key|credential|auth|sig)"
                           r"[\w.-]*=)('(?:[^'\\]|\\.)*'|[^\s&'\"]*)", re.I)


def masked(text: str) -> str:
    """``text`` with what a URL or DSN in it authenticates with shown as ``***``: a
    password in its user information (a user alone, which may be a key, goes whole) and the
    value of a key naming a secret — what is left says where, not with what."""
    def userinfo(match: re.Match) -> str:
        user, colon, _ = match[2].partition(":")
        return f"{match[1]}{user}:***@" if colon else f"{match[1]}***@"
    return _SECRET_VALUE.sub(r"\1***", _USERINFO.sub(userinfo, text))


class ConfigSection(BaseModel):
    """The base of every config section, the kernel's and each plugin's: a key the model does
    not know is a start-up error naming it (a typo never passes silently), and so is true or
    false where a number goes (pydantic reads ``port = true`` as port 1)."""

    model_config = ConfigDict(extra="forbid")
    removed: ClassVar[dict[str, str]] = {}
    """Keys an earlier NeuralMind read, and what does their work now: a config written for it
    is told so, not that the key looks like a typo."""

    @model_validator(mode="before")
    @classmethod
    def _no_removed_key(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in sorted(cls.removed.keys() & data.keys()):
                raise ValueError(f"{key} was removed: {cls.removed[key]}; delete the line")
        return data

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info) -> Any:
        if isinstance(value, bool) and cls.model_fields[info.field_name].annotation in (
                int, float, int | None, float | None):
            raise ValueError("a number, not true or false")
        return value


def _no_nul(value: str | None) -> str | None:
    """A path from the config or the environment: one with a NUL byte names no file (the OS
    would refuse it with a ValueError far from here)."""
    if value is not None and "\0" in value:
        raise ValueError("a path cannot contain a NUL byte")
    if value is not None and not value.strip():
        raise ValueError("an empty path names no folder: leave the key out for the default")
    return value


class KernelSection(ConfigSection):
    plugins: list[str] = Field(default_factory=lambda: list(DEFAULT_PLUGINS))
    home: str | None = None
    state_dir: str | None = None  # per-project state outside the repositories
    max_body_bytes: int = Field(DEFAULT_MAX_BODY, gt=0)
    sse_heartbeat_s: float = Field(5.0, gt=0)
    # how long the log keeps an event and the jobs table a finished job (0: for ever)
    keep_events_days: int = Field(90, ge=0)
    keep_jobs_days: int = Field(30, ge=0)

    _paths = field_validator("home", "state_dir")(_no_nul)


class ServerSection(ConfigSection):
    allow_remote: bool = False
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    public_hosts: list[str] = Field(default_factory=list)
    workers: int = Field(2, ge=1, le=64)
    threads: int = Field(4, ge=1, le=256)
    tokens_file: str | None = None
    insecure_http: bool = False
    tls_cert: str | None = None
    tls_key: str | None = None
    allow_origins: list[str] = Field(default_factory=list)

    _paths = field_validator("tokens_file", "tls_cert", "tls_key")(_no_nul)


class EmbeddingsSection(ConfigSection):
    model_dir: str | None = None
    threads: int | None = Field(None, ge=1, le=64)
    warm: bool = True  # load the model in the background after start-up
    # "int8": matrix products in int8 (derived once from the model, kernel/int8model.py);
    # "float": the model file as it is. Vectors of the two differ slightly (another model_id).
    compute: Literal["int8", "float"] = "int8"
    # the vectors of this many recent distinct texts are kept per process (~1.5 KB each)
    remember: int = Field(4096, ge=0, le=1_000_000)

    _paths = field_validator("model_dir")(_no_nul)


class StorageSection(ConfigSection):
    """Where shared state lives: SQLite files under the home (one machine), or one PostgreSQL
    database that several servers share (docs/operations.md, "Scaling out")."""

    backend: Literal["sqlite", "postgres"] = "sqlite"
    dsn: str | None = Field(None, description="postgresql://user:password@host:5432/db")
    pool_size: int = Field(8, ge=1, le=256, description="connections per worker")

    @model_validator(mode="after")
    def _dsn_for_postgres(self) -> StorageSection:
        if self.dsn and "backend" not in self.model_fields_set:
            self.backend = "postgres"  # a database named is the database used (as the env var)
        if self.backend == "postgres" and not self.dsn:
            raise ValueError('backend = "postgres" needs dsn (or NEURALMIND_DATABASE_URL)')
        return self


class ProjectAlias(ConfigSection):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    path: str

    @field_validator("path")
    @classmethod
    def _expand(cls, v: str) -> str:
        return os.path.expanduser(_no_nul(v))


class Settings(BaseModel):
    """The whole configuration; plugins' sections stay available to them through ``raw``.

    Precedence, the same for every setting: the command line's flags, then ``NEURALMIND_*``
    environment variables, then the config file, then the defaults."""

    model_config = ConfigDict(extra="ignore")

    kernel: KernelSection = Field(default_factory=KernelSection)
    server: ServerSection = Field(default_factory=ServerSection)
    embeddings: EmbeddingsSection = Field(default_factory=EmbeddingsSection)
    storage: StorageSection = Field(default_factory=StorageSection)
    projects: list[ProjectAlias] = Field(default_factory=list)
    raw: dict[str, Any] = Field(default_factory=dict, exclude=True)
    source: str | None = None

    @property
    def home(self) -> Path:
        """The state home: kernel.db, the token, daemon.json, audit.db."""
        return Path(self.kernel.home or Path.home() / ".neuralmind").expanduser()

    @property
    def server_mode(self) -> bool:
        return self.server.allow_remote

    def misplaced_state(self) -> str | None:
        """Why the home or the state root cannot hold state — a file is where it, or a folder
        above it, goes — or None: each worker would otherwise fail on its own, or answer
        500s."""
        roots = (("[kernel] home", self.home), ("[kernel] state_dir", self.kernel.state_dir
                                                and Path(self.kernel.state_dir).expanduser()))
        for key, path in roots:
            if path and file_in_the_way(path):
                return f"{key} {path} is not a directory (a file is in its place)"
        return None

    def section(self, name: str, model: type[BaseModel]) -> BaseModel:
        """Validate a plugin's ``[name]`` section (dotted names reach nested tables)."""
        data: Any = self.raw
        for part in name.split("."):
            data = data.get(part, {}) if isinstance(data, dict) else {}
        try:
            return model.model_validate(data or {})
        except ValidationError as ex:
            raise ConfigError(f"[{name}] in {self.source or 'config'}: {problems(ex)}") from None

    def check_sections(self, pm) -> None:
        """Validate every section the plugins of ``pm`` declare (``config_sections``): what a
        server does before it forks, so a bad value is a line of its own, not each worker's
        traceback. One error names every bad section."""
        from kernel.plugins import PluginError, each  # the plugins' module imports this one
        bad = []
        for owner, declared in each(pm, "config_sections"):
            if declared is not None and not isinstance(declared, dict):
                raise PluginError(f"plugin {owner!r} config_sections must return {{section: "
                                  f"model}}, not {type(declared).__name__}")
            for name, model in (declared or {}).items():
                if not (isinstance(model, type) and issubclass(model, BaseModel)):
                    raise PluginError(f"plugin {owner!r} config_sections: [{name}] maps to "
                                      f"{model!r:.60}, not a pydantic model")
                try:
                    self.section(name, model)
                except ConfigError as ex:
                    bad.append(str(ex))
        sections, failed = _installed_sections(pm)
        known = {*Settings.model_fields, *sections} - {"raw", "source"}
        where = self.source or "config"
        for name in self.raw.keys() - known:
            if name in failed:
                bad.append(f"[{name}] in {where} belongs to no plugin that loads: plugin "
                           f"{name!r} is installed but fails to load (the warning above says why)")
                continue
            near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
            bad.append(f"[{name}] in {where} is no section of NeuralMind or of an installed "
                       "plugin" + (f": did you mean [{near[0]}]?" if near else "")
                       + (f" (the sections of {', '.join(failed)}, installed but failing to "
                          "load, are unknown)" if failed and not near else ""))
        if bad:
            raise ConfigError("\n".join(sorted(bad)))


def file_in_the_way(folder: Path) -> Path | None:
    """The file that stands where ``folder``, or a folder above it, goes — no directory can
    be made there — or None."""
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    return None if existing.is_dir() else existing


def _installed_sections(enabled) -> tuple[set[str], list[str]]:
    """The top-level sections the plugins of ``enabled`` (a plugin manager) read, and those of
    every other installed plugin: a disabled plugin's section may stay in a config, a misspelt
    one may not. With them, the disabled plugins that do not load or whose
    ``config_sections`` fails: a warning naming each, never a stop — nothing of them runs."""
    from kernel.plugins import PluginError, StartupError, available, each, make_plugin_manager
    sections = _section_names(each(enabled, "config_sections"))
    failed = []
    for name in available():
        if enabled.get_plugin(name) is None:
            try:
                sections |= _section_names(each(make_plugin_manager([name]), "config_sections"))
            except (ConfigError, PluginError, StartupError) as ex:
                log.warning("%s (not enabled, so left out)", ex)
                failed.append(name)
    return sections, failed


def _section_names(answers) -> set[str]:
    return {name.split(".")[0] for _, declared in answers if isinstance(declared, dict)
            for name in declared}


def problems(ex: ValidationError, origins: dict[tuple[str, str], str] | None = None) -> str:
    """pydantic's errors, one ``key: message (got value)`` each, without its links; a key set
    by a variable or a flag names it (``origins``), so the file is not blamed for it."""
    out = []
    for error in ex.errors():
        key = ".".join(str(part) for part in error["loc"])
        where = (origins or {}).get(tuple(map(str, error["loc"][:2])))
        if where:
            key += f" (from {where})"
        got = (f" (got {masked(_as_written(error['input'])):.60})"  # masked, then cut
               if key and error["type"] != "missing" else "")
        out.append(f"{key}: {error_message(error)}{got}" if key else error_message(error))
    return "; ".join(out)


def _as_written(value: Any) -> str:
    """A config value as TOML writes it (``true``, ``"x"``, ``[1, 2]``), not as Python
    shows it (``True``, ``'x'``)."""
    return json.dumps(value, ensure_ascii=False, default=str)


# NEURALMIND_* variables that set one key as they are, read as the config's value would be
# (a number, or true/false as 1/0, true/false, yes/no, on/off in any case), or refused so
ENV_KEYS = {"NEURALMIND_HOME": ("kernel", "home"),
            "NEURALMIND_API_MAX_BODY_BYTES": ("kernel", "max_body_bytes"),
            "NEURALMIND_STATE_DIR": ("kernel", "state_dir"),
            "NEURALMIND_MODEL_DIR": ("embeddings", "model_dir"),
            "NEURALMIND_EMBEDDINGS_WARM": ("embeddings", "warm")}


def _env_overrides(data: dict[str, Any]) -> dict[tuple[str, str], str]:
    """Apply the ``NEURALMIND_*`` variables to ``data``; ``{(section, key): variable}`` for
    the keys they set."""
    env, origins = os.environ, {}
    data.setdefault("kernel", {})

    def put(section: str, key: str, value: Any, origin: str) -> None:
        data.setdefault(section, {})[key] = value
        origins[(section, key)] = origin

    for name, (section, key) in ENV_KEYS.items():
        if env.get(name):
            put(section, key, env[name], name)
    if env.get("NEURALMIND_PLUGINS") is not None:
        put("kernel", "plugins", [p.strip() for p in env["NEURALMIND_PLUGINS"].split(",")
                                  if p.strip()], "NEURALMIND_PLUGINS")
    if env.get("NEURALMIND_DATABASE_URL"):  # a database named is the database used
        put("storage", "backend", "postgres", "NEURALMIND_DATABASE_URL")
        put("storage", "dsn", env["NEURALMIND_DATABASE_URL"], "NEURALMIND_DATABASE_URL")
    if env.get("NEURALMIND_SERVER_OVERRIDES"):  # set by `neuralmind serve` for its workers
        for key, value in json.loads(env["NEURALMIND_SERVER_OVERRIDES"]).items():
            if value is not None:
                put("server", key, value, "the command line")
    return origins


def _from_the_configs_folder(data: dict[str, Any], path: str | os.PathLike) -> None:
    """``[kernel] home`` and ``state_dir`` written relative in a config file are taken from
    the file's folder: every command, run from any folder, must find the one home and its
    daemon — taken from each command's folder, an agent's ``neuralmind mcp`` started in each
    repository made a daemon there, its token in the working tree."""
    kernel = data.get("kernel")
    if not isinstance(kernel, dict):
        return
    for key in ("home", "state_dir"):
        value = kernel.get(key)
        if isinstance(value, str) and value.strip() and "\0" not in value \
                and not os.path.isabs(os.path.expanduser(value)):
            kernel[key] = os.path.join(os.path.dirname(os.path.abspath(path)), value)


def load_settings(path: str | os.PathLike | None = None, **overrides: Any) -> Settings:
    """Read ``path`` (or ``$NEURALMIND_CONFIG``), apply the environment, then ``overrides``
    (``{"server": {"port": 1}}``-shaped, as the CLI's flags give them)."""
    path = path or os.environ.get("NEURALMIND_CONFIG")
    data: dict[str, Any] = {}
    if path:
        try:
            with open(path, "rb") as fh:
                text = fh.read().decode("utf-8")
            # TOML allows a leading byte-order mark (toml-lang/toml#437; editors on Windows
            # write one), which tomllib refuses as "Invalid statement": it is skipped
            data = tomllib.loads(text.removeprefix("\ufeff"))
        except OSError as ex:
            raise ConfigError(f"cannot read config {path}: {ex.strerror}") from None
        except tomllib.TOMLDecodeError as ex:
            raise ConfigError(f"config {path} is not valid TOML: {ex}") from None
        except UnicodeDecodeError as ex:
            raise ConfigError(f"config {path} is not valid TOML: not UTF-8 (byte "
                              f"{ex.start})") from None
    if path:
        _from_the_configs_folder(data, path)
    origins = _env_overrides(data)
    for section, values in overrides.items():
        if isinstance(values, dict):
            given = {k: v for k, v in values.items() if v is not None}
            data.setdefault(section, {}).update(given)
            origins.update({(section, k): "the command line" for k in given})
        else:
            data[section] = values
    try:
        settings = Settings.model_validate(data)
    except ValidationError as ex:
        raise ConfigError(f"invalid config {path or '(defaults)'}: {problems(ex, origins)}"
                          ) from None
    settings.raw = data
    settings.source = str(path) if path else None
    return settings
