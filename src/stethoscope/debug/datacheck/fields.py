"""What a row holds, whatever its schema: its text, the prompt and response when it has them, token
ids and labels, and which chat template's markers its text carries."""

from __future__ import annotations

import math
from typing import Any

# Row schemas in the order they are tried (the keys the common fine-tuning formats use).
_CHAT_KEYS = ("messages", "conversations", "conversation", "chat")
_PAIRS = (("prompt", ("completion", "response", "chosen", "answer", "output")),
          ("instruction", ("output", "response")), ("question", ("answer", "response")),
          ("input", ("output", "target")), ("query", ("response",)), ("source", ("target",)))
_TEXT_KEYS = ("text", "content", "document", "sentence", "body")
_ASSISTANT = {"assistant", "gpt", "model", "bot", "chatbot"}

# Chat-template families, each named by the markers that only it writes (first match wins).
TEMPLATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("chatml", ("<|im_start|>", "<|im_end|>")),                      # Qwen, Yi, many fine-tunes
    ("llama-3", ("<|start_header_id|>", "<|eot_id|>")),
    ("llama-2/mistral", ("[INST]", "[/INST]")),
    ("gemma", ("<start_of_turn>", "<end_of_turn>")),
    ("zephyr/phi-3", ("<|user|>", "<|assistant|>")),
    ("alpaca", ("### Instruction:", "### Response:")),
)
MESSAGES = "messages (no markers: the trainer applies its template)"
PLAIN = "none"

Example = tuple[str, "str | None", "str | None", "list | None", "list | None", bool]


def example(record: dict) -> Example:
    """(text, prompt, response, input_ids, labels, is_chat) of one row."""
    ids = record.get("input_ids")
    labels = record.get("labels")
    if labels is None:
        labels = record.get("label_ids")
    ids = ids if isinstance(ids, list) else None
    labels = labels if isinstance(labels, list) else None
    for key in _CHAT_KEYS:
        turns = record.get(key)
        if isinstance(turns, list):
            return (*_chat(turns), ids, labels, True)
    for prompt_key, response_keys in _PAIRS:
        prompt = record.get(prompt_key)
        if isinstance(prompt, str):
            for rk in response_keys:
                response = record.get(rk)
                if isinstance(response, str):
                    if prompt_key == "instruction" and isinstance(record.get("input"), str) and record["input"]:
                        prompt = prompt + "\n" + record["input"]
                    return prompt + "\n" + response, prompt, response, ids, labels, False
    for key in _TEXT_KEYS:
        text = record.get(key)
        if isinstance(text, str):
            return text, None, None, ids, labels, False
    strings = [v for v in record.values() if isinstance(v, str)]
    return "\n".join(strings), None, None, ids, labels, False


def _chat(turns: list) -> tuple[str, str, str | None]:
    """(all text, prompt: every turn but the assistant's, response: the assistant's turns or None)."""
    prompt, response = [], []
    for turn in turns:
        if not isinstance(turn, dict):
            continue
        role = turn.get("role", turn.get("from", ""))
        content = _content(turn.get("content", turn.get("value")))
        (response if role in _ASSISTANT else prompt).append(content)
    prompt_text = "\n".join(prompt)
    response_text = "\n".join(response) if response else None
    return (prompt_text + "\n" + response_text if response else prompt_text), prompt_text, response_text


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts: [{"type": "text", "text": ...}, {"type": "image"}]
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "" if content is None else str(content)


def template(text: str, is_chat: bool) -> str:
    """The chat-template family whose markers `text` carries; MESSAGES or PLAIN when none."""
    if not text or ("<" not in text and "[INST]" not in text and "###" not in text):  # fast for most text
        return MESSAGES if is_chat else PLAIN
    for name, markers in TEMPLATES:
        for marker in markers:
            if marker in text:
                return name
    return MESSAGES if is_chat else PLAIN


_NONFINITE_TEXT = frozenset(("nan", "-nan", "+nan", "inf", "-inf", "+inf", "infinity", "-infinity", "+infinity"))


def nonfinite_field(record: dict, strings_too: bool = False) -> str | None:
    """The first field holding NaN or ±Inf (in a float, a list of floats, or, for CSV, a cell's text)."""
    for key, value in record.items():
        if _has_nonfinite(value, strings_too):
            return str(key)
    return None


def _has_nonfinite(value: Any, strings_too: bool) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, str):
        return strings_too and len(value) <= 9 and value.strip().lower() in _NONFINITE_TEXT
    if isinstance(value, list):
        return bool(value) and not isinstance(value[0], (int, str)) and any(_has_nonfinite(v, False) for v in value)
    if isinstance(value, dict):
        return any(_has_nonfinite(v, strings_too) for v in value.values())
    return False
