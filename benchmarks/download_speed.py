"""Download speed of the app's downloader vs curl, and bytes re-fetched after kill-and-resume.

    .venv/bin/python benchmarks/download_speed.py [--size-mb 200] [--rounds 3]

A fake Hub (tests/hub_server.py) runs in its own process on 127.0.0.1 and serves one
random file of --size-mb MB. In the same run, interleaved round by round:
  - the app: app.core.hub.download_entry (HEAD, 302 to the "CDN", streaming GET with
    SHA-256 verified while writing, rename into the HF cache layout);
  - curl: `curl -L` of the same resolve URL to a file (no verification), and curl followed
    by `sha256sum` (the same guarantees as the app).
Then a download in a child process is killed with SIGKILL at 50% and resumed in another
one; the bytes the server sent beyond the file size are the bytes fetched twice.
Prints throughput (MB/s, median of rounds) and ratios (target: app/curl >= 0.9, re-fetched
< 1% of the file). Timings on a shared machine are noisy: compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REPO = "bench/download-GGUF"
NAME = "bench-Q8_0.gguf"

_CHILD = """
import sys
from app.core.hub import download_entry, list_gguf_files
if len(sys.argv) > 3:
    # Count the bytes this process receives (a shared 8-byte counter the parent reads after
    # the kill): what the app received minus what it had on disk is what it lost.
    import mmap, socket, struct
    counter_file = open(sys.argv[3], "r+b")
    counter = mmap.mmap(counter_file.fileno(), 8)
    _recv = socket.socket.recv
    def recv(self, n, *args):
        data = _recv(self, n, *args)
        counter[:8] = struct.pack("<Q", struct.unpack("<Q", counter[:8])[0] + len(data))
        return data
    socket.socket.recv = recv
download_entry(list_gguf_files(sys.argv[1]).pick(sys.argv[2]))
"""


def _make_file(folder: Path, size: int) -> Path:
    path = folder / NAME
    chunk = os.urandom(16 * 1024 * 1024)
    with open(path, "wb") as out:
        out.write(b"GGUF")
        left = size - 4
        while left > 0:
            out.write(chunk[: min(left, len(chunk))])
            left -= min(left, len(chunk))
    return path


def _stats(url: str) -> int:
    with urllib.request.urlopen(f"{url}/_fake/stats") as r:
        return int(json.load(r)["cdn_bytes_sent"])


def _app_once(cache: Path) -> float:
    from app.core.hub import download_entry, list_gguf_files

    shutil.rmtree(cache, ignore_errors=True)
    os.environ["HF_HUB_CACHE"] = str(cache)
    entry = list_gguf_files(REPO).pick("Q8_0")
    t0 = time.perf_counter()
    download_entry(entry)
    return time.perf_counter() - t0


def _curl_once(url: str, out: Path, verify: bool) -> float:
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    subprocess.run(
        ["curl", "-sS", "-L", "-H", "Accept-Encoding: identity", "-o", str(out),
         f"{url}/{REPO}/resolve/main/{NAME}"],
        check=True,
    )
    if verify:
        subprocess.run(["sha256sum", str(out)], check=True, capture_output=True)
    return time.perf_counter() - t0


def _kill_and_resume(url: str, cache: Path, size: int, sha256: str) -> dict:
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "HF_HUB_CACHE": str(cache)}
    partial = cache / f"models--{REPO.replace('/', '--')}" / "blobs" / f"{sha256}.incomplete"
    counter = cache.parent / "received.bin"
    counter.write_bytes(bytes(8))
    before = _stats(url)
    child = subprocess.Popen([sys.executable, "-c", _CHILD, REPO, "Q8_0", str(counter)], cwd=ROOT, env=env)
    while not partial.exists() or partial.stat().st_size < size // 2:
        if child.poll() is not None:
            raise SystemExit("the download finished before it could be killed; use a bigger --size-mb")
        time.sleep(0.002)
    child.send_signal(signal.SIGKILL)
    child.wait()
    time.sleep(0.3)  # let the server notice the closed connection
    on_disk = partial.stat().st_size
    received_first = int.from_bytes(counter.read_bytes(), "little")
    sent_first = _stats(url) - before
    counter.write_bytes(bytes(8))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", _CHILD, REPO, "Q8_0", str(counter)], cwd=ROOT, env=env, check=True)
    resume_s = time.perf_counter() - t0
    received_total = received_first + int.from_bytes(counter.read_bytes(), "little")
    sent_total = _stats(url) - before
    return {
        "killed_at": on_disk,
        "received_before_kill": received_first,
        "sent_before_kill": sent_first,
        "sent_total": sent_total,
        "received_total": received_total,
        "refetched_by_app": received_total - size,
        "refetched_by_server": sent_total - size,
        "resume_s": resume_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    size = args.size_mb * 1_000_000

    work = Path(tempfile.mkdtemp(prefix="kvstudio-dl-bench-"))
    server = None
    try:
        source = _make_file(work, size)
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.hub_server", REPO, str(source)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert server.stdout is not None and server.stdin is not None
        info = json.loads(server.stdout.readline())
        url, sha256 = info["url"], info["files"][NAME]["sha256"]
        os.environ["HF_ENDPOINT"] = url
        os.environ.pop("HF_HUB_OFFLINE", None)
        os.environ["HF_HOME"] = str(work / "hf-home")
        os.environ["KVSTUDIO_DATA_DIR"] = str(work / "data")

        app_s, curl_s, curl_sha_s = [], [], []
        for i in range(args.rounds):
            app_s.append(_app_once(work / "cache"))
            curl_s.append(_curl_once(url, work / "curl.out", verify=False))
            curl_sha_s.append(_curl_once(url, work / "curl.out", verify=True))
            print(f"round {i + 1}: app {size / app_s[-1] / 1e6:7.1f} MB/s   curl {size / curl_s[-1] / 1e6:7.1f} MB/s"
                  f"   curl+sha256sum {size / curl_sha_s[-1] / 1e6:7.1f} MB/s", flush=True)
        app, curl, curl_sha = (size / statistics.median(t) / 1e6 for t in (app_s, curl_s, curl_sha_s))
        print(f"\nfile: {size / 1e6:.0f} MB, {args.rounds} interleaved rounds, median throughput")
        print(f"  app downloader (SHA-256 verified):  {app:8.1f} MB/s")
        print(f"  curl -L (no verification):          {curl:8.1f} MB/s")
        print(f"  curl -L + sha256sum:                {curl_sha:8.1f} MB/s")
        print(f"  ratio app / curl:                   {app / curl:8.2f}   (target >= 0.9)")
        print(f"  ratio app / (curl + sha256sum):     {app / curl_sha:8.2f}")

        r = _kill_and_resume(url, work / "cache", size, sha256)
        print(f"\nkill -9 at {r['killed_at'] / size:.0%} ({r['killed_at']:,} bytes on disk), then resume:")
        print(f"  the app had received:               {r['received_before_kill']:,} bytes "
              f"({r['received_before_kill'] - r['killed_at']:,} not yet on disk)")
        print(f"  the server had sent:                {r['sent_before_kill']:,} bytes "
              f"(the rest was in the kernel's socket buffers)")
        app_pct, server_pct = r["refetched_by_app"] / size, r["refetched_by_server"] / size
        print(f"  re-fetched, received twice by the app: {r['refetched_by_app']:,} bytes = {app_pct:.3%} "
              f"of the file   (target < 1%)")
        print(f"  re-fetched, sent twice by the server:  {r['refetched_by_server']:,} bytes = {server_pct:.3%} "
              f"(includes the socket buffers a kill discards)")
        print(f"  resume took {r['resume_s']:.2f} s (re-hashing the {r['killed_at'] / 1e6:.0f} MB on disk included)")
    finally:
        if server is not None and server.stdin is not None:
            server.stdin.close()
            server.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
