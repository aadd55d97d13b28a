"""Running a model: cortiq.Model (the C runtime: tokenizer, chat template, sampler)."""
from __future__ import annotations

import json
import os
import queue
import threading
from typing import Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from . import errors
from ._ffi import c_str, ffi, lib, libc, new_err, take_string
from ._file import check

_SAMPLING = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n", "seed")
_ACT = {"default": 0, "int8": 1, "f32": 2}


class Model:
    """A CMF model loaded by the C runtime, with its own tokenizer (spec §6) and chat template.

        m = cortiq.Model("model.cmf", threads=4)
        for piece in m.generate("Once upon a time", max_tokens=32, seed=1):
            print(piece, end="")

    generate()/chat() run on the runtime's session (its KV cache is reused for the longest
    prefix a new prompt shares with the last one, as in `cortiq run`); logits(), hidden_states()
    and embed() use a second session of their own, so they never disturb that cache. Calls are
    serialised by a lock: a Model may be shared between threads.
    """

    def __init__(self, path, threads: int = 0, ctx: int = 0, kv: str = "f16",
                 act: str = "default", verify: bool = False, huge_pages: bool = True,
                 task: Optional[str] = None, skill: Optional[str] = None):
        """task: the file's task mask to run (spec §5; None = the file's default_task, "none" =
        dense). skill: a skill id whose tensors replace the backbone's (spec §9; None or "none"
        = the backbone)."""
        self.path = os.fspath(path)
        o = ffi.new("cortiq_runtime_opts *")
        skill_c = ffi.new("char[]", skill.encode()) if skill not in (None, "none") else ffi.NULL
        o.skill = skill_c
        o.threads = threads
        o.ctx = ctx
        k = ffi.new("cortiq_kv_type *")
        if not lib.cortiq_kv_type_from_name(str(kv).encode(), k):
            raise errors.InvalidArgument(f"kv '{kv}': want f16, q8 or f32")
        o.kv = k[0]
        if act not in _ACT:
            raise errors.InvalidArgument(f"act '{act}': want default, int8 or f32")
        o.act = _ACT[act]
        o.verify_tensors = int(bool(verify))
        o.no_huge_pages = int(not huge_pages)
        err = new_err()
        rt = ffi.new("cortiq_runtime **")
        check(lib.cortiq_runtime_open(self.path.encode(), o, rt, err), err)
        self._rt = ffi.gc(rt[0], lib.cortiq_runtime_free)
        self._model = lib.cortiq_runtime_model(self._rt)
        self._tok = lib.cortiq_runtime_tokenizer(self._rt)
        self._aux = None  # the session of logits()/hidden_states(), sized on demand
        self._lock = threading.Lock()
        self.last_stats: Optional[Dict[str, object]] = None
        self._skill_c = skill_c  # the runtime may keep the pointer
        self._task = task if task is not None else (
            c_str(lib.cortiq_model_default_task(self._model)) or "none")
        self._set_task(lib.cortiq_runtime_session(self._rt))

    @property
    def task(self) -> Optional[str]:
        """The task mask the model runs (None: dense)."""
        return None if self._task == "none" else self._task

    def _set_task(self, session) -> None:
        err = new_err()
        st = lib.cortiq_session_set_task(session, self._task.encode(), err)
        if st:
            self.close()
            check(st, err)

    # -- lifetime --
    def close(self) -> None:
        with self._lock:
            if self._aux is not None:
                ffi.release(self._aux)
                self._aux = None
            if self._rt is not None:
                ffi.release(self._rt)
                self._rt = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _live(self):
        if self._rt is None:
            raise errors.InvalidArgument(f"{self.path}: the model is closed")
        return self._rt

    # -- sizes --
    @property
    def vocab_size(self) -> int:
        """Rows of the output projection (the length of a logits row)."""
        self._live()
        return lib.cortiq_model_vocab(self._model)

    @property
    def hidden_size(self) -> int:
        self._live()
        return lib.cortiq_model_hidden(self._model)

    @property
    def token_macs(self) -> int:
        """Multiply-adds one token takes in the layers' matrix products (no output head; a MoE
        layer's routed experts top_k times their mean): a prefill at r tok/s does
        2 * token_macs * r flops per second in them."""
        self._live()
        return lib.cortiq_model_token_macs(self._model)

    @property
    def n_ctx(self) -> int:
        """Positions of the generation session."""
        return lib.cortiq_session_ctx(lib.cortiq_runtime_session(self._live()))

    @property
    def has_chat_template(self) -> bool:
        return bool(lib.cortiq_runtime_has_template(self._live()))

    # -- text --
    def tokenize(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Token ids of text (ids identical to the `tokenizers` package's)."""
        self._live()
        b = text.encode("utf-8")
        ids = ffi.new("int32_t **")
        n = ffi.new("size_t *")
        err = new_err()
        check(lib.cmf_tokenizer_encode(self._tok, b, len(b), add_special_tokens, ids, n, err), err)
        try:
            return list(ffi.unpack(ids[0], n[0]))
        finally:
            libc.free(ids[0])

    def detokenize(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        self._live()
        arr = ffi.new("int32_t[]", [int(i) for i in ids])
        text = ffi.new("char **")
        n = ffi.new("size_t *")
        err = new_err()
        check(lib.cmf_tokenizer_decode(self._tok, arr, len(ids), skip_special_tokens, text, n, err),
              err)
        return take_string(text[0], n[0])

    def render_chat(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        """The prompt text the file's chat template (ChatML when it has none) makes of
        messages ([{"role": ..., "content": ...}, ...])."""
        self._live()
        mj = json.dumps(list(messages)).encode()
        out = ffi.new("char **")
        err = new_err()
        check(lib.cortiq_render_chat(self._rt, mj, add_generation_prompt, out, err), err)
        return take_string(out[0])

    # -- generation --
    def _params(self, max_tokens: int, sampling: dict):
        p = ffi.new("cortiq_generate_params *")
        lib.cortiq_generate_defaults(p)
        p.max_tokens = max_tokens
        greedy = sampling.pop("greedy", False)
        for k, v in sampling.items():
            if k not in _SAMPLING:
                raise TypeError(f"unknown sampling option '{k}' (want one of "
                                f"{', '.join(_SAMPLING)}, greedy)")
            setattr(p.sampler, k, v)
        if greedy:
            p.sampler.temperature = 0
        return p

    def generate(self, prompt: Union[str, Sequence[int]], max_tokens: int = 512,
                 **sampling) -> Iterator[str]:
        """Generate after prompt (text, tokenized with the model's special tokens such as BOS,
        as `cortiq run --raw` does; or a list of ids) and yield the text as it forms.

        Sampling options (defaults of the C runtime: temperature 0.7, top_k 40, top_p 0.95,
        min_p 0.05): temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed,
        greedy=True. Stops at an eos token, max_tokens, or the end of the context; the figures
        of the run are in self.last_stats afterwards. Leaving the loop early stops the
        generation."""
        ids = self.tokenize(prompt) if isinstance(prompt, str) else [int(i) for i in prompt]
        return self._stream(ids, self._params(max_tokens, dict(sampling)))

    def chat(self, messages: Union[str, Sequence[dict]], max_tokens: int = 512,
             stream: bool = False, **sampling) -> Union[str, Iterator[str]]:
        """One assistant turn after messages (a list of {"role", "content"}, or a user string),
        rendered by the file's chat template. Returns the reply text, or with stream=True an
        iterator of its pieces. Sampling options as generate()."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        prompt = self.render_chat(messages, True)
        # the template wrote BOS and the other special tokens itself
        ids = self.tokenize(prompt, add_special_tokens=False)
        it = self._stream(ids, self._params(max_tokens, dict(sampling)))
        return it if stream else "".join(it)

    def _stream(self, ids: List[int], params) -> Iterator[str]:
        self._live()
        if not ids:
            raise errors.InvalidArgument("generate: empty prompt")
        pieces: "queue.Queue" = queue.Queue()
        stop = threading.Event()
        done = object()
        prompt = ffi.new("int32_t[]", ids)

        @ffi.callback("int(void *, const char *, size_t)")
        def on_text(_user, text, n):
            pieces.put(ffi.unpack(text, n))
            return 1 if stop.is_set() else 0

        def run():
            err = new_err()
            stats = ffi.new("cortiq_generate_stats *")
            try:
                with self._lock:
                    rt = self._live()
                    st = lib.cortiq_generate(rt, prompt, len(ids), params, on_text, ffi.NULL,
                                             ffi.NULL, stats, err)
                if st:
                    check(st, err)
                self.last_stats = {
                    "prompt_tokens": stats.prompt_tokens, "cached_tokens": stats.cached_tokens,
                    "generated_tokens": stats.generated_tokens,
                    "prefill_seconds": stats.prefill_seconds,
                    "decode_seconds": stats.decode_seconds,
                    "finish": c_str(lib.cortiq_finish_name(stats.finish))}
                pieces.put(done)
            except BaseException as e:  # handed to the consumer
                pieces.put(e)

        worker = threading.Thread(target=run, name="cortiq-generate", daemon=True)

        def consume():
            worker.start()
            pending = b""  # pieces are whole UTF-8; joined bytes keep that safe anyway
            try:
                while True:
                    item = pieces.get()
                    if item is done:
                        break
                    if isinstance(item, BaseException):
                        raise item
                    pending += item
                    text = pending.decode("utf-8", "ignore")
                    if text.encode("utf-8") == pending:
                        pending = b""
                        if text:
                            yield text
                if pending:
                    yield pending.decode("utf-8", "replace")
            finally:
                stop.set()
                worker.join()  # the callback (on_text) outlives the C call

        return consume()

    # -- numbers --
    def _session(self, n: int):
        """The auxiliary session, with room for n positions."""
        limit = lib.cortiq_model_max_context(self._model) or n
        if n > limit:
            raise errors.LimitError(f"{n} tokens do not fit the model's {limit} positions")
        if self._aux is None or lib.cortiq_session_ctx(self._aux) < n:
            if self._aux is not None:
                ffi.release(self._aux)
                self._aux = None
            s = ffi.new("cortiq_session **")
            err = new_err()
            check(lib.cortiq_session_create(self._model, max(n, 64), s, err), err)
            self._aux = ffi.gc(s[0], lib.cortiq_session_free)
            self._set_task(self._aux)
        lib.cortiq_session_reset(self._aux)
        return self._aux

    def _ids(self, ids) -> "np.ndarray":
        if isinstance(ids, str):
            ids = self.tokenize(ids)
        a = np.ascontiguousarray(np.asarray(ids, dtype=np.int64))
        if a.ndim != 1 or a.size == 0:
            raise errors.InvalidArgument("want a non-empty 1-D sequence of token ids")
        if (a < -2**31).any() or (a >= 2**31).any():
            raise errors.InvalidArgument("token id out of the int32 range")
        return a.astype(np.int32)

    def logits(self, ids: Union[str, Sequence[int]]) -> np.ndarray:
        """float32 [len(ids), vocab_size]: the logits after each position, from a fresh
        context (row -1 is the next-token distribution)."""
        a = self._ids(ids)
        with self._lock:
            self._live()
            s = self._session(a.size)
            out = np.empty((a.size, lib.cortiq_model_vocab(self._model)), np.float32)
            err = new_err()
            check(lib.cortiq_session_eval(s, ffi.cast("int32_t *", a.ctypes.data), a.size,
                                          ffi.cast("float *", out.ctypes.data), err), err)
        return out

    def hidden_states(self, ids: Union[str, Sequence[int]]) -> np.ndarray:
        """float32 [len(ids), hidden_size]: each position's final hidden state (after the final
        norm: the output head's input), from a fresh context."""
        a = self._ids(ids)
        with self._lock:
            self._live()
            s = self._session(a.size)
            out = np.empty((a.size, lib.cortiq_model_hidden(self._model)), np.float32)
            err = new_err()
            check(lib.cortiq_session_eval_hidden(s, ffi.cast("int32_t *", a.ctypes.data),
                                                 a.size, ffi.cast("float *", out.ctypes.data),
                                                 err), err)
        return out

    def embed(self, text: Union[str, Sequence[int]], normalize: bool = False) -> np.ndarray:
        """float32 [hidden_size]: the mean over the tokens of the final hidden states
        (hidden_states()); normalize=True scales it to unit length."""
        v = self.hidden_states(text).mean(axis=0, dtype=np.float64).astype(np.float32)
        if normalize:
            n = float(np.linalg.norm(v))
            if n > 0:
                v /= n
        return v

    def __repr__(self) -> str:
        return f"<cortiq.Model {self.path!r}{' closed' if self._rt is None else ''}>"
