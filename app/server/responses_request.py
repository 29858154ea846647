"""OpenAI's Responses API request (POST /v1/responses), its text subset, checked and made the
chat request it asks for: `instructions` becomes the system message, `input` the turns,
`max_output_tokens` the token limit; openai_request.parse_chat does the rest.

Served: model, input (a string, or messages whose content is a string or input_text /
output_text parts), instructions, max_output_tokens, temperature, top_p, stream, user, and
at the values that ask for nothing, store (false) and text ({"format": {"type": "text"}}).
No response is kept, so previous_response_id, tools and the rest are a 400 that names them.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.server.openai_request import ApiError, ParsedRequest, check_served_fields, parse_chat

RESPONSES_FIELDS = frozenset(
    {"model", "input", "instructions", "max_output_tokens", "temperature", "top_p"}
    | {"stream", "user", "text"}
)
ITEM_FIELDS = frozenset({"type", "role", "content"})
PART_FIELDS = frozenset({"type", "text", "annotations"})
ROLES = ("user", "assistant", "system", "developer")


def parse_response_request(body: object, request_id: str, max_tokens_limit: int) -> ParsedRequest:
    """The chat request a Responses body asks for; ApiError(400) naming what cannot be served."""
    if not isinstance(body, dict):
        raise _invalid("The request body must be a JSON object.", None)
    check_served_fields(body, RESPONSES_FIELDS, "", " on /v1/responses")
    _text_format(body.get("text"))
    given = body.get("input")
    if given is None:
        raise _invalid("Missing required parameter: 'input'.", "input")
    messages: list[dict[str, object]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise _invalid("'instructions' must be a string.", "instructions")
        messages.append({"role": "system", "content": instructions})
    if isinstance(given, str):
        messages.append({"role": "user", "content": given})
    elif isinstance(given, list) and given:
        messages += [_item(item, index) for index, item in enumerate(given)]
    else:
        raise _invalid("'input' must be a string or a non-empty array of messages.", "input")
    chat: dict[str, object] = {"model": body.get("model"), "messages": messages}
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    chat.update({k: body[k] for k in ("temperature", "top_p", "stream", "user") if k in body})
    try:
        return parse_chat(chat, request_id, max_tokens_limit)
    except ApiError as error:
        if error.param == "max_tokens":  # said in this API's words
            error.param = "max_output_tokens"
            error.message = error.message.replace("'max_tokens'", "'max_output_tokens'")
        raise


def _item(item: object, index: int) -> dict[str, object]:
    where = f"input[{index}]"
    fields = _object(item, where)
    if fields.get("type", "message") != "message":
        raise _invalid(
            f"'{where}.type' must be 'message': only messages are supported by this server.",
            f"{where}.type",
        )
    check_served_fields(fields, ITEM_FIELDS, f"{where}.", " on /v1/responses")
    role = fields.get("role")
    if role not in ROLES:
        raise _invalid(f"'{where}.role' must be one of {', '.join(ROLES)}.", f"{where}.role")
    return {"role": role, "content": _content(fields.get("content"), f"{where}.content")}


def _content(content: object, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _invalid(f"'{where}' must be a string or an array of text parts.", where)
    texts = []
    for index, part in enumerate(content):
        at = f"{where}[{index}]"
        fields = _object(part, at)
        if fields.get("type") not in ("input_text", "output_text"):
            raise _invalid(
                f"'{at}.type' must be 'input_text' or 'output_text': only text is supported "
                "by this server.",
                f"{at}.type",
            )
        check_served_fields(fields, PART_FIELDS, f"{at}.", " on /v1/responses")
        text = fields.get("text")
        if not isinstance(text, str):
            raise _invalid(f"'{at}.text' must be a string.", f"{at}.text")
        texts.append(text)
    return "".join(texts)


def _text_format(value: object) -> None:
    """`text` is served only as plain text: {"format": {"type": "text"}}."""
    if value is None:
        return
    fields = _object(value, "text")
    check_served_fields(fields, frozenset({"format"}), "text.", " on /v1/responses")
    format_ = fields.get("format")
    if format_ is not None and format_ != {"type": "text"}:
        raise _invalid(
            '\'text.format\' may only be {"type": "text"} on this server\'s /v1/responses '
            "(JSON output is served on /v1/chat/completions as response_format).",
            "text.format",
        )


def _object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise _invalid(f"'{where}' must be an object.", where)
    return value


def _invalid(message: str, param: str | None) -> ApiError:
    return ApiError(400, message, param=param)
