"""Hooks of the ask plugin: ``POST /v1/projects/{id}/ask`` answers a question from the
project's memories and code with numbered citations. Sources come through the app's own
routes as the asker; answers come from the ``answer_provider`` hook — this plugin's own,
asked last, is an OpenAI-compatible endpoint when ``[ask] base_url`` is set, else the
LLM-free extractive answer (so nothing leaves the machine unless the operator says so)."""

from __future__ import annotations

from neuralmind import ROLES, EventKind, Permission, hookimpl


class State:
    """One kernel's ``[ask]`` settings and its built-in provider."""

    def __init__(self, kernel):
        from plugins.ask.models import AskSettings
        self.settings = kernel.settings.section("ask", AskSettings)
        self.event_text = (self.settings.event_text if self.settings.event_text is not None
                           else not kernel.settings.server_mode)
        if self.settings.base_url:
            from plugins.ask.openai_compat import OpenAICompatible
            self.provider = OpenAICompatible(self.settings)
        else:
            from plugins.ask.extractive import Extractive
            self.provider = Extractive(lambda texts: kernel.embedder.embed(texts))


def _state(kernel) -> State:
    return kernel.state("ask", lambda: State(kernel))


@hookimpl
def register_event_kinds(kernel):
    return [EventKind("ask.answered", "a question was answered, with the sources cited")]


@hookimpl
def register_permissions(kernel):
    return [Permission("ask.read", "Ask questions answered from a project's memories and code "
                       "(each source still needs its own read permission)", ROLES)]


@hookimpl
def register_routes(kernel):
    from plugins.ask.resources import AskResource
    return [("/v1/projects/{project_id}/ask", AskResource(kernel, _state(kernel)))]


@hookimpl
def startup(kernel):
    _state(kernel)  # a bad [ask] section fails start-up, not the first question


@hookimpl
def shutdown(kernel):
    kernel.drop_state("ask")


@hookimpl(trylast=True)
def answer_provider(kernel, project):
    return _state(kernel).provider


@hookimpl
def register_commands(kernel, subparsers):
    from plugins.ask.commands import add_commands
    add_commands(subparsers)


@hookimpl
def config_sections():
    from plugins.ask.models import AskSettings
    return {"ask": AskSettings}
