"""The bot: python-telegram-bot's Application over one Runtime, for polling and webhooks alike.

One :class:`TelegramBot` owns a python-telegram-bot ``Application`` (its Bot API client, its
update queue, its handlers: a ``MessageHandler`` for new messages, a ``CallbackQueryHandler``
for persona buttons) and hands every update to the lanes of the neutral layer's
:class:`~generic_framework.chats.answering.Answerer`: the updates of one chat run one at a time,
in order, those of different chats side by side. ``generic-framework telegram`` feeds the
Application by long polling (:func:`generic_framework.chats.telegram.polling.poll`); ``serve``
feeds it from Telegram's webhook (:mod:`generic_framework.chats.telegram.webhook`), and then
claims each ``update_id`` in the store first, so an update Telegram delivers to two replicas
is answered once.

Every update is counted (``received``, then ``answered``, ``refused`` or ``failed``) and logged
with a request id of its own (``tg-...``); an exception of a handler is logged (redacted, like
every log line) and counted as ``failed``, and the bot goes on with the next update.
"""

from __future__ import annotations

import logging

from telegram import BotCommand, Update
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from generic_framework.chats.access import Access
from generic_framework.chats.answering import Outcome
from generic_framework.chats.telegram.handlers import PLATFORM, Handlers
from generic_framework.chats.telegram.settings import TelegramSettings
from generic_framework.redaction import redact
from generic_framework.runtime import Runtime
from generic_framework.telemetry.logs import RedactingFilter

__all__ = ["ALLOWED_UPDATES", "TelegramBot", "build_application", "redact_library_logs"]

logger = logging.getLogger("generic_framework.telegram")

ALLOWED_UPDATES = ["message", "callback_query"]
"""The update types the bot asks Telegram for (getUpdates and setWebhook)."""
_LIBRARY_LOGGERS = ("telegram", "httpx", "httpcore")


def redact_library_logs() -> None:
    """Put a :class:`~generic_framework.telemetry.logs.RedactingFilter` on the loggers of
    python-telegram-bot and httpx: every Bot API URL they log carries the token. (The
    handlers of :func:`~generic_framework.telemetry.logs.configure_logging` redact too; this
    also covers a handler an embedding application installed.)"""
    for name in _LIBRARY_LOGGERS:
        log = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in log.filters):
            log.addFilter(RedactingFilter())


def build_application(settings: TelegramSettings, *, polling: bool) -> Application:  # type: ignore[type-arg]
    """python-telegram-bot's Application for ``settings`` (requests to
    ``{TELEGRAM_API_URL}/bot{token}/{method}``); without ``polling`` it has no updater
    (the webhook feeds it)."""
    api = settings.telegram_api_url.rstrip("/")
    builder = (
        ApplicationBuilder()
        .token(settings.token)
        .base_url(f"{api}/bot")
        .base_file_url(f"{api}/file/bot")
        .concurrent_updates(False)  # the lanes order and spread the work; the handler is quick
    )
    if not polling:
        builder = builder.updater(None)
    return builder.build()


class TelegramBot:
    """The bot of one runtime (see the module's docstring).

    Args:
        runtime: the personas, the store (chat states, users, claimed updates), the locks.
        settings: the ``TELEGRAM_*`` settings.
        polling: fed by long polling (else by the webhook, claiming each update).
        offline: answers come from the embedded mock.
    """

    def __init__(
        self,
        runtime: Runtime,
        settings: TelegramSettings,
        *,
        polling: bool,
        offline: bool = False,
    ) -> None:
        self.runtime, self.settings = runtime, settings
        self.claim = not polling
        self.offline = offline
        self.application = build_application(settings, polling=polling)
        self.application.add_handler(CallbackQueryHandler(self._on_update))
        self.application.add_handler(MessageHandler(filters.UpdateType.MESSAGE, self._on_update))
        self.application.add_error_handler(self._on_error)
        self.handlers: Handlers | None = None

    async def start(self) -> None:
        """Initialise the Application (``getMe``: the token is checked) and register the
        commands (``setMyCommands``).

        Raises:
            TelegramError: the Bot API refused the token or could not be reached.
        """
        redact_library_logs()
        await self.application.initialize()
        bot = self.application.bot
        access = Access(self.settings.allowed_users, self.settings.allowed_chats)
        interval = self.settings.telegram_edit_interval
        self.handlers = Handlers(self.runtime, bot, access, interval=interval, offline=self.offline)
        registry = self.handlers.answerer.commands
        commands = [BotCommand(c.name, c.description) for c in registry]
        await self.handlers.delivery.send("setMyCommands", lambda: bot.set_my_commands(commands))
        await self.application.start()
        logger.info("Telegram bot @%s ready", bot.username)
        if access.closed:
            logger.warning(
                "TELEGRAM_ALLOWED_USERS and TELEGRAM_ALLOWED_CHATS are both empty: the bot lets "
                "nobody in. A stranger's reply shows their user id; let them in with "
                "make env TELEGRAM_ALLOWED_USERS=ID (comma-separated; * = anyone), then restart"
            )

    async def stop(self, grace: float) -> None:
        """Finish the updates under way (at most ``grace`` seconds), then stop."""
        if self.application.running:
            await self.application.stop()
        done = True
        if self.handlers is not None:
            done = await self.handlers.answerer.lanes.join(grace)
        if not done:
            logger.warning("stopped with Telegram updates still under way (after %g s)", grace)
        await self.application.shutdown()

    async def feed(self, update: Update) -> None:
        """Hand one update (from the webhook) to the Application's queue."""
        await self.application.update_queue.put(update)

    async def _on_update(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        handlers = self.handlers
        assert handlers is not None
        handlers.answerer.submit(
            _lane(update),
            f"update {update.update_id}",
            lambda: self._process(handlers, update),
            lambda: handlers.apologise(update),
        )

    async def _process(self, handlers: Handlers, update: Update) -> Outcome:
        if self.claim and not await self._claim(update.update_id):
            logger.info("update %d was claimed by another replica", update.update_id)
            return None
        return await handlers.handle(update)

    async def _claim(self, update_id: int) -> bool:
        return await self.runtime.chat_states.claim_update(PLATFORM, update_id)

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        exc = context.error
        logger.error(
            "python-telegram-bot reported an error (%s: %s)",
            type(exc).__name__,
            redact(str(exc)),
        )


def _lane(update: Update) -> str:
    """The key whose updates must keep their order: the chat (and forum topic)."""
    message = update.effective_message
    chat = update.effective_chat
    if message is not None and message.is_topic_message and message.message_thread_id:
        return f"{message.chat.id}:{message.message_thread_id}"
    return str(chat.id) if chat is not None else f"update:{update.update_id}"
