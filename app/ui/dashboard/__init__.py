"""The dashboard page: live memory, KV accounting, and the measured KV mode comparison."""
