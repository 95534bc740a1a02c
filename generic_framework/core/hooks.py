"""TurnHooks: where later work attaches to a turn's life: its start, each model call, each tool
call, its end.

A turn's :class:`~generic_framework.core.observe.TurnWatch` fires them as the loop reports, so a
hook sees the same :class:`~generic_framework.core.account.TurnAccount` as the metrics, the
reply and the stored record. Every method is a no-op here: subclass and override what you need.
They are plain calls, made inside the turn (a model call's hook runs before the next round
starts): a hook that has I/O to do keeps what it needs and does it after the turn, as the turn
service does with a turn's tokens (:mod:`generic_framework.turns`).

:meth:`on_end` is called exactly once for every turn that began, whatever its end: an answer
(``outcome`` = the reply's stop reason), an error (``error``) or an abandoned turn
(``cancelled``: the caller closed the stream, the client went away, the task was cancelled).
"""

from __future__ import annotations

from collections.abc import Sequence

from generic_framework.core.account import TurnAccount
from generic_framework.core.reply import ToolResult
from generic_framework.wire.messages import ChatCompletion, ToolCall

__all__ = ["HookChain", "TurnHooks"]


class TurnHooks:
    """A turn's lifecycle hooks (no-op defaults; see the module's docstring).

    Every method receives the turn's :class:`TurnAccount`, as it stands at that moment.
    """

    def on_start(self, persona: str, account: TurnAccount) -> None:
        """The turn of ``persona`` holds its conversation (or needs none) and begins."""

    def on_model_call(self, account: TurnAccount, completion: ChatCompletion) -> None:
        """A model call answered (its tokens already counted in ``account``)."""

    def on_tool_call(self, account: TurnAccount, call: ToolCall, result: ToolResult) -> None:
        """A tool call of a recorded round ended (counted in ``account``)."""

    def on_end(self, account: TurnAccount, outcome: str) -> None:
        """The turn ended: ``outcome`` is the reply's stop reason, ``error`` or ``cancelled``."""


class HookChain(TurnHooks):
    """Several hooks as one, called in order."""

    __slots__ = ("hooks",)

    def __init__(self, hooks: Sequence[TurnHooks]) -> None:
        self.hooks = tuple(hooks)

    def on_start(self, persona: str, account: TurnAccount) -> None:
        for hook in self.hooks:
            hook.on_start(persona, account)

    def on_model_call(self, account: TurnAccount, completion: ChatCompletion) -> None:
        for hook in self.hooks:
            hook.on_model_call(account, completion)

    def on_tool_call(self, account: TurnAccount, call: ToolCall, result: ToolResult) -> None:
        for hook in self.hooks:
            hook.on_tool_call(account, call, result)

    def on_end(self, account: TurnAccount, outcome: str) -> None:
        for hook in self.hooks:
            hook.on_end(account, outcome)
