"""Telegram: the personas as a Telegram bot (long polling or webhooks), with live answers and
sources."""
