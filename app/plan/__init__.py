"""Read-only commands for planning a move to DRA, each printing what to review or apply:
`impact/` (what keys on GPU requests and would stop seeing translated pods), `quota/` (the
DRA-side ResourceQuotas), `deviceclasses/` (a DeviceClass per MIG profile)."""
