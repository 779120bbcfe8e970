"""A loaded GGUF model on llama.cpp's low-level API: weights, vocabulary, tokenizer and chat template."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from backends.base import BackendError, ChatMessage, ModelFileError, Prompt
from backends.llama.models.gguf import read_gguf_header
from backends.llama.models.prompt_formats import PromptFormat, prompt_format

log = logging.getLogger(__name__)

@functools.lru_cache(maxsize=1)
def llama_lib() -> Any:
    """The llama_cpp module with its backend initialised once per process and llama.cpp's chatter quietened."""
    import llama_cpp

    _quiet_llama_log(llama_cpp)
    llama_cpp.llama_backend_init()
    return llama_cpp


_LOG_CALLBACK: Any = None  # keeps the ctypes callback alive for the process lifetime
LOAD_PROGRESS: list[Callable[[], None]] = []
"""Called as llama.cpp reports loading progress (the engine worker's beat carries it: a load that stops moving is
ended by the studio's load-stall rule)."""
_CAPTURE = threading.local()


@contextlib.contextmanager
def capture_native_log() -> Iterator[list[str]]:
    """Collect llama.cpp's log lines emitted on this thread (to learn what it decided, e.g. flash attention)."""
    llama_lib()
    _CAPTURE.lines = []
    try:
        yield _CAPTURE.lines
    finally:
        _CAPTURE.lines = None


def _quiet_llama_log(llama_cpp: Any) -> None:
    """Route llama.cpp's log to Python logging (warnings and errors only) instead of stderr."""
    global _LOG_CALLBACK
    levels = {3: logging.WARNING, 4: logging.ERROR}  # ggml: 1 debug, 2 info, 3 warn, 4 error
    native = logging.getLogger("llama_cpp.native")

    def forward(level: int, text: bytes, _user: Any) -> None:
        sink = getattr(_CAPTURE, "lines", None)
        if sink is not None and text:
            sink.append(text.decode(errors="replace"))
        py_level = levels.get(level)
        if py_level is not None and text:
            native.log(py_level, "%s", text.decode(errors="replace").rstrip())

    _LOG_CALLBACK = llama_cpp.llama_log_callback(forward)
    llama_cpp.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))


def _progress_callback(lib: Any) -> Any:
    """A ctypes progress callback telling LOAD_PROGRESS's listeners (None when there are none)."""
    if not LOAD_PROGRESS:
        return None

    def moved(_progress: float, _user: Any) -> bool:
        for listener in LOAD_PROGRESS:
            listener()
        return True

    callback = lib.llama_progress_callback(moved)
    _KEEP.append(callback)  # alive as long as llama.cpp may call it
    return callback


_KEEP: list[Any] = []


class LlamaModel:
    """Model weights and tokenizer; thread-safe for tokenizing and rendering (the context lives in the engine)."""

    def __init__(self, path: str | Path, n_gpu_layers: int = 0) -> None:
        self.path = Path(path).expanduser().resolve()
        self.header = read_gguf_header(self.path)  # clear ModelFileError before llama.cpp sees the file
        lib = llama_lib()
        self._lib = lib
        params = lib.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers
        progress = _progress_callback(lib)
        if progress is not None:
            params.progress_callback = progress
        self.ptr = lib.llama_model_load_from_file(str(self.path).encode(), params)
        if not self.ptr:
            arch = self.header.metadata.get("general.architecture", "unknown")
            raise ModelFileError(
                f"llama.cpp could not load model file {self.path} (architecture {arch!r}). The file may be "
                "damaged, or this llama-cpp-python build may not support the architecture: upgrade it."
            )
        self.vocab = lib.llama_model_get_vocab(self.ptr)
        self.n_vocab = int(lib.llama_vocab_n_tokens(self.vocab))
        self.n_ctx_train = int(lib.llama_model_n_ctx_train(self.ptr))
        self.add_bos = bool(lib.llama_vocab_get_add_bos(self.vocab))
        self.bos_id = int(lib.llama_vocab_bos(self.vocab))
        self.eos_id = int(lib.llama_vocab_eos(self.vocab))
        self.size_bytes = int(lib.llama_model_size(self.ptr))
        self.n_params = int(lib.llama_model_n_params(self.ptr))
        self.n_layer = int(lib.llama_model_n_layer(self.ptr))
        self.n_embd = int(lib.llama_model_n_embd(self.ptr))
        self._pieces: dict[int, bytes] = {}
        self._pieces_lock = threading.Lock()
        self.bos_text = self._token_text(self.bos_id)
        self.eos_text = self._token_text(self.eos_id)
        template = lib.llama_model_chat_template(self.ptr, None)
        self.chat_template: str | None = template.decode("utf-8", errors="replace") if template else None
        metadata = dict(self.header.metadata)
        if self.chat_template:  # what llama.cpp reads is the word (a template named by the file, or its own)
            metadata["tokenizer.chat_template"] = self.chat_template
        self.prompt_format: PromptFormat = prompt_format(metadata)
        self._formatters: dict[bool, Any] = {}
        self._formatter_lock = threading.Lock()

    # -- tokens ---------------------------------------------------------------------------------------

    def attention_break_even_tokens(self) -> int:
        """How many tokens must be decoded before the attention spent on one idle KV cell costs as much as
        re-evaluating that cell's token: a prompt token costs about 2 x n_params FLOPs, and without flash
        attention every decoded token computes Q.K and the V sum over every cell, about 4 x n_layer x n_embd
        FLOPs per cell. SmolLM2-135M: 3,900 by this count; 3,300 measured on 2 CPU cores."""
        per_cell = 4 * max(1, self.n_layer) * max(1, self.n_embd)
        return max(1, (2 * self.n_params) // per_cell)

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        """Token ids of `text`; `add_special` adds BOS where the model wants one (and the text lacks it)."""
        raw = text.encode("utf-8")
        if add_special and self.add_bos and self.bos_text and text.startswith(self.bos_text):
            add_special = False  # the chat template already wrote the BOS token
        capacity = len(raw) + 8
        buf = (self._lib.llama_token * capacity)()
        n = self._lib.llama_tokenize(self.vocab, raw, len(raw), buf, capacity, add_special, parse_special)
        if n < 0:
            capacity = -n
            buf = (self._lib.llama_token * capacity)()
            n = self._lib.llama_tokenize(self.vocab, raw, len(raw), buf, capacity, add_special, parse_special)
            if n < 0:
                raise BackendError(f"llama.cpp failed to tokenize a text of {len(raw)} bytes.")
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        """The bytes a token renders to (control tokens render empty); cached per token."""
        cached = self._pieces.get(token)
        if cached is not None:
            return cached
        buf = ctypes.create_string_buffer(64)
        n = self._lib.llama_token_to_piece(self.vocab, token, buf, 64, 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self._lib.llama_token_to_piece(self.vocab, token, buf, -n, 0, False)
        data = buf.raw[: max(n, 0)]
        with self._pieces_lock:
            self._pieces[token] = data
        return data

    def piece_text(self, token: int) -> str:
        return self.piece(token).decode("utf-8", errors="replace")

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.piece(t) for t in tokens).decode("utf-8", errors="replace")

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        text = self._lib.llama_vocab_get_text(self.vocab, token)
        return text.decode("utf-8", errors="replace") if text else ""

    def is_eog(self, token: int) -> bool:
        return bool(self._lib.llama_vocab_is_eog(self.vocab, token))

    # -- prompts --------------------------------------------------------------------------------------

    def render(self, prompt: Prompt, add_generation_prompt: bool = True) -> str:
        """Raw text as-is; chat messages through the model's own chat template."""
        if isinstance(prompt, str):
            return prompt
        messages = _check_messages(prompt)
        formatter = self._chat_formatter(add_generation_prompt)
        try:
            result = formatter(messages=messages)
        except Exception as exc:  # jinja errors, raise_exception() in templates
            raise BackendError(f"The model's chat template rejected these messages: {exc}") from exc
        return str(result.prompt)

    def _chat_formatter(self, add_generation_prompt: bool) -> Any:
        with self._formatter_lock:
            if add_generation_prompt not in self._formatters:
                from llama_cpp.llama_chat_format import Jinja2ChatFormatter

                if self.prompt_format.source != "template":
                    log.info("model %s: chat messages as %s", self.path.name, self.prompt_format.describe())
                self._formatters[add_generation_prompt] = Jinja2ChatFormatter(
                    template=self.prompt_format.template,
                    eos_token=self.eos_text,
                    bos_token=self.bos_text,
                    add_generation_prompt=add_generation_prompt,
                )
            return self._formatters[add_generation_prompt]

    def metadata_summary(self) -> dict[str, Any]:
        meta = self.header.metadata
        arch = meta.get("general.architecture")
        return {
            "architecture": arch,
            "n_params": self.n_params,
            "n_vocab": self.n_vocab,
            "n_ctx_train": self.n_ctx_train,
            "n_layer": int(self._lib.llama_model_n_layer(self.ptr)),
            "n_embd": int(self._lib.llama_model_n_embd(self.ptr)),
            "has_chat_template": self.chat_template is not None,
            "prompt_format": self.prompt_format.to_json(),
        }

    def close(self) -> None:
        if self.ptr:
            self._lib.llama_model_free(self.ptr)
            self.ptr = None


def _check_messages(prompt: Sequence[Any]) -> list[ChatMessage]:
    messages = []
    for i, message in enumerate(prompt):
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise BackendError(
                f"Chat message {i} must be a mapping with 'role' and 'content' (got {message!r:.80})."
            )
        messages.append({"role": str(message["role"]), "content": str(message["content"])})
    if not messages:
        raise BackendError("A chat prompt needs at least one message.")
    return messages
