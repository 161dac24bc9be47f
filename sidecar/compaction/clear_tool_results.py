"""Clear tool results: old results become a short placeholder, in place.

The cheapest compaction there is: no LLM call, nothing archived, the
transcript keeps its shape. A cleared event stays active, in place and paired
with its call; only what the model is shown changes.

1. The tool uses of the active window are its conversation's tool calls, in
   log order. The newest ``keep_tool_uses`` keep their results verbatim
   (excluded tools count among them: they are uses all the same).
2. Every older call whose tool is not in ``exclude_tools`` (the call's name
   decides, for its result and its inputs alike, whatever name the result
   carries) and whose result is in the window has that result replaced by the
   placeholder (and, with ``clear_tool_inputs``, its arguments by
   ``CLEARED_ARGUMENTS``). A result
   whose call is not in the window is no tool use of it and stays as it is; so
   does a call still waiting for its result.
3. Each changed event is recounted exactly as the window will count it; an
   event the placeholder would not make smaller is left alone, so a pass never
   grows the context. A result already showing its placeholder is not cleared
   again: a second pass with the same settings clears nothing new.
4. With ``keep_reasoning_turns``, the reasoning text of every turn but the
   newest that many (the turn in progress counts) is cleared too: each block
   keeps its signature (and a redacted block its data) byte for byte, so a
   provider that checks them still takes the tool loop; only the text, which
   providers drop from older turns anyway, leaves the window.
5. With ``keep_identifiers`` (the default) a cleared result's placeholder
   names its top identifiers (``sidecar.compaction.identifiers``: those a
   later action used first, at most ``MAX_POINTERS`` in ``MAX_POINTER_CHARS``),
   so the agent can still act on them or recall the full result. They go
   where the placeholder says ``{identifiers}``, or after it. A pass reads at
   most ``MAX_SPAN_CHARS`` of results for them, newest first; results past
   that are cleared with the bare placeholder.
6. Unless it frees ``min_cleared_tokens`` (and the strategy-level
   ``min_saved_tokens``), the pass is skipped as ``not_worth_it``: a clearing
   breaks the provider's prompt cache from the first cleared event on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sidecar.compaction.identifiers import MAX_SPAN_CHARS, newest_actions, pointers
from sidecar.compaction.tokens import count_event
from sidecar.compaction.window import Window, check_max_dropped_identifiers, check_min_saved_tokens
from sidecar.errors import InvalidConfig
from sidecar.model import Boundary, CompactionPlan, Event, SkipReason, ToolCall, ToolResult
from sidecar.summarizer.protocol import TRAIL_SEPARATOR
from sidecar.tokenizer import TokenEstimator, default_estimator

DEFAULT_KEEP_TOOL_USES = 3
DEFAULT_PLACEHOLDER = (
    "[{name} result cleared to save context (call {call_id}){identifiers};"
    " the original stays in the session log and can be searched]"
)
MAX_PLACEHOLDER_BYTES = 2048
"""The most a placeholder may be, in UTF-8 bytes: its template, and each result's expansion.

A template may repeat ``{name}`` and ``{call_id}``; each cleared result's
placeholder is built and counted while the pass runs, so its size is what
bounds that work. The expansion is cut at this size (names and ids stored
before they were bounded may be long); a template over it is refused when a
policy is set.
"""
_FIELDS_IN_TEMPLATE = re.compile(r"(\{name\}|\{call_id\}|\{identifiers\})")
POINTER_MARK = " \N{RIGHTWARDS ARROW} "
"""What leads a placeholder's identifiers: ``[... (call c1) → ZFA04Y, HAT136; ...]``."""
CLEARED_ARGUMENTS = '{"cleared":true}'
"""What a cleared call's arguments become with ``clear_tool_inputs``: still a JSON object."""

_FIELD = "strategy.clear_tool_results"


@dataclass(frozen=True, slots=True)
class ClearToolResults:
    """Replaces the results of all but the newest ``keep_tool_uses`` tool calls with a placeholder.

    Never archives: a later window strategy may archive a cleared event as
    usual. ``placeholder`` may name the call with ``{name}`` and ``{call_id}``
    and place its identifiers with ``{identifiers}``; empty means
    ``DEFAULT_PLACEHOLDER``. ``boundary`` is unused (nothing is
    cut) and kept so every strategy has the same strategy-level fields.
    """

    keep_tool_uses: int = DEFAULT_KEEP_TOOL_USES
    exclude_tools: tuple[str, ...] = ()
    clear_tool_inputs: bool = False
    min_cleared_tokens: int = 0
    placeholder: str = DEFAULT_PLACEHOLDER
    keep_reasoning_turns: int | None = None
    keep_identifiers: bool = True
    boundary: Boundary = Boundary.TURN
    min_saved_tokens: int | None = None
    max_dropped_identifiers: int | None = None
    name = "clear_tool_results"

    def __post_init__(self) -> None:
        check_min_saved_tokens(self.min_saved_tokens)
        check_max_dropped_identifiers(self.max_dropped_identifiers)
        for field, value in (
            ("keep_tool_uses", self.keep_tool_uses),
            ("min_cleared_tokens", self.min_cleared_tokens),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidConfig(f"{_FIELD}.{field}", f"must be 0 or more, got {value!r}")
        turns = self.keep_reasoning_turns
        if turns is not None and (
            isinstance(turns, bool) or not isinstance(turns, int) or turns < 1
        ):
            raise InvalidConfig(
                f"{_FIELD}.keep_reasoning_turns", f"must be at least 1, got {turns!r}"
            )
        for flag, value in (
            ("clear_tool_inputs", self.clear_tool_inputs),
            ("keep_identifiers", self.keep_identifiers),
        ):
            if not isinstance(value, bool):
                raise InvalidConfig(f"{_FIELD}.{flag}", f"must be true or false, got {value!r}")
        if isinstance(self.exclude_tools, str) or not all(
            isinstance(name, str) and name for name in self.exclude_tools
        ):
            raise InvalidConfig(f"{_FIELD}.exclude_tools", "must be a list of tool names")
        # A list from a policy document becomes a tuple: the strategy is a hashable value.
        object.__setattr__(self, "exclude_tools", tuple(self.exclude_tools))

    def placeholder_for(self, call_id: str, name: str, identifiers: Sequence[str] = ()) -> str:
        """The text a cleared result of call ``call_id`` to tool ``name`` shows.

        ``identifiers`` (bounded by ``pointers``) go where the placeholder says
        ``{identifiers}``, or after it; none leaves the placeholder as it was.
        At most ``MAX_PLACEHOLDER_BYTES``: built piece by piece and stopped
        there, so its cost never follows how often the template repeats a long
        name.
        """
        text = self.placeholder or DEFAULT_PLACEHOLDER
        listed = POINTER_MARK + TRAIL_SEPARATOR.join(identifiers) if identifiers else ""
        if "{identifiers}" not in text:
            text += "{identifiers}"
        fields = {"{name}": name, "{call_id}": call_id, "{identifiers}": listed}
        pieces: list[str] = []
        room = MAX_PLACEHOLDER_BYTES  # characters first: never fewer than the bytes they take
        for piece in _FIELDS_IN_TEMPLATE.split(text):
            pieces.append(fields.get(piece, piece)[:room])
            room -= len(pieces[-1])
            if room <= 0:
                break
        expanded = "".join(pieces)
        if len(expanded) * 4 <= MAX_PLACEHOLDER_BYTES:  # within the bound whatever the script
            return expanded
        data = expanded.encode()
        if len(data) <= MAX_PLACEHOLDER_BYTES:
            return expanded
        return data[:MAX_PLACEHOLDER_BYTES].decode(errors="ignore")  # a whole character last

    def plan(
        self, events: Sequence[Event], estimator: TokenEstimator | None = None
    ) -> CompactionPlan:
        estimator = estimator or default_estimator()
        real = Window.of(events).real
        cleared_calls = self._calls_to_clear(real)
        older = self._older_turns(real)
        named = self._pointers(real, cleared_calls)
        clears: list[Event] = []
        for event in real:
            view = self._cleared(event, cleared_calls, event.id in older, named)
            if view is None:
                continue
            view = view.evolve(cleared=True)  # counted as the placeholder sent in its place
            view = view.evolve(token_count=count_event(view, estimator))
            if view.token_count < event.token_count:  # never grows the context
                clears.append(view)
        by_id = {e.id: e for e in real}
        saved = sum(by_id[e.id].token_count - e.token_count for e in clears)
        if not clears:
            return CompactionPlan(strategy=self.name, skipped_reason=SkipReason.WITHIN_LIMIT)
        if saved < max(self.min_cleared_tokens, self.min_saved_tokens or 0):
            return CompactionPlan(strategy=self.name, skipped_reason=SkipReason.NOT_WORTH_IT)
        return CompactionPlan(
            strategy=self.name, clears=tuple(clears), tokens_estimated_saved=saved
        )

    def _calls_to_clear(self, real: Sequence[Event]) -> dict[str, ToolCall]:
        """The answered calls older than the newest ``keep_tool_uses``, excluded tools left out."""
        calls = [call for event in real for call in event.tool_calls]
        older = calls[: max(0, len(calls) - self.keep_tool_uses)]
        answered = {r.call_id for event in real for r in event.tool_results}
        excluded = set(self.exclude_tools)
        return {
            call.id: call for call in older if call.id in answered and call.name not in excluded
        }

    def _pointers(self, real: Sequence[Event], calls: dict[str, ToolCall]) -> dict[str, list[str]]:
        """The identifiers each cleared result's placeholder names, by call id.

        Results are read newest first, ``MAX_SPAN_CHARS`` in all for the pass;
        an identifier a later assistant action used ranks first.
        """
        if not self.keep_identifiers or not calls:
            return {}
        actions = newest_actions(real)
        named: dict[str, list[str]] = {}
        left = MAX_SPAN_CHARS
        for index in range(len(real) - 1, -1, -1):
            for result in real[index].tool_results:
                call = calls.get(result.call_id)
                if call is None or left <= 0:
                    continue
                left -= min(len(result.content), left)
                # A result already showing its placeholder names what it names, in
                # its order: re-ranked, it would read as new and be cleared again.
                named[call.id] = pointers(
                    result.content,
                    index=index,
                    actions=None if real[index].cleared else actions,
                    leave_out=(call.id, call.name),
                )
        return named

    def _older_turns(self, real: Sequence[Event]) -> set[str]:
        """Ids of the events with reasoning before the newest ``keep_reasoning_turns`` turns."""
        if self.keep_reasoning_turns is None:
            return set()
        turns = sum(1 for e in real if e.is_turn_start)
        last_older = turns - self.keep_reasoning_turns  # turns numbered from 1; 0 is before any
        older: set[str] = set()
        turn = 0
        for event in real:
            turn += 1 if event.is_turn_start else 0
            if turn > last_older:
                break
            if any(r.text for r in event.reasoning):
                older.add(event.id)
        return older

    def _cleared(
        self,
        event: Event,
        calls: dict[str, ToolCall],
        clear_reasoning: bool,
        named: dict[str, list[str]],
    ) -> Event | None:
        """``event`` with its results (and inputs) of ``calls`` cleared, and its reasoning
        text when ``clear_reasoning``; None if unchanged."""
        results = tuple(self._result(r, calls, named) for r in event.tool_results)
        arguments = self.clear_tool_inputs and event.tool_calls
        tool_calls = (
            tuple(
                replace(c, arguments_json=CLEARED_ARGUMENTS) if c.id in calls else c
                for c in event.tool_calls
            )
            if arguments
            else event.tool_calls
        )
        reasoning = (
            tuple(replace(r, text="") for r in event.reasoning)
            if clear_reasoning
            else event.reasoning
        )
        if (
            results == event.tool_results
            and tool_calls == event.tool_calls
            and reasoning == event.reasoning
        ):
            return None
        return event.evolve(tool_results=results, tool_calls=tool_calls, reasoning=reasoning)

    def _result(
        self, result: ToolResult, calls: dict[str, ToolCall], named: dict[str, list[str]]
    ) -> ToolResult:
        call = calls.get(result.call_id)
        if call is None:  # excluded tools were left out by the call's name: one rule for both
            return result
        content = self.placeholder_for(call.id, call.name, named.get(call.id, ()))
        return replace(result, content=content)
