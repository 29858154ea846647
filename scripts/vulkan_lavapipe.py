"""The Vulkan-on-lavapipe record (issue 9): run the starter model on the `vulkan` backend package
and on the built-in CPU backend, per K/V pair, and write docs/vulkan-lavapipe.json and .md.

  python scripts/vulkan_lavapipe.py record --package DIR [--json J] [--md M]
  python scripts/vulkan_lavapipe.py render [--json J] [--md M]
  python scripts/vulkan_lavapipe.py probe --kv K/V      (one load, in its own process)

`record` needs the package installed in $KVSTUDIO_DATA_DIR (`kvstudio backend add ARCHIVE`);
it switches the data folder's backend between `built-in` and `vulkan` and leaves `vulkan` on.
Per pair it takes `kvstudio run starter --json` (text, tokens/s, KV cache buffers, warnings) and
a probe: the same load in-process with llama.cpp's log kept and GGML_SCHED_DEBUG=2, which logs
the device every graph node runs on, so "Flash Attention ran on Vulkan0" is read, not assumed;
it then picks 16 tokens by plain argmax twice (top-2 logit gaps; the second pass's speed).
ggml-vulkan skips CPU-type devices such as lavapipe unless GGML_VK_VISIBLE_DEVICES names them:
`record` sets GGML_VK_VISIBLE_DEVICES=0 unless it is set.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAIRS = ("f16/f16", "q8_0/f16", "q8_0/q8_0")
PROMPT = "The capital of France is"
TOKENS = 16
CTX = 4096
DEFAULT_JSON = ROOT / "docs" / "vulkan-lavapipe.json"
DEFAULT_MD = ROOT / "docs" / "vulkan-lavapipe.md"

_NODE_RE = re.compile(r"node #\s*\d+ \(\s*(\S+)\):\s*(\S*) \(.*?\[\s*(\S+)\s")
_LAYER_RE = re.compile(r"load_tensors: layer\s+\d+ assigned to device (\S+),")
_KEEP_RE = re.compile(
    r"ggml_vulkan: \d+ =|offloaded \d+/\d+ layers|model buffer size|KV buffer size|"
    r"compute buffer size|flash_attn|Flash Attention|graph splits"
)


def probe(kv: str) -> dict[str, Any]:
    """Load the starter model on the data folder's backend with the engine's load options (FA
    on, all layers offloaded), decode TOKENS greedily, and say from llama.cpp's log where it
    ran. (Not through the engine: its process keeps llama.cpp's log to itself.)"""
    from app.backends.store import BackendStore, library_env
    from app.platform.paths import data_dir

    backend, notice = BackendStore(data_dir()).for_engine()
    os.environ.update(library_env(backend.folder))
    os.environ["GGML_SCHED_DEBUG"] = "2"
    import llama_cpp  # before numpy (docs/llama-cpp-notes.md)

    from app.engine import llama_log
    from app.engine.log_parse import classify_warning
    from app.kv.kv_types import KvMode
    from app.load.profile import LoadProfile
    from app.models.model_ref import resolve_model

    mode = KvMode.parse(kv)
    engine = LoadProfile(model_path=str(resolve_model("starter")), n_ctx=CTX)  # its defaults
    router = llama_log.install()
    llm = llama_cpp.Llama(
        model_path=engine.model_path,
        n_ctx=engine.n_ctx,
        n_gpu_layers=engine.n_gpu_layers,
        flash_attn=engine.flash_attn,
        type_k=mode.k.ggml_id,
        type_v=mode.v.ggml_id,
        n_batch=engine.n_batch,
        n_ubatch=engine.n_ubatch,
        swa_full=engine.swa_full,
        verbose=True,
    )
    try:
        passes = [_argmax_pass(llm, llama_cpp) for _ in range(2)]
    finally:
        llm.close()
    router.flush()
    lines = router.take_lines()
    fa_nodes: Counter[str] = Counter()
    nodes: Counter[str] = Counter()
    cpu_ops: Counter[str] = Counter()
    for line in lines:
        match = _NODE_RE.search(line)
        if match:
            op, name, device = match.groups()
            nodes[device] += 1
            fa_nodes[device] += op.startswith("FLASH_ATTN")
            cpu_ops[f"{op} {name}"] += device == "CPU"
    warnings = [w.text for w in (classify_warning(line) for line in lines) if w is not None]
    return {
        "backend": backend.name,
        "notice": notice,
        "layers": dict(Counter(m.group(1) for m in map(_LAYER_RE.search, lines) if m)),
        # graph nodes per device as the scheduler placed them (ggml cuts the name to 5 letters)
        "graph_nodes": dict(nodes),
        "flash_attn_nodes": {d: n for d, n in fa_nodes.items() if n},
        "cpu_ops": {op: n for op, n in cpu_ops.items() if n},
        "warnings": list(dict.fromkeys(warnings)),
        "log": list(dict.fromkeys(line.strip() for line in lines if _KEEP_RE.search(line))),
        "argmax": passes[0],
        "warm_decode_tokens_per_second": passes[1]["decode_tokens_per_second"],
    }


def _argmax_pass(llm: Any, llama_cpp: Any) -> dict[str, Any]:
    """TOKENS tokens by plain argmax over the logits (no sampler, no repeat penalty), with the
    gap between the best and second-best logit at each step (a small gap: a near tie, where
    two correct backends may pick differently)."""
    import numpy as np

    llm.reset()
    tokens = llm.tokenize(PROMPT.encode(), add_bos=True)
    picked: list[int] = []
    gaps: list[float] = []
    started = time.perf_counter()
    first = 0.0
    batch = tokens
    for _ in range(TOKENS):
        llm.eval(batch)
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        top2 = np.argsort(logits)[-2:]
        token = int(top2[1])
        gaps.append(round(float(logits[top2[1]] - logits[top2[0]]), 4))
        picked.append(token)
        first = first or time.perf_counter() - started
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
            break
        batch = [token]
    seconds = time.perf_counter() - started
    return {
        "text": llm.detokenize(picked).decode("utf-8", errors="replace"),
        "tokens": picked,
        "top2_gaps": gaps,
        "first_token_s": round(first, 3),
        # tokens after the first, over the time after the first (the last one is not decoded)
        "decode_tokens_per_second": round((len(picked) - 1) / (seconds - first), 2)
        if len(picked) > 1 and seconds > first
        else None,
    }


def _run(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT, check=False)
    return done.returncode, done.stdout, done.stderr


def _json_or_error(code: int, out: str, err: str) -> dict[str, Any]:
    if code == 0:
        try:
            return dict(json.loads(out))
        except ValueError:
            pass
    return {"error": f"exit {code}: {(err or out).strip()[-600:]}"}


def _use(backend: str, env: dict[str, str]) -> None:
    code, out, err = _run([sys.executable, "-m", "app", "backend", "use", backend], env)
    if code != 0:
        raise SystemExit(f"kvstudio backend use {backend} failed: {err or out}")


def _one(pair: str, env: dict[str, str]) -> dict[str, Any]:
    run = [sys.executable, "-m", "app", "run", "starter", "-p", PROMPT, "-n", str(TOKENS)]
    run += ["--kv", pair, "--temp", "0", "--ctx", str(CTX), "--json"]
    # The machine may be shared: the 1-minute load average around each step goes on record.
    result: dict[str, Any] = {"load_before": round(os.getloadavg()[0], 2)}
    result["run"] = _json_or_error(*_run(run, env))
    code, out, err = _run([sys.executable, __file__, "probe", "--kv", pair], env)
    result["probe"] = _json_or_error(code, out, err)
    result["load_after"] = round(os.getloadavg()[0], 2)
    return result


def _full_names(counts: dict[str, int], names: list[str]) -> dict[str, int]:
    """Device names as ggml's scheduler log cuts them ("Vulka") made whole ("Vulkan0")."""
    out: dict[str, int] = {}
    for cut, n in counts.items():
        whole = next((name for name in names if name.startswith(cut)), cut)
        out[whole] = out.get(whole, 0) + n
    return out


def _first_difference(a: list[int], b: list[int]) -> int | None:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)


def _summary(pair: str, vk: dict[str, Any], cpu: dict[str, Any]) -> dict[str, Any]:
    run, probe_ = vk["run"], vk["probe"]
    runs = "error" not in run and run.get("generated_tokens", 0) > 0
    layers = probe_.get("layers", {})
    names = [*layers, "CPU"]
    fa_nodes = _full_names(probe_.get("flash_attn_nodes", {}), names)
    warnings = list(dict.fromkeys([w["text"] for w in run.get("warnings", [])]))
    warnings += [w for w in probe_.get("warnings", []) if w not in warnings]
    fa_disabled = any("disabl" in w.lower() or "forcing off" in w for w in warnings)
    mine, theirs = probe_.get("argmax", {}), cpu["probe"].get("argmax", {})
    differ = _first_difference(mine.get("tokens", []), theirs.get("tokens", []))
    return {
        "kv": pair,
        "runs": runs,
        "error": run.get("error") or probe_.get("error"),
        "layers": layers,
        "kv_cache_buffers": sorted({d for c in run.get("kv_caches", []) for d in c["devices"]}),
        "compute_buffers": [b["device"] for b in run.get("compute_buffers", [])],
        "flash_attention": "off" if fa_disabled or not fa_nodes else "on",
        "flash_attention_devices": sorted(fa_nodes),
        "flash_attn_nodes": fa_nodes,
        "graph_nodes": _full_names(probe_.get("graph_nodes", {}), names),
        "cpu_ops": probe_.get("cpu_ops", {}),
        "k_type": sorted({c["k_type"] for c in run.get("kv_caches", [])}),
        "v_type": sorted({c["v_type"] for c in run.get("kv_caches", [])}),
        "warnings": warnings,
        "tokens_per_second": run.get("tokens_per_second"),
        "time_to_first_token_s": run.get("time_to_first_token_s"),
        "warm_decode_tokens_per_second": probe_.get("warm_decode_tokens_per_second"),
        "cpu_tokens_per_second": cpu["run"].get("tokens_per_second"),
        "cpu_time_to_first_token_s": cpu["run"].get("time_to_first_token_s"),
        "cpu_warm_decode_tokens_per_second": cpu["probe"].get("warm_decode_tokens_per_second"),
        "text": run.get("text"),
        "cpu_text": cpu["run"].get("text"),
        "text_matches_cpu": runs and run.get("text") == cpu["run"].get("text"),
        "argmax_text": mine.get("text"),
        "cpu_argmax_text": theirs.get("text"),
        "argmax_matches_cpu": bool(mine.get("tokens")) and differ is None,
        "argmax_first_difference": differ,
        "top2_gap_there": None
        if differ is None
        else {"vulkan": mine["top2_gaps"][differ], "cpu": theirs["top2_gaps"][differ]},
        "log": probe_.get("log", []),
        "load_average": [vk["load_before"], vk["load_after"]],
        "cpu_load_average": [cpu["load_before"], cpu["load_after"]],
    }


def _host() -> dict[str, Any]:
    def cmd(argv: list[str]) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, check=False).stdout
        except OSError:
            return ""

    summary = cmd(["vulkaninfo", "--summary"])
    device = {
        k: v.strip()
        for k, v in re.findall(
            r"^\s*(deviceName|deviceType|driverInfo|apiVersion)\s*=(.*)$", summary, re.M
        )
    }
    limit = re.search(r"maxStorageBufferRange\s*=\s*(\d+)", cmd(["vulkaninfo"]))
    if limit:
        device["maxStorageBufferRange"] = limit.group(1)
    versions = cmd(
        [
            "dpkg-query",
            "-W",
            "-f",
            "${Package} ${Version}\n",
            "glslc",
            "libvulkan-dev",
            "libvulkan1",
            "mesa-vulkan-drivers",
            "spirv-headers",
            "vulkan-tools",
        ]
    )
    return {
        "os": "Debian " + Path("/etc/debian_version").read_text().strip()
        if Path("/etc/debian_version").exists()
        else platform.platform(),
        "cpu_cores": os.cpu_count(),
        "vulkan_device": device,
        "packages": dict(line.split(" ", 1) for line in versions.splitlines() if " " in line),
    }


def record(
    package: Path, json_path: Path, md_path: Path, build_seconds: float | None, build_story: str
) -> dict[str, Any]:
    env = dict(os.environ)
    env.setdefault("GGML_VK_VISIBLE_DEVICES", "0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    manifest = json.loads((package / "manifest.json").read_text())
    archives = list(package.parent.glob(f"kvstudio-backend-{manifest['name']}-*.tar.gz"))
    headers = Path(os.environ.get("KVSTUDIO_VULKAN_HEADERS_SOURCE", "-"))
    per: dict[str, dict[str, dict[str, Any]]] = {}
    for backend in ("built-in", manifest["name"]):
        _use(backend, env)
        per[backend] = {pair: _one(pair, env) for pair in PAIRS}
    verify = _run(
        [sys.executable, "-m", "kernels", "verify", "starter", "--kv", "q8_0/f16", "--json"], env
    )
    backend_verify = _run([sys.executable, "-m", "app", "backend", "verify"], env)
    # The same package without GGML_VK_VISIBLE_DEVICES: what a user gets by default.
    plain = {k: v for k, v in env.items() if k != "GGML_VK_VISIBLE_DEVICES"}
    argv = [sys.executable, "-m", "app", "run", "starter", "-p", PROMPT, "-n", "4", "--temp", "0"]
    default = _json_or_error(*_run([*argv, "--kv", "q8_0/f16", "--json"], plain))
    data = {
        "what": "llama.cpp's Vulkan backend on Mesa lavapipe (software Vulkan on the CPU), "
        "starter model (Gemma 3 270M Q4_K_M), greedy decoding, Flash Attention asked on",
        "date": time.strftime("%Y-%m-%d"),
        "host": _host(),
        "env": {"GGML_VK_VISIBLE_DEVICES": env["GGML_VK_VISIBLE_DEVICES"]},
        "build": {
            "variant": manifest["name"],
            "seconds": manifest["build"]["seconds"],  # the last package run (cached: relink)
            "wall_seconds": build_seconds,  # every attempt until the package existed
            "story": build_story,
            "cores": manifest["build"]["cores"],
            "note": manifest["build"].get("note", ""),
            "cmake_args": manifest["cmake_args"],
            "vulkan_headers": headers.read_text().split() if headers.is_file() else [],
            "files": {k: v["size"] for k, v in manifest["files"].items()},
            "package_bytes": sum(v["size"] for v in manifest["files"].values()),
            "archive": archives[0].name if archives else None,
            "archive_bytes": archives[0].stat().st_size if archives else None,
        },
        "run": {"prompt": PROMPT, "max_tokens": TOKENS, "n_ctx": CTX, "gpu_layers": -1},
        "pairs": [_summary(p, per[manifest["name"]][p], per["built-in"][p]) for p in PAIRS],
        "kernels_verify": {"exit": verify[0], **_json_or_error(0, verify[1], verify[2])},
        "backend_verify": {"exit": backend_verify[0], "lines": backend_verify[1].splitlines()},
        "without_visible_devices": {
            "kv_cache_buffers": sorted(
                {d for c in default.get("kv_caches", []) for d in c["devices"]}
            ),
            "compute_buffers": [b["device"] for b in default.get("compute_buffers", [])],
            "warnings": [w["text"] for w in default.get("warnings", [])],
            "tokens_per_second": default.get("tokens_per_second"),
            "error": default.get("error"),
        },
        "raw": per,
    }
    json_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    md_path.write_text(render(data), encoding="utf-8")
    return data


def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**20:.1f} MiB"


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s ({seconds / 60:.0f} min)"


def _num(x: float | None) -> str:
    return "?" if x is None else f"{x:.2f}"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _default_sentence(plain: dict[str, Any] | None) -> str:
    if not plain:
        return ""
    if plain.get("error"):
        return f"Without it, `kvstudio run` failed: {plain['error']}"
    where = ", ".join(plain["kv_cache_buffers"]) or "?"
    said = "; ".join(plain["warnings"]) or "no warning"
    return (
        f"Without it the same package runs on the CPU alone (KV cache in {where}, compute "
        f"buffers {', '.join(plain['compute_buffers']) or '?'}) with {said}."
    )


def _short(pairs: list[dict[str, Any]]) -> list[str]:
    """The findings in sentences, from the record (so they stay true to it)."""
    kvs = [p["kv"] for p in pairs]
    ran = [p["kv"] for p in pairs if p["runs"]]
    on_vulkan = [
        p["kv"]
        for p in pairs
        if p["runs"]
        and set(p["layers"]) == {"Vulkan0"}
        and p["kv_cache_buffers"] == ["Vulkan0"]
        and p["flash_attention_devices"] == ["Vulkan0"]
    ]
    fa_on = [p["kv"] for p in pairs if p["flash_attention"] == "on"]
    warned = [p["kv"] for p in pairs if p["warnings"]]
    same = [p["kv"] for p in pairs if p["text_matches_cpu"]]
    same_argmax = [p["kv"] for p in pairs if p["argmax_matches_cpu"]]
    ratios = [
        p["cpu_tokens_per_second"] / p["tokens_per_second"]
        for p in pairs
        if p["tokens_per_second"] and p["cpu_tokens_per_second"]
    ]

    def which(names: list[str]) -> str:
        return "all three" if names == kvs else (", ".join(names) or "none")

    return [
        f"- Runs on lavapipe: {which(ran)}; every layer, the KV cache and Flash Attention on "
        f"Vulkan0: {which(on_vulkan)}.",
        f"- Flash Attention stays on: {which(fa_on)}. K/V pairs converted to f16 or moved to "
        f"the CPU, FA disabled: {'see the warnings below' if warned else 'none (no warning)'}.",
        f"- Greedy text equal to the CPU backend's: engine run {which(same)}; plain argmax "
        f"{which(same_argmax)}.",
        "- Speed: the CPU backend decodes "
        + (f"{min(ratios):.0f} to {max(ratios):.0f}" if ratios else "?")
        + " times faster than lavapipe on the same cores: lavapipe proves the code path, not "
        "speed.",
    ]


def render(data: dict[str, Any]) -> str:
    b, host, dev = data["build"], data["host"], data["host"]["vulkan_device"]
    pairs = data["pairs"]
    placement = [
        "| K/V | runs | layers | KV cache (K, V) in | Flash Attention | FA nodes | other nodes "
        "on CPU | warnings |",
        "|---|---|---|---|---|---|---|---|",
    ]
    speed = [
        "| K/V | tokens/s Vulkan (CPU backend) | first token s Vulkan (CPU) | warm decode tokens/s "
        "Vulkan (CPU) | engine text = CPU's | argmax = CPU's |",
        "|---|---|---|---|---|---|",
    ]
    for p in pairs:
        layers = ", ".join(f"{n} on {d}" for d, n in p["layers"].items()) or "-"
        fa_nodes = ", ".join(f"{n} on {d}" for d, n in p["flash_attn_nodes"].items()) or "none"
        cpu_ops = ", ".join(f"{op} {n}" for op, n in p["cpu_ops"].items()) or "none"
        kv_in = f"{', '.join(p['kv_cache_buffers']) or '-'} ({'/'.join(p['k_type'] + p['v_type'])})"
        placement.append(
            f"| {p['kv']} | {_yes(p['runs'])} | {layers} | {kv_in} | {p['flash_attention']} | "
            f"{fa_nodes} | {cpu_ops} | {len(p['warnings'])} |"
        )
        argmax = _yes(p["argmax_matches_cpu"])
        if p["argmax_first_difference"] is not None:
            gap = p["top2_gap_there"]
            argmax += (
                f" (from token {p['argmax_first_difference'] + 1}; top-2 logit gap there: "
                f"Vulkan {gap['vulkan']}, CPU {gap['cpu']})"
            )
        speed.append(
            f"| {p['kv']} | {p['tokens_per_second']} ({p['cpu_tokens_per_second']}) | "
            f"{_num(p['time_to_first_token_s'])} ({_num(p['cpu_time_to_first_token_s'])}) | "
            f"{p['warm_decode_tokens_per_second']} ({p['cpu_warm_decode_tokens_per_second']}) | "
            f"{_yes(p['text_matches_cpu'])} | {argmax} |"
        )
    texts = []
    for p in pairs:
        texts.append(f"- {p['kv']} engine: Vulkan `{p['text']!r}`, CPU `{p['cpu_text']!r}`")
        texts.append(
            f"- {p['kv']} argmax: Vulkan `{p['argmax_text']!r}`, CPU `{p['cpu_argmax_text']!r}`"
        )
    warn = [f"- {p['kv']}: {w}" for p in pairs for w in p["warnings"]] or ["- none"]
    kv = data["kernels_verify"]
    v = b["vulkan_headers"]  # the .deb, its sha256, "#define VK_HEADER_VERSION N"
    headers = f"{v[0]} (VK_HEADER_VERSION {v[-1]})" if v else "the system's libvulkan-dev"
    run = data["run"]
    device_line = next((x for p in pairs for x in p["log"] if x.startswith("ggml_vulkan: 0 =")), "")
    return "\n".join(
        [
            "# Vulkan backend on lavapipe (software Vulkan)",
            "",
            f"Recorded {data['date']} by `scripts/vulkan_lavapipe_run.sh`; every number is in "
            "`docs/vulkan-lavapipe.json`. This is the first GPU-backend code path that runs on "
            "the project's CPU-only machines: llama.cpp's Vulkan backend on Mesa's lavapipe "
            "driver, a Vulkan device that is really the CPU. Its speeds say nothing about a GPU.",
            "",
            f"- Host: {host['os']}, {host['cpu_cores']} CPU cores, no GPU. Vulkan device: "
            f"{dev.get('deviceName', '?')}, {dev.get('driverInfo', '?')}, Vulkan "
            f"{dev.get('apiVersion', '?')}, {dev.get('deviceType', '?')}.",
            f"- Package: `{b['archive']}`, {_mib(b['archive_bytes'])} packed, "
            f"{_mib(b['package_bytes'])} unpacked ({len(b['files'])} files, libggml-vulkan.so "
            f"{_mib(b['files'].get('libggml-vulkan.so'))}). Built on this host with "
            f"{b['cores']} jobs in {_minutes(b.get('wall_seconds') or b['seconds'])}, against "
            f"Vulkan headers from {headers}. {b.get('story', '')}".rstrip(),
            "- lavapipe is a CPU-type Vulkan device, which ggml-vulkan skips unless "
            f"`GGML_VK_VISIBLE_DEVICES` names it (`{data['env']['GGML_VK_VISIBLE_DEVICES']}` "
            f"here). {_default_sentence(data.get('without_visible_devices'))}",
            f"- Engine run: `kvstudio run starter -p {run['prompt']!r} -n {run['max_tokens']} "
            f"--kv K/V --temp 0` (ctx {run['n_ctx']}, every layer offloaded, Flash Attention on, "
            "the engine's repeat penalty 1.1). Probe: the same load in one process, with "
            "llama.cpp's log and GGML_SCHED_DEBUG=2 (the device of every graph node), then "
            f"{run['max_tokens']} tokens by plain argmax, twice (the second pass is the warm "
            "decode speed, measured with that logging on).",
            "",
            "In short:",
            "",
            *_short(pairs),
            "",
            f"ggml-vulkan's view of the device: `{device_line}`. Debian 12's glslc (shaderc "
            "2023.2, glslang 11.13) has none of the optional shader extensions ggml-vulkan "
            "tests for (GL_EXT_integer_dot_product, GL_KHR_cooperative_matrix, "
            "GL_NV_cooperative_matrix2, GL_EXT_bfloat16, GL_EXT_float_e2m1/e4m3), so those "
            "paths are compiled out: 'int dot: 0' although lavapipe offers "
            "VK_KHR_shader_integer_dot_product.",
            "",
            "Where it ran:",
            "",
            *placement,
            "",
            *(
                [
                    "The nodes on the CPU: this model's output matrix is its token embedding "
                    "(tied; q8_0, 170 MiB). ggml-vulkan refuses an op on a tensor larger than the "
                    "device's maxStorageBufferRange, "
                    f"{_mib(int(dev.get('maxStorageBufferRange', 0)) or None)} on lavapipe, so "
                    "the matrix stays in CPU memory (the CPU_Mapped model buffer) and the "
                    "embedding lookup (GET_ROWS) and the output projection (MUL_MAT "
                    "result_output) run on the CPU backend, once per graph.",
                    "",
                ]
                if any("result_output" in op for p in pairs for op in p["cpu_ops"])
                else []
            ),
            "Speed and text:",
            "",
            *speed,
            "",
            f"The machine ({host['cpu_cores']} cores) was shared while this ran: 1-minute load "
            "average before/after each pair, Vulkan "
            + ", ".join(f"{p['kv']} {p['load_average']}" for p in pairs)
            + "; CPU backend "
            + ", ".join(f"{p['kv']} {p['cpu_load_average']}" for p in pairs)
            + ". Above 2, other work took CPU time from these runs.",
            "",
            "Generated text:",
            "",
            *texts,
            "",
            "Warnings llama.cpp logged (FA disabled, pair converted, attention on the CPU):",
            "",
            *warn,
            "",
            f"`python -m kernels verify starter --kv q8_0/f16 --json` on the Vulkan backend: exit "
            f"{kv['exit']}, ok {kv.get('ok')}, on_gpu {kv.get('on_gpu')}, verified "
            f"{kv.get('verified')}, KV cache in {', '.join(kv.get('kv_devices', [])) or '?'}, "
            f"backends reported {kv.get('backends')}.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("probe")
    p.add_argument("--kv", required=True)
    for name in ("record", "render"):
        s = sub.add_parser(name)
        s.add_argument("--json", type=Path, default=DEFAULT_JSON)
        s.add_argument("--md", type=Path, default=DEFAULT_MD)
        if name == "record":
            s.add_argument("--package", type=Path, required=True, help="the built package folder")
            s.add_argument("--build-seconds", type=float, help="the whole build's wall time")
            s.add_argument("--build-story", default="", help="a sentence on how it was built")
    args = parser.parse_args(argv)
    if args.command == "probe":
        print(json.dumps(probe(args.kv)))
    elif args.command == "record":
        data = record(args.package, args.json, args.md, args.build_seconds, args.build_story)
        print(render(data))
    else:
        args.md.write_text(render(json.loads(args.json.read_text())), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
