"""The repeatable clock's cost model (voice simulate --repeatable): a job's charge comes
from its size alone, so two runs of a script give the session the same inputs at the
same moments."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from voice.conversation.actions import AsrJob, EotJob, LlmClose, LlmStep, ToolChoice, TtsJob
from voice.listen.listener import TranscribeRequest
from voice.runtime.clocks import ModelledCost


def test_each_job_is_charged_by_its_size_and_the_same_every_time() -> None:
    cost = ModelledCost()
    two_seconds = np.zeros(32000, np.float32)
    request = TranscribeRequest(1, 1, two_seconds, "", False, 32000, False)
    assert cost(AsrJob(request), None) == 30 + 25 * 2
    assert cost(LlmStep(7, []), "Hello") == 15 + 60  # the step that opens the reply
    assert cost(LlmStep(7, []), " there") == 15
    assert cost(TtsJob(7, 0, "Hello there."), np.zeros(16000, np.float32)) == 1 + 170
    assert cost(EotJob(7, [], "hi"), 0.5) == 60
    assert cost(LlmClose(7), None) == 1
    choice = ToolChoice(7, "what's on today", chooser=None)
    assert cost(choice, None) == 10  # no tool
    assert cost(choice, SimpleNamespace(raw="")) == 10  # settled from the words
    assert cost(choice, SimpleNamespace(raw='{"day": "today"}')) == 610  # model-written
    again = ModelledCost()
    assert [again(AsrJob(request), None) for _ in range(3)] == [80.0] * 3
