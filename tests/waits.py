"""How long a test waits for an event before it calls the event missing.

A test waits for the signal or message that matters and goes on the moment it comes; the
ceiling only ends a test whose event never comes (a hang), so it is set for a busy 2-core
machine with other work running, never near how long the event takes. pytest's own timeout
(pyproject.toml) stops the whole test later still.
"""

HANG_GUARD_MS = 120_000
HANG_GUARD_S = HANG_GUARD_MS / 1000
# A real engine's event can come after a model load and a whole reply on that busy machine.
ENGINE_HANG_GUARD_S = 300.0
