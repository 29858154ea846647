#!/bin/sh
# Puts KV Studio from this unpacked .tar.gz into your desktop's menu (for you alone): writes
# ${XDG_DATA_HOME:-~/.local/share}/applications/kvstudio.desktop from share/kvstudio.desktop,
# with Exec and Icon pointing at this folder (the .deb's entry names `kvstudio` on PATH and an
# icon in the system's theme, which an unpacked folder has neither of).
#     kvstudio-VERSION-linux-x86_64/share/install-menu-entry.sh            # add the entry
#     kvstudio-VERSION-linux-x86_64/share/install-menu-entry.sh --remove   # take it away
# Move the folder first if you want it elsewhere: the entry points at where it is now.
set -eu
share=$(cd "$(dirname "$0")" && pwd -P)
app="$(dirname "$share")/kvstudio"
applications="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
entry="$applications/kvstudio.desktop"
if [ "${1:-}" = "--remove" ]; then
  rm -f "$entry"
  echo "Removed $entry; your models and conversations stay where they are."
  exit 0
fi
case "$app" in
  *[\"\`\$\\]*)
    echo "install-menu-entry.sh: the folder's path ($share) holds a quote, \$, \` or \\, which a menu entry cannot start; move the folder to a plainer path and run this again." >&2
    exit 2 ;;
esac
[ -x "$app" ] || { echo "install-menu-entry.sh: $app is missing; unpack the whole .tar.gz again." >&2; exit 2; }
mkdir -p "$applications"
# Exec: the path in double quotes (spaces allowed), % doubled as the desktop entry spec asks.
exec_path=$(printf '%s' "$app" | sed 's/%/%%/g')
tmp="$entry.tmp.$$"
sed -e "s|^Exec=.*|Exec=\"$exec_path\" gui|" -e "s|^Icon=.*|Icon=$share/kvstudio.png|" \
  "$share/kvstudio.desktop" > "$tmp"
mv "$tmp" "$entry"
echo "Added KV Studio to your menu ($entry)."
