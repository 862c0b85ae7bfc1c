"""The processes the benches and tests start: what they inherit that they should not."""

from __future__ import annotations

import signal


def ctrl_c_stops() -> None:
    """In the child, before it starts (``Popen(preexec_fn=...)``): Ctrl-C (SIGINT) as
    a terminal gives it. A process started in the background by a shell without job
    control (``nohup pytest &``, some CI runners) ignores SIGINT, its children inherit
    that, and Python then leaves it ignored: stopping `voice listen` or `voice serve`
    with Ctrl-C waited out its time-out (10-20 s each) and killed it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
