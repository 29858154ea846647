"""Add our cases to a llama.cpp source tree's test-backend-ops (issues 15 and 26; run by
scripts/fa_kernel_tune.sh on a GPU machine, never on the sources the app builds from).

    python scripts/fa_tune_source.py LLAMA_CPP_DIR perf-cases
        adds Llama-3-8B decode and prompt shapes (128-wide heads, 32 query heads over 8 KV heads)
        at several depths to test-backend-ops' perf list, for f16/f16, q8_0/f16 and q8_0/q8_0;
        decode with 64-wide heads and with Gemma 3's 256-wide ones (16 query heads over 8 KV
        heads as in Gemma 3 12B, 4 over 1 as in the starter) at depths 4k-128k

    python scripts/fa_tune_source.py LLAMA_CPP_DIR eval-cases
        adds correctness cases for the pair users run: llama.cpp's own list checks an 8-bit K
        only with V of the same type and, for one token, only with 64- and 72-wide heads, so
        the kernels of patches 0003/0004 (128- and 256-wide heads, heads per block) were not in
        it. K=q8_0 with V f16 or q8_0, heads of 64/128/256, GQA 1-8, batches of 1-32 tokens
        (1 and 2 take the vector kernel, more the prompt kernels), KV lengths 113-32768, masks,
        sinks, softcap, ALiBi

Both are idempotent (a marker comment). The kernel edits live in kernels/patches.
"""

from __future__ import annotations

import sys
from pathlib import Path

MARK = "// kvstudio-tune"
EVAL_MARK = "// kvstudio-eval"
DEPTHS = (4096, 16384, 32768, 131072)
PAIRS = (("F16", "F16"), ("Q8_0", "F16"), ("Q8_0", "Q8_0"))
# (head size, KV heads, Q heads per KV head, depth) of the decode shapes beside Llama-3-8B's.
OTHER_DECODE = [(64, 8, 4, kv) for kv in (4096, 32768, 131072)]
OTHER_DECODE += [(256, 8, 4, 32768)]  # the shape of runs 6-9
OTHER_DECODE += [(256, 8, 2, kv) for kv in (4096, 32768, 131072)]  # Gemma 3 12B
OTHER_DECODE += [(256, 1, 4, kv) for kv in (32768, 131072)]  # Gemma 3 270M/1B, the starter
# Llama 3 at 48k and 64k: between 32k, where a third block a SM costs (kernel-log H), and 131k,
# where it pays (kernel-log K: it pays from 48k on).
OTHER_DECODE += [(128, 8, 4, kv) for kv in (49152, 65536)]


def _case(
    head: int, nh: int, nr2: int, kv: int, nb: int, k: str, v: str, extra: str = "", tail: str = ""
) -> str:
    """One test_flash_attn_ext; `extra` replaces mask .. prec, `tail` adds permute, kv_view,
    v_is_view_of_k and n_kv_max after the types."""
    rest = extra or "true, false, 0, 0, GGML_PREC_F32"
    after = f", {tail}" if tail else ""
    return (
        f"    test_cases.emplace_back(new test_flash_attn_ext({head}, {head}, {nh}, {{{nr2}, 1}}, "
        f"{kv}, {nb}, {rest}, GGML_TYPE_{k}, GGML_TYPE_{v}{after}));"
    )


def _insert_after(path: Path, head: str, lines: list[str], mark: str) -> None:
    text = path.read_text()
    if mark in text:
        return
    if head not in text:
        raise SystemExit(f"{path}: {head.splitlines()[0]} not found")
    block = "\n".join(f"{line} {mark}" for line in lines)
    path.write_text(text.replace(head, head + block + "\n", 1))


def perf_cases() -> list[str]:
    shapes = [(128, 8, 4, kv, nb) for kv in DEPTHS for nb in (1, 512)]
    shapes += [(head, nh, nr2, kv, 1) for head, nh, nr2, kv in OTHER_DECODE]
    return [_case(*shape, k, v) for shape in shapes for k, v in PAIRS]


def eval_cases() -> list[str]:
    cases = []
    for head in (64, 128, 256):
        for v in ("F16", "Q8_0"):
            for nr2 in (1, 2, 4, 8):
                for nb in (1, 2, 3, 8, 32):
                    for kv in (512, 1024):
                        for sinks in ("false", "true"):
                            rest = f"true, {sinks}, 0, 0, GGML_PREC_F32"
                            cases.append(_case(head, 2, nr2, kv, nb, "Q8_0", v, rest))
                    # ALiBi (one head per block), and softcap where llama.cpp compiles it.
                    cases.append(
                        _case(
                            head, 2, nr2, 512, nb, "Q8_0", v, "true, false, 8.0f, 0, GGML_PREC_F32"
                        )
                    )
                    if head != 64:
                        cases.append(
                            _case(
                                head,
                                2,
                                nr2,
                                512,
                                nb,
                                "Q8_0",
                                v,
                                "true, false, 0, 10.0f, GGML_PREC_F32",
                            )
                        )
                # A KV length that is not a multiple of 256 takes the other kernels.
                cases.append(_case(head, 2, nr2, 113, 1, "Q8_0", v))
            # 64-wide heads share a block only from 32768 cells of KV on (patch 0004).
            for nr2 in (2, 4):
                cases.append(_case(head, 2, nr2, 32768, 1, "Q8_0", v))
            # 128-wide heads, 4 a block: past the 3-blocks-a-SM kernel's threshold (kernel-log K).
            if head == 128:
                cases.append(_case(head, 2, 4, 65536, 1, "Q8_0", v))
            # The prompt kernel reading a q8_0 K in place (patch 0005): a whole 512-token batch
            # over 4,096 cells, K as a permuted view, and the MMA kernel's sparse index lists
            # (256-wide heads, GQA 8, n_kv_max set; one and eight queries per list).
            for nr2 in (1, 4):
                cases.append(_case(head, 2, nr2, 4096, 512, "Q8_0", v))
            cases.append(_case(head, 2, 4, 512, 32, "Q8_0", v, tail="{0, 2, 1, 3}"))
            if head == 256:
                for kv, nb in ((4096, 3), (8192, 64)):
                    sparse = "{0, 1, 2, 3}, true, false, 512"
                    cases.append(_case(head, 1, 8, kv, nb, "Q8_0", v, tail=sparse))
    return cases


def add_perf_cases(root: Path) -> None:
    head = (
        "static std::vector<std::unique_ptr<test_case>> make_test_cases_perf() {\n"
        "    std::vector<std::unique_ptr<test_case>> test_cases;\n"
    )
    _insert_after(root / "tests" / "test-backend-ops.cpp", head, perf_cases(), MARK)


def add_eval_cases(root: Path) -> None:
    head = (
        "static std::vector<std::unique_ptr<test_case>> make_test_cases_eval() {\n"
        "    std::vector<std::unique_ptr<test_case>> test_cases;\n"
    )
    _insert_after(root / "tests" / "test-backend-ops.cpp", head, eval_cases(), EVAL_MARK)


def main(argv: list[str]) -> int:
    commands = {"perf-cases": add_perf_cases, "eval-cases": add_eval_cases}
    if len(argv) != 2 or argv[1] not in commands:
        raise SystemExit(__doc__)
    commands[argv[1]](Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
