"""The lanes of a pipeline-parallel replica, run in lock step.

A replica of ``tp x pp`` chips keeps one micro-batch in each of its ``pp`` stages: it
serves as ``pp`` *lanes* (:mod:`inferlab.model.steptime`), each a
:class:`~inferlab.serving.engines.ContinuousEngine` of its own. The lanes are not
independent: a round of steps lasts as long as its slowest lane's (:class:`LockStep`).

Used by the simulator (:func:`inferlab.serving.simulator.simulate_lanes`) and through it
by every MLPerf scenario and prediction of a pipelined layout.
"""

from __future__ import annotations

import math

from inferlab.serving.engines import ContinuousEngine, Record

# The closed forms of a run of decode steps, unchecked: the lanes call them every round.
from inferlab.serving.engines import _advance as _advance
from inferlab.serving.engines import _elapsed as _elapsed


class LockStep:
    """The lanes of one pipeline-parallel replica, each a
    :class:`~inferlab.serving.engines.ContinuousEngine` with its own micro-batch (the list
    ``engines``), run in lock step.

    With ``pp`` stages and a micro-batch per lane, each stage works on the micro-batches
    in turn, and a micro-batch's next step enters the first stage only once its last
    step has left the last stage. In a round of one step per lane the stages do the
    lanes' summed work divided among them, and each micro-batch makes its whole trip, so
    the round lasts as long as its slowest lane's step (never less than that summed work
    over ``pp``): a lane with a light decode step waits for a lane carrying a heavy chunk
    of prompt. Each lane's step ends at the round's end, its tokens with it. A lane with
    nothing to do sits the round out (the bubble of a lightly loaded pipeline); when no
    lane has work the clock moves to the next arrival. A lane that was idle joins at the
    next round, where a real pipeline would let its step into the first stage as soon as
    that stage is free: at a light load its first tokens come up to a round late.

    While no lane has prompt work, the lanes' decode steps run together in closed form
    as a single engine's do (:func:`~inferlab.serving.engines.advance`), each round as
    long as the longest of the lanes' steps, until the first event of any lane (a
    retirement, a full cache, an arrival it could admit, or an arrival at an idle lane).
    """

    def __init__(self, engines: list) -> None:
        if (not isinstance(engines, (list, tuple)) or not engines
                or not all(isinstance(engine, ContinuousEngine) for engine in engines)):
            raise ValueError("engines: give a list of ContinuousEngine objects, one per lane")
        self.engines = list(engines)
        for engine in self.engines:
            engine.events = []

    def run(self) -> list[Record]:
        lanes = self.engines
        clock = 0.0
        while any(engine.done < engine.n for engine in lanes):
            for engine in lanes:
                engine.t = clock
                engine.admit_arrived()
            working, idle = [], []
            for engine in lanes:
                (working if engine.busy_now else idle).append(engine)
            # The next arrival at a lane with nothing to do, which ends a run of rounds.
            wake = min((engine.arrivals.incoming[0][0] for engine in idle
                        if engine.arrivals.incoming), default=math.inf)
            if not working:
                clock = wake
                continue
            clock = self._round(working, clock, wake)
        return [engine.record() for engine in lanes]

    @staticmethod
    def _round(working: list[ContinuousEngine], clock: float, wake: float) -> float:
        """One round (or, with no prompt work anywhere, a run of rounds up to the first
        event of any lane, ``wake`` an idle lane's next arrival) of the working lanes from
        ``clock``; returns when it ends."""
        prefilled, plans = [], []
        for engine in working:
            recorded = len(engine.segments)
            while True:
                if engine.prefill.step(engine):
                    prefilled.append((engine, recorded, engine.t))
                    break
                plan = engine.decode_plan()
                if plan is not None:
                    plans.append((engine, plan))
                    break
                # A full cache preempted a request: the lane decides again at once, as a
                # lone engine does.
        if prefilled:
            # One round: the decoding lanes take one step each, as long as the slowest.
            end = max([ended for _, _, ended in prefilled]
                      + [clock + plan[0] for _, plan in plans])
            k, took, pieces = 1, end - clock, ((0.0, 1, end - clock, 0.0),)
        else:
            k, took, pieces = _in_step([plan[:2] for _, plan in plans],
                                       min(plan[2] for _, plan in plans),
                                       min([plan[3] for _, plan in plans] + [wake - clock]))
            end = clock + took
        for engine, plan in plans:
            engine.decode_apply(plan, k, took, _elapsed(k, plan[0], plan[1]),
                                tuple((clock + start, steps, m0, m1)
                                      for start, steps, m0, m1 in pieces))
        for engine, recorded, ended in prefilled:
            if ended < end:
                _stretch(engine, recorded, ended, end)
        for engine in working:
            engine.events.clear()
            engine.t = end
        return end


def _in_step(lines, k_max: int, tau: float) -> tuple[int, float, list]:
    """Decode steps of lanes in lock step, lane ``i``'s step ``j`` taking
    ``m0_i + m1_i j`` for ``lines`` of ``(m0_i, m1_i)``: each step lasts the longest of
    them. Up to ``k_max`` steps, stopping at the first that ends at or after ``tau``
    seconds. Returns the steps run, their time, and the pieces ``(start, steps, m0, m1)``
    of the longest line they followed (it changes where a steeper line overtakes)."""
    pieces, j, before = [], 0, 0.0
    while j < k_max:
        m0, m1 = max(lines, key=lambda line: (line[0] + line[1] * j, line[1]))
        base = m0 + m1 * j
        # The first later step at which a steeper line overtakes this one.
        until = k_max
        for a0, a1 in lines:
            if a1 > m1:
                # At least the next step: rounding must not hide an overtake.
                overtakes = max(j + 1, math.floor((m0 - a0) / (a1 - m1)) + 1)
                if j < overtakes < until:
                    until = overtakes
        steps, took = _advance(base, m1, until - j, tau - before)
        pieces.append((before, steps, base, m1))
        before += took
        j += steps
        if before >= tau:
            break
    return j, before, pieces


def _stretch(engine: ContinuousEngine, recorded: int, ended: float, end: float) -> None:
    """Move what ``engine``'s step of this round recorded at its own end, ``ended``, to the
    round's ``end``: the step's time, and the first tokens and finishes it made."""
    for index in range(recorded, len(engine.segments)):
        start, steps, _, _, running, prompt = engine.segments[index]
        engine.segments[index] = (start, steps, end - start, 0.0, running, prompt)
    first, finish, history = engine.first, engine.finish, engine.history
    for i in engine.events:
        if first[i] == ended:
            first[i] = end
        if finish[i] == ended:
            finish[i] = end
        if i in history and history[i][-1] == ("prefill", ended, 0):
            history[i][-1] = ("prefill", end, 0)
