"""Provider retries and the AGENT_STATUS signals that explain them (seed 003 §4).

429 honours Retry-After; a connection failure before any output retries with backoff; a stream cut
short after output continues the same step without repeating what was sent; an empty reply is
asked for again. A server error that is not known to pass (HTTP 500) is retried, but a request
that failed the same way twice is not sent a third time: retries only repeat what can succeed.
When retries run out the error propagates: the run fails with LLM_ERROR, recoverable, so
``retryTask`` can continue it.
"""

from __future__ import annotations

import asyncio

from ...events import StatusCode
from ...providers.base import Model, ModelRequest, ProviderUnavailable, RateLimited
from ..config import RuntimeConfig
from ..data.values import Reply
from ..log.emitter import RunEmitter, status
from .streaming import ReplyLimits, ReplyStreamer, SentSoFar


class EmptyReply(ProviderUnavailable):
    """The model answered with nothing usable, every time we asked."""


async def stream_with_retries(
    model: Model,
    request: ModelRequest,
    emitter: RunEmitter,
    config: RuntimeConfig,
    call_id_prefix: str,
    sent: SentSoFar | None = None,
) -> Reply:
    """One model reply, retried per the policy above; ``sent`` tracks what clients have seen."""
    sent = sent or SentSoFar()
    attempt = 0
    last_failure: str | None = None
    while True:
        streamer = sent.streamer = ReplyStreamer(
            emitter,
            call_id_prefix,
            sent.reply(),
            ReplyLimits(config.max_reply_tokens, config.max_reply_bytes),
        )
        try:
            reply = await streamer.consume(model.stream(request))
        except ProviderUnavailable as exc:
            attempt += 1
            if attempt > config.llm_max_retries:
                raise
            if not exc.transient and str(exc) == last_failure:
                raise ProviderUnavailable(
                    f"{exc} (the same request failed the same way twice, so it was not sent again)",
                    transient=False,
                ) from exc
            last_failure = None if exc.transient else str(exc)
            partial = streamer.produced_output
            await _announce_and_wait(emitter, config, exc, attempt, partial)
            continue
        if reply.cut is not None or not reply.empty:
            return reply
        attempt += 1
        if attempt > config.llm_max_retries:
            raise EmptyReply("the model returned an empty reply")
        await status(
            emitter,
            StatusCode.LLM_EMPTY_RESPONSE_RETRYING,
            f"The model returned an empty reply; asking again ({attempt}/{config.llm_max_retries})",
            attempt=attempt,
            maxRetries=config.llm_max_retries,
        )
        await asyncio.sleep(_backoff(config, attempt))


async def _announce_and_wait(
    emitter: RunEmitter,
    config: RuntimeConfig,
    exc: ProviderUnavailable,
    attempt: int,
    partial: bool,
) -> None:
    retries = config.llm_max_retries
    if isinstance(exc, RateLimited):
        delay = exc.retry_after if exc.retry_after is not None else _backoff(config, attempt)
        delay = min(delay, config.retry_max_delay)
        await status(
            emitter,
            StatusCode.LLM_RATE_LIMITED,
            f"The model is rate-limited; retrying in {delay:.1f} s ({attempt}/{retries})",
            attempt=attempt,
            maxRetries=retries,
            backoffMs=int(delay * 1000),
        )
    elif partial:
        delay = _backoff(config, attempt)
        await status(
            emitter,
            StatusCode.LLM_AUTO_RECOVERING,
            f"The connection to the model broke off; continuing where it stopped "
            f"({attempt}/{retries})",
            attempt=attempt,
            maxAttempts=retries,
        )
    else:
        delay = _backoff(config, attempt)
        trouble = (
            "Could not reach the model"
            if exc.network_error
            else f"The model failed: {str(exc)[:300]}"
        )
        await status(
            emitter,
            StatusCode.LLM_NETWORK_RETRYING,
            f"{trouble}; retrying in {delay:.1f} s ({attempt}/{retries})",
            attempt=attempt,
            maxRetries=retries,
            backoffMs=int(delay * 1000),
        )
    await asyncio.sleep(delay)


def _backoff(config: RuntimeConfig, attempt: int) -> float:
    return float(min(config.retry_base_delay * 2 ** (attempt - 1), config.retry_max_delay))
