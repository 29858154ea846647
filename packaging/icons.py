"""Renders assets/icon.svg into the icon files the installers and desktops need.

    python packaging/icons.py

writes assets/icons/kvstudio-<size>.png (the Linux hicolor sizes and the AppImage's), kvstudio.ico
(Windows: PyInstaller and NSIS) and kvstudio.icns (macOS), all committed. The SVG is drawn by Qt's
own renderer, the one that draws the window icon, so no other tool is needed; the two containers
are written here because they are a few bytes of header around PNGs.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

ROOT = Path(__file__).resolve().parents[1]
SVG = ROOT / "assets" / "icon.svg"
OUT_DIR = ROOT / "assets" / "icons"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
# Windows picks from these for the taskbar, Explorer views and the Start menu; 256 is the largest
# an ICO directory entry can name.
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# The PNG-holding ICNS types: ic07..ic09 are 128/256/512, ic10 is 512@2x (1024 pixels).
ICNS_TYPES = (("ic07", 128), ("ic08", 256), ("ic09", 512), ("ic10", 1024))


def png_name(size: int) -> str:
    return f"kvstudio-{size}.png"


def render(svg: Path, size: int) -> QImage:
    """The SVG drawn into a size x size ARGB32 image (needs a QGuiApplication)."""
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg} is not an SVG Qt can draw.")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(0)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    # Straight (not premultiplied) alpha is what PNG stores.
    return image.convertToFormat(QImage.Format.Format_ARGB32)


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    # PySide6 takes the format as str at run time; its stubs say bytes, which it refuses.
    if not image.save(buffer, "PNG"):  # type: ignore[call-overload]
        raise RuntimeError("Qt could not encode the icon as PNG.")
    buffer.close()
    return bytes(data.data())


def ico_bytes(pngs: Sequence[tuple[int, bytes]]) -> bytes:
    """An ICO file whose entries are PNGs (Windows Vista and later read them): (size, png) each."""
    header = struct.pack("<HHH", 0, 1, len(pngs))  # reserved, type 1 = icon, count
    offset = len(header) + 16 * len(pngs)
    directory, images = b"", b""
    for size, png in pngs:
        if not 1 <= size <= 256:
            raise ValueError(f"An ICO entry is 1 to 256 pixels wide, not {size}.")
        side = size % 256  # 0 stands for 256
        # width, height, palette colours, reserved, colour planes, bits per pixel, bytes, offset
        directory += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(png), offset)
        images += png
        offset += len(png)
    return header + directory + images


def icns_bytes(chunks: Sequence[tuple[str, bytes]]) -> bytes:
    """An ICNS file of (type, png) chunks; every length is big-endian and counts its own header."""
    body = b"".join(
        kind.encode("ascii") + struct.pack(">I", 8 + len(png)) + png for kind, png in chunks
    )
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def render_all(svg: Path, out_dir: Path) -> list[Path]:
    """Writes every PNG size, the ICO and the ICNS into out_dir; returns the files written."""
    sizes = sorted({*PNG_SIZES, *ICO_SIZES, *(size for _, size in ICNS_TYPES)})
    pngs = {size: png_bytes(render(svg, size)) for size in sizes}
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {out_dir / png_name(size): pngs[size] for size in PNG_SIZES}
    files[out_dir / "kvstudio.ico"] = ico_bytes([(size, pngs[size]) for size in ICO_SIZES])
    files[out_dir / "kvstudio.icns"] = icns_bytes([(kind, pngs[size]) for kind, size in ICNS_TYPES])
    for path, data in files.items():
        path.write_bytes(data)
    return list(files)


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # no window is shown
    _app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # QPainter needs one
    written = render_all(SVG, OUT_DIR)
    for path in written:
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
