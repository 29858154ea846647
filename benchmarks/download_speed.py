"""Download speed of the app's downloader vs curl, and bytes re-fetched after kill-and-resume.

    .venv/bin/python benchmarks/download_speed.py [--size-mb 200] [--rounds 7]

A fake Hub (tests/hub_server.py) runs in its own process on 127.0.0.1 and serves one
random file of --size-mb MB. In the same run, interleaved round by round (A B A B ...):
  - the app: app.models.hub.download_entry (HEAD, 302 to the "CDN", streaming GET with
    SHA-256 verified while writing, rename into the HF cache layout);
  - curl: `curl -L` of the same resolve URL to a file (no verification), and curl followed
    by `sha256sum` (the same guarantees as the app).
Both write into the same temporary folder (one filesystem), and each deletes its previous
copy first. Then a download in a child process is killed with SIGKILL at 50% and resumed
in another one, and the bytes fetched twice are counted two ways: what the app's process
read twice from its socket, and what the server sent twice (which adds what the kernel
had received for the killed process but it never read).
Prints throughput (MB/s, median of rounds), the ratio app/curl as the median of the
per-round ratios (target >= 0.9; the ratio of the medians too), CPU seconds per download,
and the re-fetched bytes (target < 1% of the file). Timings on a shared machine are noisy:
compare ratios, not absolutes, and read the load average printed with them.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REPO = "bench/download-GGUF"
NAME = "bench-Q8_0.gguf"

_CHILD = """
import sys
from app.models.hub import download_entry, list_gguf_files
if len(sys.argv) > 3:
    # Count the bytes this process receives (a shared 8-byte counter the parent reads after
    # the kill): what the app received minus what it had on disk is what it lost.
    import mmap, socket, struct
    counter_file = open(sys.argv[3], "r+b")
    counter = mmap.mmap(counter_file.fileno(), 8)
    def count(n):
        counter[:8] = struct.pack("<Q", struct.unpack("<Q", counter[:8])[0] + n)
    _recv, _recv_into = socket.socket.recv, socket.socket.recv_into
    def recv(self, *args):
        data = _recv(self, *args)
        count(len(data))
        return data
    def recv_into(self, *args):
        n = _recv_into(self, *args)
        count(n)
        return n
    socket.socket.recv, socket.socket.recv_into = recv, recv_into
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


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _app_once(cache: Path) -> float:
    from app.models.hub import download_entry, list_gguf_files

    shutil.rmtree(cache, ignore_errors=True)
    os.environ["HF_HUB_CACHE"] = str(cache)
    entry = list_gguf_files(REPO).pick("Q8_0")
    t0 = time.perf_counter()
    download_entry(entry)
    return time.perf_counter() - t0


def _curl_command(url: str, out: Path) -> list[str]:
    """curl fetching the benchmark file into `out`, as plainly as the app asks for it."""
    url = f"{url}/{REPO}/resolve/main/{NAME}"
    return ["curl", "-sS", "-L", "-H", "Accept-Encoding: identity", "-o", str(out), url]


def _curl_once(url: str, out: Path, verify: bool) -> float:
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    subprocess.run(_curl_command(url, out), check=True)
    if verify:
        subprocess.run(["sha256sum", str(out)], check=True, capture_output=True)
    return time.perf_counter() - t0


def _cdn_port(url: str) -> int:
    """The port of the "CDN" the resolve URL redirects to (the connection the body uses)."""
    parts = urlsplit(url)
    if parts.hostname is None:
        raise SystemExit(f"{url} names no host.")
    conn = http.client.HTTPConnection(parts.hostname, parts.port)
    conn.request("HEAD", f"/{REPO}/resolve/main/{NAME}")
    location = conn.getresponse().getheader("Location") or ""
    conn.close()
    return urlsplit(location).port or 0


def _socket_queues(port: int) -> tuple[int, int] | None:
    """(bytes queued in the server's socket not yet delivered to the client, bytes the
    client's kernel received that the app has not read) for established connections to
    `port`, from /proc/net/tcp (Linux; None elsewhere). On loopback a byte leaves the
    server's queue once it is in the client's receive queue."""
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    server_unsent = client_unread = 0
    for line in lines:
        fields = line.split()
        local_port, remote_port = int(fields[1].split(":")[1], 16), int(fields[2].split(":")[1], 16)
        if fields[3] != "01":  # ESTABLISHED
            continue
        tx, rx = (int(x, 16) for x in fields[4].split(":"))
        if local_port == port:
            server_unsent += tx
        elif remote_port == port:
            client_unread += rx
    return server_unsent, client_unread


def _kill_and_resume(url: str, cache: Path, size: int, sha256: str, cdn_port: int) -> dict:
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "HF_HUB_CACHE": str(cache)}
    partial = cache / f"models--{REPO.replace('/', '--')}" / "blobs" / f"{sha256}.incomplete"
    counter = cache.parent / "received.bin"
    counter.write_bytes(bytes(8))
    before = _stats(url)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, REPO, "Q8_0", str(counter)], cwd=ROOT, env=env
    )
    while not partial.exists() or partial.stat().st_size < size // 2:
        if child.poll() is not None:
            raise SystemExit(
                "the download finished before it could be killed; use a bigger --size-mb"
            )
        time.sleep(0.002)
    queues = _socket_queues(cdn_port)  # just before the kill: what the kill will discard
    child.send_signal(signal.SIGKILL)
    child.wait()
    time.sleep(0.3)  # let the server notice the closed connection
    on_disk = partial.stat().st_size
    received_first = int.from_bytes(counter.read_bytes(), "little")
    sent_first = _stats(url) - before
    counter.write_bytes(bytes(8))
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", _CHILD, REPO, "Q8_0", str(counter)], cwd=ROOT, env=env, check=True
    )
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
        "server_unsent": queues[0] if queues else None,
        "client_unread": queues[1] if queues else None,
        "resume_s": resume_s,
    }


def _curl_kill_and_resume(url: str, out: Path, size: int, sha256: str) -> int:
    """The same kill -9 at 50% and resume (`curl -C -`) with curl: bytes the server sent twice."""
    out.unlink(missing_ok=True)
    command = _curl_command(url, out)
    before = _stats(url)
    child = subprocess.Popen(command)
    while not out.exists() or out.stat().st_size < size // 2:
        if child.poll() is not None:
            raise SystemExit("curl finished before it could be killed; use a bigger --size-mb")
        time.sleep(0.002)
    child.send_signal(signal.SIGKILL)
    child.wait()
    time.sleep(0.3)
    subprocess.run([*command[:-1], "-C", "-", command[-1]], check=True)
    digest = subprocess.run(
        ["sha256sum", str(out)], check=True, capture_output=True, text=True
    ).stdout.split()[0]
    if digest != sha256:
        raise SystemExit("curl's resumed file does not match; the comparison is void")
    out.unlink()
    return _stats(url) - before - size


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--kills", type=int, default=3, help="kill-and-resume repetitions")
    args = parser.parse_args()
    size = args.size_mb * 1_000_000

    work = Path(tempfile.mkdtemp(prefix="kvstudio-dl-bench-"))
    server = None
    try:
        source = _make_file(work, size)
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.hub_server", REPO, str(source)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None and server.stdin is not None
        info = json.loads(server.stdout.readline())
        url, sha256 = info["url"], info["files"][NAME]["sha256"]
        os.environ["HF_ENDPOINT"] = url
        os.environ.pop("HF_HUB_OFFLINE", None)
        os.environ["HF_HOME"] = str(work / "hf-home")
        os.environ["KVSTUDIO_DATA_DIR"] = str(work / "data")

        print(f"{os.cpu_count()} CPUs, load average at start: {_load()}", flush=True)
        _app_once(work / "cache")  # warm-up: imports, first connection, page cache
        _curl_once(url, work / "curl.out", verify=False)
        app_s, curl_s, curl_sha_s, app_cpu, curl_cpu = [], [], [], [], []
        for i in range(args.rounds):
            before = _cpu(resource.RUSAGE_SELF)
            app_s.append(_app_once(work / "cache"))
            app_cpu.append(_cpu(resource.RUSAGE_SELF) - before)
            before = _cpu(resource.RUSAGE_CHILDREN)
            curl_s.append(_curl_once(url, work / "curl.out", verify=False))
            curl_cpu.append(_cpu(resource.RUSAGE_CHILDREN) - before)
            curl_sha_s.append(_curl_once(url, work / "curl.out", verify=True))
            print(
                f"round {i + 1}: app {size / app_s[-1] / 1e6:7.1f} MB/s"
                f"   curl {size / curl_s[-1] / 1e6:7.1f} MB/s"
                f"   curl+sha256sum {size / curl_sha_s[-1] / 1e6:7.1f} MB/s"
                f"   app/curl {curl_s[-1] / app_s[-1]:5.2f}",
                flush=True,
            )
        shutil.rmtree(work / "cache", ignore_errors=True)
        (work / "curl.out").unlink(missing_ok=True)
        app, curl, curl_sha = (
            size / statistics.median(t) / 1e6 for t in (app_s, curl_s, curl_sha_s)
        )
        ratios = sorted(c / a for a, c in zip(app_s, curl_s, strict=True))
        ratios_sha = sorted(c / a for a, c in zip(app_s, curl_sha_s, strict=True))
        print(
            f"\nfile: {size / 1e6:.0f} MB, {args.rounds} interleaved rounds after a warm-up, "
            f"medians; load average now: {_load()}"
        )
        print(
            f"  app downloader (SHA-256 verified):  {app:8.1f} MB/s   "
            f"{statistics.median(app_cpu):.3f} CPU s"
        )
        print(
            f"  curl -L (no verification):          {curl:8.1f} MB/s   "
            f"{statistics.median(curl_cpu):.3f} CPU s"
        )
        print(f"  curl -L + sha256sum:                {curl_sha:8.1f} MB/s")
        print(
            f"  ratio app / curl:                   {statistics.median(ratios):8.2f}   "
            f"(target >= 0.9; per round {ratios[0]:.2f} .. {ratios[-1]:.2f}; "
            f"ratio of medians {app / curl:.2f})"
        )
        print(f"  ratio app / (curl + sha256sum):     {statistics.median(ratios_sha):8.2f}")
        tiny = []
        for _ in range(9):
            t0 = time.perf_counter()
            subprocess.run(["curl", "-sS", "-o", os.devnull, f"{url}/_fake/stats"], check=True)
            tiny.append(time.perf_counter() - t0)
        print(
            f"  (curl's time includes starting the process: a tiny request takes "
            f"{statistics.median(tiny) * 1e3:.1f} ms = "
            f"{statistics.median(tiny) / statistics.median(curl_s):.1%} "
            f"of its download; the app runs in this process)"
        )

        cdn_port = _cdn_port(url)
        kills = [
            _kill_and_resume(url, work / "cache", size, sha256, cdn_port) for _ in range(args.kills)
        ]
        for i, r in enumerate(kills):
            print(
                f"\nkill -9 #{i + 1} at {r['killed_at'] / size:.0%} "
                f"({r['killed_at']:,} bytes on disk), then resume "
                f"({r['resume_s']:.2f} s, re-hashing what is on disk included):"
            )
            print(
                f"  the app had read from its socket:   {r['received_before_kill']:,} bytes "
                f"({r['received_before_kill'] - r['killed_at']:,} not yet on disk)"
            )
            print(f"  the server had sent (sendfile):     {r['sent_before_kill']:,} bytes")
            if r["server_unsent"] is not None:
                print(
                    f"  just before the kill: {r['client_unread']:,} bytes "
                    "in the app's socket receive queue, "
                    f"{r['server_unsent']:,} still in the server's send queue"
                )
        curl_kills = [
            _curl_kill_and_resume(url, work / "curl.out", size, sha256) for _ in range(args.kills)
        ]
        print(
            f"\nre-fetched after kill -9 at 50% and resume, {args.kills} kills each, "
            "median (min .. max), % of the file:"
        )

        def line(label: str, values: list[int], note: str = "") -> None:
            values = sorted(values)
            print(
                f"  {label:<48} {statistics.median(values) / size:7.3%}  "
                f"({values[0] / size:.3%} .. {values[-1] / size:.3%}){note}"
            )

        line(
            "app: read twice by the app's process",
            [r["refetched_by_app"] for r in kills],
            "   (target < 1%)",
        )
        line("app: sent twice by the server", [r["refetched_by_server"] for r in kills])
        line("curl -C -: sent twice by the server", curl_kills)
        print(
            "  (the server's count adds what the kill discards in the kernel: "
            "the app's socket receive\n"
            "   queue and the server's own send queue, neither of which the app ever read)"
        )
    finally:
        if server is not None and server.stdin is not None:
            server.stdin.close()
            server.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
