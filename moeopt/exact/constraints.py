"""The constraints of the CP-SAT model (:class:`Constraints.add_all` is the table of contents).

Generic: the model knows events, resources, pools, colocation groups and semaphores, never what
they stand for. Each constraint below is a relaxation of the real rule on ticks, or the rule
itself; the proof is in :mod:`moeopt.exact.model`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from moeopt.exact.bounds import pool_groups, pool_usage

SYMMETRY_BUDGET = 20_000
"""Auxiliary Booleans of the symmetry breaking (events × sites); beyond it, a prefix of the events."""

if TYPE_CHECKING:
    from moeopt.exact.model import ExactModel


class Constraints:
    """Adds every constraint of an :class:`~moeopt.exact.model.ExactModel`."""

    def __init__(self, model: ExactModel) -> None:
        self.m = model
        self.inst = model.inst
        self.cg = model.inst.cg
        self.cp = model.cp

    def add_all(self) -> None:
        # Order: pool choices exist already (made with the variables); _resources reads them.
        self._makespan_interval()
        self._precedence()
        self._makespan()
        self._resources()
        self._pools()
        self._colocation()
        self._semaphores()
        self._redundant()
        self._symmetry()

    # ------------------------------------------------------------------ core rules
    def _precedence(self) -> None:
        """``start(j) ≥ end(i) + λ`` (λ rounded down to ticks)."""
        m = self.m
        for j in range(self.cg.n):
            for i, lam in self.inst.preds[j]:
                self.cp.add(m.start[j] >= m.end[i] + lam)

    def _makespan_interval(self) -> None:
        """The interval ``[makespan, horizon + 1)``, added to every no-overlap and cumulative with
        the whole capacity (redundant: every event ends by the makespan).

        *Why it is sound.* Every event interval ``[S_i, E_i)`` has ``E_i ≤ makespan``, and so has
        every holding interval ``[S_a, E_r)`` of a released pair: none overlaps
        ``[makespan, horizon + 1)``, which can therefore take the whole capacity. A unit never
        released is held on ``[S_a, horizon + 1)``; at an instant after the makespan at most the
        ``U`` never-released units of a semaphore are held, so there the interval takes
        ``C − U`` (nothing when ``U = C``). *Why it helps.* The solver's cumulative and
        disjunctive reasoning (energy, edge finding) then bounds the makespan directly: the
        events of one resource must fit before the makespan's interval, not only before each
        successor's start. On the hardest PSPLIB j30 instances it made CP-SAT's proofs several
        times faster.
        """
        m = self.m
        size = self.cp.new_int_var(1, self.inst.horizon + 1, "makespan_tail")
        m.makespan_tail = size
        m.makespan_interval = self.cp.new_interval_var(
            m.makespan, size, self.inst.horizon + 1, "makespan_interval"
        )
        m.num_intervals += 1

    def _makespan(self) -> None:
        """The makespan covers every event's end (sinks suffice: the others end before a sink)."""
        m = self.m
        for i in range(self.cg.n):
            if not self.inst.succs[i]:
                self.cp.add(m.makespan >= m.end[i])

    def _resources(self) -> None:
        """One no-overlap per exclusive resource, over the events holding it.

        Exact mode adds the optional interval of every pool choice of that member. Intervals of
        zero ticks are left out (see the model's docstring).
        """
        m = self.m
        cg = self.cg
        per_res: dict[int, list[Any]] = {}
        for i in range(cg.n):
            if m.min_size(i) <= 0:
                continue
            for r in cg.fixed[i]:
                per_res.setdefault(r, []).append(m.interval[i])
        for ch in m.choices:
            i = ch.event
            if m.min_size(i) <= 0:
                continue
            for member, lit in ch.options:
                if lit is None:
                    per_res.setdefault(member, []).append(m.interval[i])
                else:
                    per_res.setdefault(member, []).append(
                        m.optional_interval(i, lit, f"bind[{i},{ch.slot},{cg.res_names[member]}]")
                    )
        for _r, ivs in sorted(per_res.items()):
            if len(ivs) > 1:
                self.cp.add_no_overlap([*ivs, m.makespan_interval])

    def _pools(self) -> None:
        """Exact: each placeholder slot binds exactly one member; an event never binds one member
        twice. Relaxed: one cumulative per pool, capacity = number of members."""
        m = self.m
        if self.inst.mode == "exact":
            per_event_member: dict[tuple[int, int], list[Any]] = {}
            for ch in m.choices:
                lits = [lit for _m, lit in ch.options if lit is not None]
                if lits:
                    self.cp.add_exactly_one(lits)
                for member, lit in ch.options:
                    per_event_member.setdefault((ch.event, member), []).append(lit)
            for (_i, _member), lits in sorted(per_event_member.items()):
                if len(lits) > 1:  # overlapping pools: two slots of one event on one member
                    if any(lit is None for lit in lits):
                        for lit in lits:
                            if lit is not None:
                                self.cp.add(lit == 0)
                    else:
                        self.cp.add_at_most_one(lits)
        else:
            self._pool_cumulatives()

    def _pool_cumulatives(self) -> None:
        """Cumulative per pool over the events using it: placeholder slots plus fixed members;
        and one per group of pools sharing members, over the union of their members.

        A valid relaxation in both modes (each member runs one event at a time, see
        :mod:`moeopt.exact.bounds`); in exact mode it is redundant and gives the solver the
        pools' energy reasoning. In relaxed mode the group cumulative is what keeps two pools
        over the same cores from using each core twice at once.
        """
        m = self.m
        cg = self.cg
        sets = [([p], set(members)) for p, members in enumerate(cg.pool_members)]
        for ps, union in sets + pool_groups(cg):
            usage = pool_usage(cg, set(ps), union)
            if sum(q for _i, q in usage) > len(union):
                self.cp.add_cumulative(
                    [*(m.interval[i] for i, _q in usage), m.makespan_interval],
                    [*(q for _i, q in usage), len(union)],
                    len(union),
                )

    def _colocation(self) -> None:
        """Exact: every placeholder of a colocation group binds at the group's one site.

        Groups with one possible site were restricted when the choices were made; for the others,
        the members chosen at each site add up to that site's literal. Relaxed: ignored (dropping
        a constraint only relaxes).
        """
        m = self.m
        cg = self.cg
        if self.inst.mode != "exact" or not m.site_lits:
            return
        for ch in m.choices:
            g = cg.group[ch.event]
            lits = m.site_lits.get(g)
            if lits is None:
                continue
            for site, site_lit in lits.items():
                at_site = [lit for member, lit in ch.options if cg.res_site[member] == site]
                if any(lit is None for lit in at_site):
                    self.cp.add(site_lit == 1)
                else:
                    self.cp.add(sum(at_site) == site_lit)

    def _semaphores(self) -> None:
        """Per semaphore: a cumulative over holding intervals where a pairing exists (exactly
        the reservoir, by the pairing theorem), else a reservoir; dropped when it cannot bind."""
        for s in range(len(self.cg.sem_names)):
            kind = self.inst.sem_model[s]
            if kind == "holding":
                self._holding(s)
            elif kind == "reservoir":
                self._reservoir(s)

    def _holding(self, s: int) -> None:
        m = self.m
        cp = self.cp
        pairing = self.inst.pairings[s]
        cap = self.cg.sem_cap[s]
        ivs = []
        demands = []
        big = []  # intervals with more than half the capacity: pairwise disjoint
        for a, r, k in pairing.pairs:
            if r == a:
                iv = m.interval[a]
                min_len = m.min_size(a)
            else:
                size = cp.new_int_var(0, self.inst.horizon, f"hold[{self.cg.sem_names[s]},{a},{r}]")
                iv = cp.new_interval_var(m.start[a], size, m.end[r], f"holding[{s},{a},{r}]")
                m.num_intervals += 1
                m.holding.append((size, a, r))
                min_len = m.min_size(a) + m.min_size(r)
            ivs.append(iv)
            demands.append(k)
            if 2 * k > cap and min_len > 0:
                big.append(iv)
        # An unreleased unit is taken for ever: [start, horizon + 1) covers every tick the
        # schedule can reach, the makespan instant included (a zero-length event acquiring at
        # the makespan still takes its unit at that instant).
        forever = self.inst.horizon + 1
        for a, k in pairing.unreleased:
            size = cp.new_int_var(1, forever, f"hold[{self.cg.sem_names[s]},{a},end]")
            ivs.append(cp.new_interval_var(m.start[a], size, forever, f"holding[{s},{a},end]"))
            m.num_intervals += 1
            m.holding.append((size, a, -1))
            demands.append(k)
        never = sum(k for _a, k in pairing.unreleased)
        if never < cap:
            ivs.append(m.makespan_interval)
            demands.append(cap - never)
        cp.add_cumulative(ivs, demands, cap)
        if len(big) > 1:
            cp.add_no_overlap([*big, m.makespan_interval])

    def _reservoir(self, s: int) -> None:
        """Free units ``C − Σ acquired + Σ released`` within ``[0, C]``: CP-SAT's level starts at
        0, so the changes are −A at acquire starts, +R at release ends, level in ``[−C, 0]``."""
        m = self.m
        cg = self.cg
        times: list[Any] = []
        changes: list[int] = []
        for i in range(cg.n):
            for s2, a in cg.acq[i]:
                if s2 == s:
                    times.append(m.start[i])
                    changes.append(-a)
            for s2, r in cg.rel[i]:
                if s2 == s:
                    times.append(m.end[i])
                    changes.append(r)
        self.cp.add_reservoir_constraint(times, changes, -cg.sem_cap[s], 0)
        m.largest_reservoir = max(m.largest_reservoir, len(times))

    # ------------------------------------------------------------------ symmetry
    def _symmetry(self) -> None:
        """Value precedence over each class of interchangeable sites (exact mode; the theorem is in
        :mod:`moeopt.exact.symmetry`): ``e_i`` binds the lead pool's member at ``k_j`` only if an
        earlier ``e_{i'}`` binds the one at ``k_{j−1}``. ``used[j]`` is "some event so far binds
        ``k_j``", one Boolean per (event, site), kept as a running maximum."""
        m = self.m
        cp = self.cp
        if self.inst.mode != "exact":
            return
        for sc in self.inst.site_classes:
            col = {mem: j for j, mem in enumerate(sc.member)}
            lits: dict[int, dict[int, Any]] = {}
            for ch in m.choices:
                # events with a forced member are left out of the list (any list of events with
                # one placeholder of the lead pool will do for the theorem)
                if ch.pool == sc.pool and all(lit is not None for _mem, lit in ch.options):
                    lits[ch.event] = {col[mem]: lit for mem, lit in ch.options if mem in col}
            events = [i for i in sc.events if i in lits][: max(1, SYMMETRY_BUDGET // len(sc.sites))]
            used: list[Any] = [None] * len(sc.sites)  # None: no event so far binds k_j
            for i in events:
                b = lits[i]
                for j, lit in b.items():
                    if j == 0:
                        continue
                    if used[j - 1] is None:
                        cp.add(lit == 0)
                    else:
                        cp.add_implication(lit, used[j - 1])
                for j, lit in b.items():
                    u = cp.new_bool_var(f"sym_used[{i},{j}]")
                    cp.add_max_equality(u, [lit] if used[j] is None else [used[j], lit])
                    used[j] = u

    # ------------------------------------------------------------------ redundant
    def _redundant(self) -> None:
        """Implied constraints that help the solver: pool energy in exact mode, the energy
        distances between pairs of events, disjunctive cliques, and (in the makespan's domain,
        set with the variables) the best static bound."""
        m = self.m
        if self.inst.mode == "exact":
            self._pool_cumulatives()
        for i, j, delay in self.inst.delays:
            self.cp.add(m.start[j] >= m.start[i] + delay)
        for clique in self.inst.cliques:
            self.cp.add_no_overlap([*(m.interval[i] for i in clique), m.makespan_interval])
