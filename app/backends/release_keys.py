"""The public keys whose signatures the app accepts on a backend package, one line each:
`ed25519 <base64 of the 32-byte public key> <name>`.

A list, for rotation (docs/packages.md): a new key is added here in one release and signs the
packages from the next; the old line is removed once no published package needs it. A key that
leaked is removed at once, in a release of its own. The private halves never enter the
repository: the release workflow reads the key from the KVSTUDIO_RELEASE_KEY secret.
"""

RELEASE_KEYS = """
# key id 5d080de67a79c4fc, made 2026-12-03; signs the packages of the first release workflow
ed25519 ndBhL4blKQcTq9NzLouEhLbYmdlXYXCjSvoC7WfFtb8= kvstudio-release-1
"""
