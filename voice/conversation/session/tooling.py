"""Tool calls in the conversation (docs/tools.md): deciding, running, and what is said.

A reply to the user's words first asks the tools (a ``ToolChoice`` job on the engine
thread: the shortlist and the grammar-held model). No call: the model answers as
usual. A call waits until its reply is committed (a speculative reply never acts on
the game), then runs off the engine thread (voice.conversation.toolcalls) while the
session keeps listening. After ``filler_after_ms`` the filler is said as the start of
the reply; the result is said as written (a ``Say``, or a string with ``results =
"say"``) or goes to the model, which tells the outcome; a raise or a run past
``time_limit_s`` ends the reply with the tools' apology and an ``error`` event. A
barge-in cancels the call (an async tool) or drops its result (a sync one). Every
``tool_call`` gets one ``tool_result``.
"""

from __future__ import annotations

from concurrent.futures import CancelledError

from voice.conversation import toolcalls
from voice.conversation.actions import ToolChoice
from voice.conversation.generation import Generation
from voice.conversation.session.base import SessionBase
from voice.events import Error, ReplyText, ToolCall, ToolResult
from voice.knowledge.policy import Decision
from voice.reply.history import Prompt
from voice.think.backend import Message
from voice.tools.choose import Call, Chooser, Shortlist, ToolsConfig
from voice.tools.schema import Say


def knowledge_knows(decision: Decision, short: Shortlist) -> bool:
    """Whether the knowledge's ``decision`` should answer words the tools shortlisted:
    it says an entry with confidence, at least as near the words as the nearest tool."""
    best = decision.matches[0] if decision.matches else None
    top = max((short.scores[t.name] for t in short.candidates), default=0.0)
    return decision.kind == "say" and best is not None and best.meaning >= top


class ToolCalls(SessionBase):
    """The tool-call part of a session; ``tools`` is None when it has no tools."""

    tools: Chooser | None = None
    _next_call = 1

    @property
    def tools_config(self) -> ToolsConfig:
        return self.tools.config if self.tools is not None else ToolsConfig()

    def _mark_tool_choice(self, gen: Generation) -> bool:
        """Called for every new generation, before the knowledge: words whose meaning is
        near a tool's (the shortlist: one embedding, a few ms) ask the tools, and the
        grammar then makes one of the shortlisted calls. True: it will call."""
        if self.tools is None or not gen.user_text.strip() or gen.said:
            return False
        try:
            short = self.tools.focus(gen.user_text)[1]
            if not short.candidates or self._knowledge_knows(gen.user_text, short):
                return False
        except Exception as exc:  # the tools must never silence the assistant
            self._emit(Error(audio_ms=self.now_ms, code="tool_choice_failed", message=str(exc)))
            return False
        gen.tool_stage = "choose"
        return True

    def _knowledge_knows(self, text: str, short: Shortlist) -> bool:
        """A knowledge file that answers the words with confidence, and is at least as
        near their meaning as the nearest tool (the same encoder's cosines), answers
        them: at the museum kiosk "Is there a car park?" and "When was the museum
        founded?" had called its events tool (0.41, 0.63), nearer their entries (0.78,
        0.80). The decision is kept by text, so the knowledge's own turn reuses it."""
        return self.grounding is not None and knowledge_knows(self.grounding(text), short)

    def _tool_job(self, gen: Generation) -> ToolChoice | None:
        """The tool work ``gen`` waits on (None: it waits on a running call)."""
        if gen.tool_stage == "choose":
            gen.tool_stage = "choosing"
            return ToolChoice(gen.gen_id, gen.user_text, self.tools)
        return None

    def _on_tool_choice(self, job: ToolChoice, result: object) -> None:
        gen = self._gen(job.gen_id)
        if gen is None or gen.tool_stage != "choosing":
            return  # cancelled meanwhile
        if isinstance(result, Call):
            gen.tool_call, gen.tool_stage = result, "call"
            self._watch_tools()
        else:
            gen.tool_stage = ""  # no tool: the model answers

    def _tool_choice_failed(self, job: ToolChoice, error: BaseException) -> None:
        """Deciding failed (an engine fault): the model answers as if no tool matched."""
        self._emit(Error(audio_ms=self.now_ms, code="tool_choice_failed", message=str(error)))
        gen = self._gen(job.gen_id)
        if gen is not None:
            gen.tool_stage = ""

    def _watch_tools(self) -> None:
        """Start a committed reply's call; say the filler, take its result, or give up."""
        gen = self._reply
        if gen is None or not gen.tool_stage:
            return
        config = self.tools_config
        if gen.tool_stage == "call" and gen.tool_call is not None and not gen.speculative:
            call_id, self._next_call = self._next_call, self._next_call + 1
            gen.tool_run = toolcalls.start(gen.tool_call, call_id)
            gen.tool_stage = "run"
            self._emit(
                ToolCall(
                    audio_ms=self.now_ms, reply_id=gen.gen_id, call_id=call_id,
                    name=gen.tool_call.tool.name, arguments=dict(gen.tool_call.arguments),
                    choose_ms=gen.tool_call.choose_ms,
                )
            )  # fmt: skip
        run = gen.tool_run
        if gen.tool_stage != "run" or run is None:
            return
        limit_s = toolcalls.time_limit_s(run.call, config.time_limit_s)
        if run.future.done():
            self._tool_done(gen)
        elif run.elapsed_ms >= limit_s * 1000:
            run.cancel()
            self._tool_over(gen, "timeout", f"took longer than {limit_s:g} s")
        elif (
            not run.filler_said and config.filler_text and run.elapsed_ms >= config.filler_after_ms
        ):
            run.filler_said = True
            gen.text_parts.append(config.filler_text + " ")
            gen.pending_chunks.append(config.filler_text)
            text = config.filler_text + " "
            filler = ReplyText(audio_ms=self.now_ms, reply_id=gen.gen_id, text=text)
            self._emit(filler)

    def _tool_done(self, gen: Generation) -> None:
        run = gen.tool_run
        assert run is not None
        try:
            value = run.future.result()
        except CancelledError:
            self._tool_over(gen, "cancelled", "cancelled")
            return
        except Exception as exc:  # the tool's own failure: apologised for, never fatal
            self._tool_over(gen, "error", f"{type(exc).__name__}: {exc}")
            return
        text = toolcalls.result_text(value)
        self._tool_result(gen, "ok", text)
        call = run.call
        gen.tool_note = f"({toolcalls.describe(call)}: {text})"
        if isinstance(value, Say) or (
            isinstance(value, str) and self.tools_config.results == "say"
        ):
            gen.said = True
            self._say_in(gen, text)
            return
        if gen.messages:
            system, *rest = gen.messages
            prompt = toolcalls.result_prompt(system.content, call, text)
            old = gen.messages
            seed, limits = (old.seed, old.limits) if isinstance(old, Prompt) else (None, None)
            gen.messages = Prompt([Message(system.role, prompt), *rest], seed, limits)

    def _tool_over(self, gen: Generation, status: str, problem: str) -> None:
        """The call did not give a result: say so (apology and error), unless the user
        cut in (cancelled), where nothing more is said."""
        self._tool_result(gen, status, problem)
        if status == "cancelled":
            return
        name = gen.tool_call.tool.name if gen.tool_call is not None else "tool"
        code = "tool_timeout" if status == "timeout" else "tool_failed"
        self._emit(Error(audio_ms=self.now_ms, code=code, message=f"{name}: {problem}"))
        gen.said = True
        self._say_in(gen, self.tools_config.apology_text)

    def _say_in(self, gen: Generation, text: str) -> None:
        spoken = gen.add_delta(text, self.now_ms) + gen.finish_text()
        if spoken:
            self._emit(ReplyText(audio_ms=self.now_ms, reply_id=gen.gen_id, text=spoken))

    def _tool_result(self, gen: Generation, status: str, text: str) -> None:
        run = gen.tool_run
        gen.tool_stage = ""
        if run is None or gen.tool_call is None:
            return
        gen.tool_run = None
        self._emit(
            ToolResult(
                audio_ms=self.now_ms, reply_id=gen.gen_id, call_id=run.call_id,
                name=gen.tool_call.tool.name, status=status, result=text, run_ms=run.elapsed_ms,
            )
        )  # fmt: skip

    def _cancel_tool(self, gen: Generation) -> None:
        """The reply is cancelled (a barge-in, a stop): so is its call."""
        if gen.tool_run is not None:
            gen.tool_run.cancel()
            gen.tool_note = f"({toolcalls.describe(gen.tool_run.call)}: cancelled)"
            self._tool_result(gen, "cancelled", "cancelled: the user cut in")
        gen.tool_stage = ""
