"""Discord: the personas as a Discord bot (discord.py over the gateway), on the neutral chat
layer."""
