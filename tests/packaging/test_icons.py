"""The app icon files in assets/icons: right sizes, readable containers, and rendered from the SVG
as it is now (an SVG edit without `python packaging/icons.py` fails here)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtGui import QImage

from tests.packaging.packaging_scripts import load

icons = load("icons")
ICON_DIR: Path = icons.OUT_DIR
# Qt versions differ in antialiasing by a few levels on edge pixels; an SVG edit moves whole
# edges (max) or recolours areas (mean) by far more.
MAX_CHANNEL_DIFFERENCE = 32
MEAN_CHANNEL_DIFFERENCE = 1.0


def decode(png: bytes) -> QImage:
    assert png.startswith(b"\x89PNG\r\n\x1a\n"), "an icon entry is not a PNG"
    image = QImage.fromData(png)
    assert not image.isNull(), "an icon entry is a PNG Qt cannot read"
    return image.convertToFormat(QImage.Format.Format_ARGB32)


def pixels(image: QImage) -> np.ndarray:
    image = image.convertToFormat(QImage.Format.Format_ARGB32)
    data = np.frombuffer(image.constBits(), np.uint8, count=image.sizeInBytes())
    return data.reshape(image.height(), image.bytesPerLine())[:, : image.width() * 4].astype(int)


def difference(a: QImage, b: QImage) -> tuple[int, float]:
    """The largest and the mean difference of one colour channel between two same-size images."""
    assert a.size() == b.size()
    delta = np.abs(pixels(a) - pixels(b))
    return int(delta.max()), float(delta.mean())


def ico_entries(data: bytes) -> list[tuple[int, QImage]]:
    """(declared size, decoded image) for every entry of an ICO file."""
    reserved, kind, count = struct.unpack_from("<HHH", data, 0)
    assert (reserved, kind) == (0, 1), "not an ICO header"
    entries = []
    for index in range(count):
        width, height, _, _, planes, bits, length, offset = struct.unpack_from(
            "<BBBBHHII", data, 6 + 16 * index
        )
        assert width == height and (planes, bits) == (1, 32)
        assert offset + length <= len(data), f"ICO entry {index} runs past the end of the file"
        entries.append((width or 256, decode(data[offset : offset + length])))
    return entries


def icns_chunks(data: bytes) -> list[tuple[str, QImage]]:
    """(type, decoded image) for every chunk of an ICNS file."""
    magic, total = data[:4], struct.unpack_from(">I", data, 4)[0]
    assert magic == b"icns" and total == len(data), "ICNS header does not match the file"
    chunks, at = [], 8
    while at < len(data):
        kind, length = data[at : at + 4].decode("ascii"), struct.unpack_from(">I", data, at + 4)[0]
        assert length > 8 and at + length <= len(data), f"ICNS chunk {kind} has a bad length"
        chunks.append((kind, decode(data[at + 8 : at + length])))
        at += length
    return chunks


def test_each_png_is_its_size_with_a_transparent_corner_and_opaque_middle() -> None:
    for size in icons.PNG_SIZES:
        image = QImage(str(ICON_DIR / f"kvstudio-{size}.png"))
        assert not image.isNull(), f"kvstudio-{size}.png is missing or not a PNG"
        assert (image.width(), image.height()) == (size, size)
        assert image.pixelColor(0, 0).alpha() == 0, "the tile's rounded corner should be clear"
        assert image.pixelColor(size // 2, size // 2).alpha() == 255


def test_ico_holds_every_windows_size_as_a_readable_png() -> None:
    entries = ico_entries((ICON_DIR / "kvstudio.ico").read_bytes())
    assert [size for size, _ in entries] == [16, 24, 32, 48, 64, 128, 256]
    for size, image in entries:
        assert (image.width(), image.height()) == (size, size)


def test_icns_holds_the_retina_sizes_as_readable_pngs() -> None:
    chunks = icns_chunks((ICON_DIR / "kvstudio.icns").read_bytes())
    sizes = {kind: image.width() for kind, image in chunks}
    assert sizes == {"ic07": 128, "ic08": 256, "ic09": 512, "ic10": 1024}
    assert all(image.width() == image.height() for _, image in chunks)


def rendered_images(folder: Path) -> dict[str, QImage]:
    """Every image in an icons folder, the containers' entries included, by a stable name."""
    images = {path.name: QImage(str(path)) for path in sorted(folder.glob("*.png"))}
    for size, image in ico_entries((folder / "kvstudio.ico").read_bytes()):
        images[f"kvstudio.ico[{size}]"] = image
    for kind, image in icns_chunks((folder / "kvstudio.icns").read_bytes()):
        images[f"kvstudio.icns[{kind}]"] = image
    return images


def test_committed_icons_are_a_fresh_render_of_the_svg(qapp: object, tmp_path: Path) -> None:
    icons.render_all(icons.SVG, tmp_path)
    fresh, committed = rendered_images(tmp_path), rendered_images(ICON_DIR)
    assert committed.keys() == fresh.keys()
    stale = []
    for name, image in fresh.items():
        largest, mean = difference(committed[name], image)
        if largest > MAX_CHANNEL_DIFFERENCE or mean > MEAN_CHANNEL_DIFFERENCE:
            stale.append(f"{name} (max {largest}, mean {mean:.2f})")
    assert not stale, f"assets/icons is stale, run python packaging/icons.py: {', '.join(stale)}"


@pytest.mark.parametrize(
    "edit",
    [("#2f6fdb", "#2f9fdb"), ('rx="12"', 'rx="20"'), ("M12 12h12", "M13 12h12")],
    ids=["recoloured", "rounder corners", "stem moved a quarter pixel at 16 px"],
)
def test_an_edited_svg_no_longer_matches(
    qapp: object, tmp_path: Path, edit: tuple[str, str]
) -> None:
    """The tolerance above lets Qt's antialiasing vary, not an edit of the drawing."""
    source = icons.SVG.read_text(encoding="utf-8")
    assert edit[0] in source
    edited = tmp_path / "icon.svg"
    edited.write_text(source.replace(*edit), encoding="utf-8")
    for size in (16, 256):
        largest, mean = difference(
            QImage(str(ICON_DIR / f"kvstudio-{size}.png")), icons.render(edited, size)
        )
        assert largest > MAX_CHANNEL_DIFFERENCE or mean > MEAN_CHANNEL_DIFFERENCE


def test_a_file_that_is_not_svg_gets_a_sentence(qapp: object, tmp_path: Path) -> None:
    broken = tmp_path / "icon.svg"
    broken.write_text("not an svg", encoding="utf-8")
    with pytest.raises(ValueError, match="is not an SVG Qt can draw"):
        icons.render(broken, 16)
