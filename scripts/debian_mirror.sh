# Sourced: sets $mirror to the Debian mirror apt already uses here (deb822 "URIs:" or one-line
# "deb URL"), not a guessed one; KVSTUDIO_DEBIAN_MIRROR overrides it.
mirror=""
for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  mirror=$(grep -hoE '(^URIs:[[:space:]]*|^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)https?://[^[:space:]]*/debian/?([[:space:]]|$)' "$f" \
    | grep -oE 'https?://[^[:space:]]*' | head -n1 || true)
  [ -n "$mirror" ] && break
done
mirror="${KVSTUDIO_DEBIAN_MIRROR:-${mirror:-http://deb.debian.org/debian}}"
