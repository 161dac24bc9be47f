"""The Gemini summarizer: the summary turn written by Gemini, through the official SDK.

Why it is built the way it is:

- One ``generateContent`` request per attempt, never streamed, so summary
  tokens can never leak into anyone's stream. Thinking is off and the
  temperature low: a summary condenses, it does not reason, and thinking
  tokens would eat the ``max_output_tokens`` budget and leave a MAX_TOKENS
  answer with no text.
- Retries live here, once: the SDK's own retry is switched off
  (``HttpRetryOptions(attempts=1)``, which also stops its hidden retry on
  aiohttp connection errors). Only 408, 429, 5xx and connection failures are
  retried, with exponential backoff and jitter, at most ``max_retries``
  times. Each attempt is bounded by ``timeout_s``; the caller's own deadline
  (the engine's ``wait_for``) cancels the whole call, backoff sleeps included.
  A server asking to be retried later than ``max_backoff_s`` gets no retry:
  waiting would only spend the caller's deadline.
- A failure is never turned into summary text. A blank answer, a safety block
  or a MAX_TOKENS answer without text comes back as ``text=""`` with the
  reason (the engine skips the pass); a MAX_TOKENS answer with text is kept
  (the summary is capped by design). Everything else raises
  ``SummarizerUnavailable`` or ``SummarizerTimeout`` and the session is left
  as it was.
- Every call ends in exactly one ``Outcome``, counted in ``outcomes`` for the
  metrics to export.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import math
import os
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from sidecar.errors import InvalidConfig, SidecarError, SummarizerTimeout, SummarizerUnavailable
from sidecar.summarizer.prompts import with_must_keep
from sidecar.summarizer.protocol import SummaryRequest, SummaryResponse

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gemini-2.5-flash"


class Outcome(StrEnum):
    """How one ``summarize`` call ended: the keys of ``GeminiSummarizer.outcomes``."""

    OK = "ok"
    TRUNCATED = "truncated"  # MAX_TOKENS with text: kept
    BLANK = "blank"
    SAFETY = "safety"
    MAX_TOKENS = "max_tokens"  # MAX_TOKENS without text: skipped
    REJECTED = "rejected"  # a 4xx that no retry can fix
    UNAVAILABLE = "unavailable"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"  # the caller's deadline ran out first


@dataclass(frozen=True, slots=True)
class GeminiSettings:
    """How to reach Gemini and how to call it; checked on construction.

    The Gemini API takes an ``api_key``; Vertex AI (``use_vertexai``) takes a
    ``project`` (and optionally a ``location``) and authenticates with the
    machine's Application Default Credentials. ``thinking_budget=None`` sends
    no thinking config, for models that cannot turn thinking off.
    """

    api_key: str | None = field(default=None, repr=False)
    use_vertexai: bool = False
    project: str | None = None
    location: str | None = None
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    api_version: str | None = None
    timeout_s: float = 30.0
    max_retries: int = 3
    temperature: float = 0.1
    thinking_budget: int | None = 0
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def __post_init__(self) -> None:
        if self.use_vertexai and not (self.project or "").strip():
            raise InvalidConfig(
                "gemini_project", "Vertex AI needs a project: set GOOGLE_CLOUD_PROJECT"
            )
        if not self.use_vertexai and not (self.api_key or "").strip():
            raise InvalidConfig(
                "gemini_api_key",
                "set GEMINI_API_KEY or GOOGLE_API_KEY, "
                "or GOOGLE_GENAI_USE_VERTEXAI=true with GOOGLE_CLOUD_PROJECT",
            )
        if not self.model.strip():
            raise InvalidConfig("gemini_model", "must not be blank")
        if self.base_url is not None and not self.base_url.startswith(("http://", "https://")):
            raise InvalidConfig("gemini_base_url", "must be an http:// or https:// URL")
        if not _is_number(self.timeout_s) or not 0 < self.timeout_s < math.inf:
            raise InvalidConfig("gemini_timeout_s", "must be a positive number of seconds")
        if not _is_int(self.max_retries) or self.max_retries < 0:
            raise InvalidConfig("gemini_max_retries", "must be an integer >= 0")
        if not _is_number(self.temperature) or not 0.0 <= self.temperature <= 2.0:
            raise InvalidConfig("gemini_temperature", "must be between 0 and 2")
        if self.thinking_budget is not None and (
            not _is_int(self.thinking_budget) or self.thinking_budget < -1
        ):
            raise InvalidConfig("gemini_thinking_budget", "must be -1 (automatic), 0 (off) or more")
        if not _is_number(self.backoff_s) or self.backoff_s < 0:
            raise InvalidConfig("gemini_backoff_s", "must be >= 0")
        if not _is_number(self.max_backoff_s) or self.max_backoff_s < self.backoff_s:
            raise InvalidConfig("gemini_max_backoff_s", "must be >= gemini_backoff_s")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GeminiSettings:
        """Settings from the SDK's own variables plus ``COMPACTION_GEMINI_*``.

        Blank variables count as unset. When both keys are set GOOGLE_API_KEY
        wins, as it does in the SDK, so the sidecar and the SDK never disagree
        about which key is in use.
        """
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            return env.get(name, "").strip() or None

        return cls(
            api_key=get("GOOGLE_API_KEY") or get("GEMINI_API_KEY"),
            use_vertexai=_flag(get("GOOGLE_GENAI_USE_VERTEXAI"), "gemini_use_vertexai"),
            project=get("GOOGLE_CLOUD_PROJECT"),
            location=get("GOOGLE_CLOUD_LOCATION"),
            model=get("COMPACTION_GEMINI_MODEL") or DEFAULT_MODEL,
            base_url=get("COMPACTION_GEMINI_BASE_URL"),
            api_version=get("COMPACTION_GEMINI_API_VERSION"),
        )


class GeminiSummarizer:
    """A ``Summarizer`` backed by Gemini; see the module docstring for its rules.

    The SDK client is built once and reused by every call. ``outcomes`` counts
    how calls ended, by ``Outcome``.
    """

    def __init__(self, settings: GeminiSettings) -> None:
        self.settings = settings
        self.outcomes: Counter[str] = Counter()
        http_options = types.HttpOptions(
            base_url=settings.base_url,
            api_version=settings.api_version,
            # Also sent as X-Server-Timeout, so the server gives up when we do.
            timeout=math.ceil(settings.timeout_s * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        try:
            if settings.use_vertexai:
                self._client = genai.Client(
                    vertexai=True,
                    project=settings.project,
                    location=settings.location,
                    http_options=http_options,
                )
            else:
                self._client = genai.Client(
                    vertexai=False, api_key=settings.api_key, http_options=http_options
                )
        except ValueError as exc:
            raise InvalidConfig("gemini", str(exc)) from exc

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        model = request.model or self.settings.model
        # A session's policy may override temperature and thinking; else ours.
        temperature = self.settings.temperature
        if request.temperature is not None:
            temperature = request.temperature
        thinking = self.settings.thinking_budget
        if request.thinking_budget is not None:
            thinking = request.thinking_budget
        config = types.GenerateContentConfig(
            system_instruction=with_must_keep(request.system_prompt, request.identifiers) or None,
            max_output_tokens=request.max_output_tokens,
            temperature=temperature,
            thinking_config=(
                None if thinking is None else types.ThinkingConfig(thinking_budget=thinking)
            ),
            # No tools are offered; and one attempt is one request, so that a
            # retry is counted once and bounded once.
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            automatic_continuation=False,
        )
        contents = [types.Content(role="user", parts=[types.Part(text=request.history)])]
        try:
            response = await self._generate(model, contents, config)
        except asyncio.CancelledError:
            self.outcomes[Outcome.CANCELLED] += 1
            raise
        return self._read(response)

    async def aclose(self) -> None:
        """Close the SDK's HTTP connections."""
        await self._client.aio.aclose()
        self._client.close()

    async def _generate(
        self, model: str, contents: list[types.Content], config: types.GenerateContentConfig
    ) -> types.GenerateContentResponse:
        """One generateContent call, retried on 408/429/5xx and connection failures."""
        settings = self.settings
        attempt = 0
        while True:
            try:
                async with asyncio.timeout(settings.timeout_s):
                    return await self._client.aio.models.generate_content(
                        model=model, contents=contents, config=config
                    )
            except _TIMEOUT_ERRORS:
                raise self._failed(
                    Outcome.TIMEOUT,
                    SummarizerTimeout(f"Gemini did not answer within {settings.timeout_s:g} s"),
                ) from None
            except genai_errors.APIError as exc:
                if not _retryable(exc.code):
                    raise self._failed(Outcome.REJECTED, self._rejection(exc, model)) from exc
                last: Exception = exc
                failure = f"{_status_of(exc)}: {exc.message or 'no message'}"
                retry_after = _retry_delay(exc.details)
            except _CONNECTION_ERRORS as exc:
                last = exc
                failure = f"cannot connect: {type(exc).__name__}: {exc}"
                retry_after = None
            except _AUTH_ERRORS as exc:
                # Vertex AI without usable Application Default Credentials.
                raise self._failed(
                    Outcome.REJECTED,
                    SummarizerUnavailable(f"Gemini credentials are unusable: {exc}"),
                ) from exc
            except genai_errors.UnknownApiResponseError as exc:
                raise self._failed(
                    Outcome.UNAVAILABLE,
                    SummarizerUnavailable(f"Gemini sent an unreadable answer: {exc}"),
                ) from exc
            except ValueError as exc:  # the SDK refused the request before sending it
                raise self._failed(
                    Outcome.REJECTED,
                    SummarizerUnavailable(
                        f"Gemini's client refused the request (model {model[:200]!r}): {exc}"
                    ),
                ) from exc
            if attempt >= settings.max_retries:
                raise self._failed(
                    Outcome.UNAVAILABLE,
                    SummarizerUnavailable(
                        f"Gemini is unavailable after {attempt + 1} attempt(s): {failure}"
                    ),
                ) from last
            delay = min(settings.max_backoff_s, settings.backoff_s * 2**attempt)
            delay = random.uniform(delay / 2, delay)  # jitter: callers do not retry in step
            if retry_after is not None:
                if retry_after > settings.max_backoff_s:
                    raise self._failed(
                        Outcome.UNAVAILABLE,
                        SummarizerUnavailable(
                            f"Gemini is unavailable: {failure} (asks to retry in {retry_after:g} s)"
                        ),
                    ) from last
                delay = max(delay, retry_after)
            attempt += 1
            log.info("Gemini call failed (%s); retry %d in %.2f s", failure, attempt, delay)
            await asyncio.sleep(delay)

    def _read(self, response: types.GenerateContentResponse) -> SummaryResponse:
        """The summary in a response, or a blank one with the reason the pass is skipped."""
        usage = response.usage_metadata
        input_tokens = (usage.prompt_token_count or 0) if usage else 0
        output_tokens = (usage.candidates_token_count or 0) if usage else 0

        def ending(outcome: Outcome, text: str, reason: str) -> SummaryResponse:
            self.outcomes[outcome] += 1
            if not text:
                log.info("Gemini gave no summary (%s); the pass is skipped", reason)
            return SummaryResponse(text, input_tokens, output_tokens, reason)

        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            return ending(Outcome.SAFETY, "", f"PROMPT_BLOCKED_{feedback.block_reason.value}")
        candidate = response.candidates[0] if response.candidates else None
        if candidate is None:
            return ending(Outcome.BLANK, "", "NO_CANDIDATES")
        reason = str(candidate.finish_reason.value) if candidate.finish_reason else ""
        # A safety stop may come with the text written before it: never keep it.
        if reason in _BLOCKED:
            return ending(Outcome.SAFETY, "", reason)
        parts = candidate.content.parts if candidate.content else None
        text = "".join(p.text for p in parts or () if p.text and not p.thought).strip()
        if not text:
            return ending(
                Outcome.MAX_TOKENS if reason == "MAX_TOKENS" else Outcome.BLANK, "", reason
            )
        return ending(Outcome.TRUNCATED if reason == "MAX_TOKENS" else Outcome.OK, text, reason)

    def _rejection(self, exc: genai_errors.APIError, model: str) -> SummarizerUnavailable:
        """A 4xx no retry can fix, named for its cause so an operator knows what to change."""
        status, message = _status_of(exc), exc.message or "no message"
        if exc.code in (401, 403) or _api_key_invalid(exc):
            what = "credentials" if self.settings.use_vertexai else "API key"
            cause = f"Gemini rejected the {what}"
        elif exc.code == 404:
            cause = f"Gemini has no model {model!r}"
        elif exc.code == 400:
            cause = "Gemini rejected the request as invalid"
        else:
            cause = "Gemini rejected the request"
        return SummarizerUnavailable(f"{cause} ({status}): {message}")

    def _failed(self, outcome: Outcome, error: SidecarError) -> SidecarError:
        self.outcomes[outcome] += 1
        log.warning("Gemini summary failed: %s", error)
        return error


# Finish reasons that mean the answer was withheld or cut by a filter.
_BLOCKED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)


def _retryable(code: int) -> bool:
    return code in (408, 429) or 500 <= code < 600


def _status_of(exc: genai_errors.APIError) -> str:
    """``503 UNAVAILABLE``: the HTTP code and the provider's status name."""
    return f"{exc.code} {exc.status}" if exc.status else str(exc.code)


def _api_key_invalid(exc: genai_errors.APIError) -> bool:
    """Gemini answers a bad key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID."""
    message = exc.message or ""
    return "API key not valid" in message or "API_KEY_INVALID" in json.dumps(
        exc.details, default=str
    )


def _retry_delay(details: Any) -> float | None:
    """The delay a google.rpc.RetryInfo detail asks for ("37s"), if the error has one."""
    error = details.get("error", details) if isinstance(details, dict) else None
    items = error.get("details") if isinstance(error, dict) else None
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("rpc.RetryInfo"):
            delay = item.get("retryDelay")
            if isinstance(delay, str) and delay.endswith("s"):
                try:
                    return float(delay[:-1])
                except ValueError:
                    return None
    return None


def _installed_errors(*names: tuple[str, str]) -> tuple[type[Exception], ...]:
    """The named exception classes of those libraries that are installed.

    The SDK picks httpx2, httpx or aiohttp at run time; looking their errors up
    by name keeps this module working whichever one it picked.
    """
    found: list[type[Exception]] = []
    for module_name, class_name in names:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        cls = getattr(module, class_name, None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            found.append(cls)
    return tuple(found)


_TIMEOUT_ERRORS: tuple[type[Exception], ...] = (
    TimeoutError,
    *_installed_errors(("httpx2", "TimeoutException"), ("httpx", "TimeoutException")),
)
_CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    ConnectionError,
    *_installed_errors(
        ("httpx2", "NetworkError"),
        ("httpx2", "RemoteProtocolError"),
        ("httpx", "NetworkError"),
        ("httpx", "RemoteProtocolError"),
        ("aiohttp", "ClientConnectionError"),
        ("google.auth.exceptions", "TransportError"),
    ),
)
# Checked after the connection errors: google-auth's TransportError is one of these.
_AUTH_ERRORS = _installed_errors(("google.auth.exceptions", "GoogleAuthError"))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _flag(value: str | None, field: str) -> bool:
    """An environment switch: true/1/yes/on or false/0/no/off; anything else is a typo."""
    if value is None:
        return False
    lowered = value.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise InvalidConfig(field, f"{value!r} is not true or false")
