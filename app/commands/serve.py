"""`kvstudio serve MODEL`: the OpenAI-compatible server on one engine, until Ctrl+C."""

from __future__ import annotations

import argparse
import sys

from app.commands.model_load import add_rpc_argument, checked_load_options
from app.engine.messages import Load
from app.engine.process import EngineProcess, until
from app.kv.kv_types import DEFAULT_KV_MODE
from app.platform.errors import BadInputError
from app.server.allowed_hosts import check_allowed_hosts
from app.server.options import DEFAULT_PORT, LOOPBACK, ServerOptions, check_options
from app.server.process_gateway import ProcessGateway
from app.server.server_runner import LocalServer, bind

INTERRUPTED_EXIT = 130
LOAD_TIMEOUT_S = 600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="a .gguf file or the word 'starter'")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--host",
        default=LOOPBACK,
        help=f"address to listen on (default {LOOPBACK}; any other needs --api-key)",
    )
    parser.add_argument(
        "--api-key", default="", help="the key clients must send (Authorization: Bearer KEY)"
    )
    parser.add_argument(
        "--ctx", type=int, default=4096, help="context size in tokens (default 4096)"
    )
    parser.add_argument(
        "--kv",
        default=DEFAULT_KV_MODE.label,
        help=f"KV cache types K/V (default {DEFAULT_KV_MODE.label})",
    )
    parser.add_argument(
        "--max-tokens", type=int, default=4096, help="the most tokens one request may ask for"
    )
    parser.add_argument(
        "--cors", action="append", default=[], metavar="ORIGIN", help="allow this browser origin"
    )
    parser.add_argument(
        "--allowed-hosts",
        nargs="+",
        default=[],
        metavar="NAME",
        help="also answer requests for these host names (default: only this machine's: "
        "localhost, 127.0.0.1, ::1, --host); * for any",
    )
    parser.add_argument(
        "--log-requests",
        action="store_true",
        help="also log the start of each prompt (never the key)",
    )
    parser.add_argument(
        "--allow-chat-on-base-model",
        action="store_true",
        help="answer /v1/chat/completions on a base model too (refused by default: it "
        "continues text rather than answering; use /v1/completions)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: llama.cpp's)"
    )
    parser.add_argument(
        "--gpu-layers", type=int, default=-1, help="layers on the GPU (-1: all; 0: none)"
    )
    add_rpc_argument(parser)
    parser.add_argument(
        "--force",
        action="store_true",
        help="load even beyond the trained context or the free memory the device reports",
    )


def run(args: argparse.Namespace) -> int:
    # Every bad input is refused here, before an engine process is spawned.
    options = ServerOptions(
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        max_tokens_limit=args.max_tokens,
        cors_origins=tuple(args.cors),
        allowed_hosts=tuple(args.allowed_hosts),
        log_prompts=args.log_requests,
        allow_chat_on_base_model=args.allow_chat_on_base_model,
    )
    check_options(options)
    check_allowed_hosts(options.allowed_hosts)
    if args.max_tokens <= 0:
        raise BadInputError(f"--max-tokens must be positive, not {args.max_tokens}.")
    load, mode = checked_load_options(args)

    sock = bind(options)  # a port in use is said before the model loads
    proc = EngineProcess()
    gateway = None
    server = None
    interrupted = False
    try:
        proc.send(Load(load))
        loaded = until(proc, "Loaded", LOAD_TIMEOUT_S)
        for warning in loaded.warnings:
            print(f"kvstudio: warning: {warning.text}", file=sys.stderr)
        gateway = ProcessGateway(proc, loaded)
        server = LocalServer(gateway, options, sock=sock)
        server.requests.listen(lambda record: print(record.line(), file=sys.stderr, flush=True))
        model = gateway.model()
        assert model is not None
        print(f"Serving {model.id} (KV {mode.label}) at {server.base_url}", flush=True)
        print("Press Ctrl+C to stop.", file=sys.stderr, flush=True)
        server.serve()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if gateway is not None:
            gateway.close()
        proc.stop()
        sock.close()
    if server is not None:
        print(f"kvstudio: stopped; {server.requests.summary()}.", file=sys.stderr)
    return INTERRUPTED_EXIT if interrupted else 0
