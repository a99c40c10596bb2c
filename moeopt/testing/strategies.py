"""Hypothesis strategies for small random event graphs with every feature of the event model.

``event_graphs()`` draws valid graphs (they always compile) of up to ``max_events`` events over
three sites ``c0``, ``c1``, ``c2`` and two roles ``a``, ``b``: fixed resources, pool
placeholders ``a:*`` / ``b:*`` (the pools list the three sites in a drawn order; ``b`` has one or
two members per site), an event with a fixed resource and a placeholder, an event with both
placeholders, events with no resource, dependencies with λ, colocation with an earlier event,
and two semaphores ``s1`` / ``s2`` used both ways a kernel uses them: units held by one event
for its duration, and units taken by a producer and given back by a consumer that depends on
it. Every event carries a ``stage`` label (``x``, ``y`` or ``z``) that no scheduler may read.

Some drawn graphs deadlock (a producer whose units are never given back starves a later
acquirer): the scheduler then raises ``SchedulingError`` with "deadlock" in its message.
"""

from __future__ import annotations

from hypothesis import strategies as st

from moeopt.core.events import Event, EventGraph

SITES = ("c0", "c1", "c2")
DURATIONS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.25)
LAMBDAS = (0.0, 0.0, 0.5, 1.25)


@st.composite
def event_graphs(draw: st.DrawFn, max_events: int = 9, semaphores: bool = True) -> EventGraph:
    """A valid graph: fixed resources and pool placeholders over 3 sites x 2 roles, λ edges,
    colocation with an earlier event, own-held semaphore units and producer -> consumer slots."""
    n = draw(st.integers(1, max_events))
    pools = {
        role: [f"{s}.{role}" for s in draw(st.permutations(SITES))] for role in ("a", "b")
    }
    if draw(st.booleans()):
        # two members of b per site (in a drawn order): a colocated b placeholder whose group
        # has no site yet then chooses among several members per site, in pool order
        pools["b"] = list(draw(st.permutations([f"{s}.{u}" for s in SITES for u in ("b", "bb")])))
    sems = {}
    if semaphores:
        sems = {"s1": draw(st.integers(1, 3)), "s2": draw(st.integers(1, 2))}
    g = EventGraph(semaphores=sems, pools=pools)
    names: list[str] = []
    res_of: dict[str, list[str]] = {}
    open_slots: list[tuple[str, str, int]] = []  # (producer, semaphore, units) not yet released
    for k in range(n):
        name = f"e{k}"
        kind = draw(st.sampled_from(["fixed", "pool", "pool", "both", "none", "two"]))
        if kind == "fixed":
            res = [f"{draw(st.sampled_from(SITES))}.{draw(st.sampled_from(['a', 'b']))}"]
        elif kind == "pool":
            res = [f"{draw(st.sampled_from(['a', 'b']))}:*"]
        elif kind == "both":
            res = [f"{draw(st.sampled_from(SITES))}.a", "b:*"]
        elif kind == "two":
            res = ["a:*", "b:*"]
        else:
            res = []
        deps: dict[str, float] = {}
        if names:
            for p in draw(st.lists(st.sampled_from(names), max_size=3, unique=True)):
                deps[p] = draw(st.sampled_from(LAMBDAS))
        coloc = None
        if names and res and all(r.endswith(":*") for r in res) and draw(st.booleans()):
            # (a group holds at most one event with fixed resources: only placeholder-only
            # events link, each to one partner)
            partners = [p for p in names if res_of[p]]
            if partners:
                coloc = draw(st.sampled_from(partners))
        acquires: dict[str, int] = {}
        releases: dict[str, int] = {}
        if semaphores:
            mode = draw(st.sampled_from(["none", "none", "hold", "produce", "consume"]))
            if mode == "hold":
                sem = draw(st.sampled_from(["s1", "s2"]))
                units = draw(st.integers(1, sems[sem]))
                acquires[sem] = units
                releases[sem] = units
            elif mode == "produce":
                sem = draw(st.sampled_from(["s1", "s2"]))
                acquires[sem] = 1
                open_slots.append((name, sem, 1))
            elif mode == "consume" and open_slots:
                prod, sem, units = open_slots.pop(draw(st.integers(0, len(open_slots) - 1)))
                deps.setdefault(prod, draw(st.sampled_from(LAMBDAS)))
                releases[sem] = units
        g.add(
            Event(
                name,
                resources=res,
                deps=deps,
                acquires=acquires,
                releases=releases,
                colocate_with=coloc,
                duration_us=draw(st.sampled_from(DURATIONS)),
                labels={"stage": draw(st.sampled_from(["x", "y", "z"]))},
            )
        )
        names.append(name)
        res_of[name] = res
    return g
