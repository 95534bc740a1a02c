"""Chat platforms: the personas reached from chat apps (Telegram first), each a thin edge over
one Runtime."""
