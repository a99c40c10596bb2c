"""Resolution: global defaults <- profile <- scenario, then the rules that span fields.

:func:`resolve` is the table of contents: it merges the three layers once
(:func:`effective_table`) and applies the named rule groups in a fixed order. The order is part
of the contract: when several rules are broken, the first group's message is the one a user
sees (a missing constant before tiles that do not fit L1, an impossible link before a bad core
group ...). Every rule raises :class:`ScenarioError` (the combination cannot run) or
:class:`NotModelledError` (it could, but the model would ignore a value), naming the fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from moeopt.megamoe.config.budgets import PROFILE_BUDGETS, align, budget, front_reorder_path
from moeopt.megamoe.config.implementation import DISPATCH_BATCH_ROWS, ROW_PAD_BYTES, SCALE_BYTES
from moeopt.megamoe.config.profiles import (
    CONSTANTS,
    GLOBAL_DEFAULTS,
    IMPLEMENTATIONS,
    PROFILE_DEFAULTS,
    PROFILES,
    deep_merge,
    profile_constants,
)
from moeopt.megamoe.config.provenance import Const
from moeopt.megamoe.errors import NotModelledError, ScenarioError
from moeopt.megamoe.scenario.schema import (
    CUBE_STAGES,
    EDGES,
    FIELDS,
    LINK_FIELDS,
    STAGES,
    VECTOR_STAGES,
    Config,
    CoreGroup,
    LinkCfg,
    Scenario,
    check_registered,
)

Links = dict[tuple[str, str], LinkCfg]
Table = Mapping[str, Any]
"""A table of the effective scenario table (the whole, or its ``kernel``, ``policy``, ``options``)."""

REQUIRED_ALWAYS = (
    "cube_mac_per_us_int8",
    "cube_mac_per_us_fp16",
    "gm_l1_bytes_per_us",
    "hbm_bytes_per_us",
    "remote_in_bytes_per_us",
    "remote_out_bytes_per_us",
    "aiv_remote_read_bytes_per_us",
    "aiv_remote_write_bytes_per_us",
    "aiv_local_bytes_per_us",
    "aiv_aggregate_local_bytes_per_us",
    "act_bytes_per_us",
    "act_startup_us",
    "dispatch_call_us",
    "remote_latency_us",
    "flag_latency_us",
    "syncall_us",
    "cross_rank_flag_us",
    "launch_us",
    "front_sort_us_per_route",
    "l1_bytes",
    "bw_unit_bytes_per_us",
    "b_reuse_load_factor",
    "remote_write_excess_share",
    "epoch_sync_us",
)
REQUIRED_URMA = ("urma_get_bytes_per_us", "urma_put_bytes_per_us", "urma_op_us")


def effective_table(s: Scenario) -> dict[str, Any]:
    """Every knob's value in force, nested like a scenario file: the global defaults, over them
    the profile's defaults, over those what ``s`` sets (``links`` merge edge by edge).

    The one place the three layers meet: :func:`resolve`, the knob audit and the search's
    baseline point all read this table. ``p1_override`` / ``p2_override`` have no profile
    default, so the scenario's value is always the one in force.
    """
    profile = PROFILE_DEFAULTS.get(s.profile or "", {})
    own = {**s.to_dict(), "p1_override": s.p1_override, "p2_override": s.p2_override}
    return deep_merge(deep_merge(GLOBAL_DEFAULTS, profile), own)


def resolve(s: Scenario) -> Config:
    """``s`` with every knob resolved and every cross-field rule checked, in this order."""
    raw = effective_table(s)
    kern, pol, opt = raw["kernel"], raw["policy"], raw["options"]
    aic = _core_count_rule(raw)
    _transport_rule(s, kern)
    consts = _constant_rules(s, kern["topo_urma"])
    _tile_rules(kern, consts)
    _buffer_rules(s, raw, consts, aic)
    links = _link_table(opt["links"])
    _edge_rules(links)
    _link_combination_rules(s, kern, opt, links)
    _read_only_with_rules(s, kern, opt, links)
    groups = _core_group_rules(opt["core_groups"], opt["roles"], aic, s.workload.local_experts)
    granularity = _granularity_rules(opt, kern)
    _registered_name_rules(pol, opt)
    _wave_rules(pol, opt)
    v1 = _v1_knob_rules(s, opt, groups)
    _orchestration_rules(s, kern, pol, opt, granularity, groups, links)
    _restructure_rules(pol, opt, links)
    return _config(s, raw, aic, consts, links, groups, granularity, v1)


# --------------------------------------------------------------------------- rule groups
def _core_count_rule(raw: Table) -> int:
    """The die's cube-core count comes from the scenario or its profile: there is no default."""
    if "aic_num" not in raw:
        raise ScenarioError(
            "aic_num is not set and no profile gives it: set aic_num (cube cores per die) or a profile"
        )
    return int(raw["aic_num"])


PEER_WRITE_ONLY = ("pto-a2a3", "pto-a2a3-v1")
"""Profiles whose kernel moves tokens by peer writes only: the PTO MegaMoE kernel
(``kernels/manual/a2a3/dispatch_mega_combine/``, both versions, ../shared/hardware.md) has no
URMA transport, so the URMA path of the megamoe-a8w8 kernel cannot stand for it."""


def _transport_rule(s: Scenario, kern: Table) -> None:
    """``kernel.topo_urma = true`` only on a kernel that has a URMA path. With the URMA rates
    given under [calibration] a PTO profile would otherwise build the other kernel's batched
    GET/PUT transport and report it as the PTO kernel's time."""
    if kern["topo_urma"] and s.profile in PEER_WRITE_ONLY:
        raise ScenarioError(
            f"kernel.topo_urma = true: not allowed with profile {s.profile!r}, whose kernel moves tokens "
            "by peer writes only (it has no URMA path to model); allowed: false, or profile "
            "'megamoe-a8w8' (the kernel with the URMA batched GET/PUT transport)"
        )


def _constant_rules(s: Scenario, topo_urma: bool) -> dict[str, Const]:
    """The profile's constants with the scenario's ``[calibration]`` on top (tagged ``assumed``);
    every constant the model reads must have a value (the URMA rates only with ``topo_urma``)."""
    consts = profile_constants(s.profile)
    for name, value in s.calibration.items():
        consts[name] = Const(
            name, value, CONSTANTS[name][0], "assumed", "set in the scenario's [calibration]"
        )
    needed = list(REQUIRED_ALWAYS) + (list(REQUIRED_URMA) if topo_urma else [])
    missing = [n for n in needed if n not in consts]
    if missing:
        why = (
            f"profile {s.profile!r} has no value for"
            if s.profile
            else "without a profile there is no value for"
        )
        raise ScenarioError(
            f"{why} {', '.join(missing)}; set them under [calibration] "
            f"(e.g. calibration.{missing[0]} = <{CONSTANTS[missing[0]][0]}>) or pick a profile: "
            f"{', '.join(PROFILES)}"
        )
    return consts


def _tile_rules(kern: Table, consts: Mapping[str, Const]) -> None:
    """The A and B k-slices of one tile, ``l1_stages`` deep, fit the core's L1:
    ``(tile_m + tile_n) x tile_k x bytes per element x l1_stages <= l1_bytes`` (the rule every
    profile checks; the PTO kernel's own, with the scales, is :func:`_buffer_rules`)."""
    bpe = 1 if kern["quant"] == "w8a8" else 2
    l1_need = (kern["tile_m"] + kern["tile_n"]) * kern["tile_k"] * bpe * kern["l1_stages"]
    if l1_need > consts["l1_bytes"].value:
        raise ScenarioError(
            f"kernel tiles do not fit L1: (tile_m {kern['tile_m']} + tile_n {kern['tile_n']}) x tile_k "
            f"{kern['tile_k']} x {bpe} B x l1_stages {kern['l1_stages']} = {l1_need} B > L1 "
            f"{int(consts['l1_bytes'].value)} B; allowed: a geometry within L1"
        )


def _buffer_rules(s: Scenario, raw: Table, consts: Mapping[str, Const], aic: int) -> None:
    """Every buffer the profile's kernel allocates fits its budget (the rules and their sources:
    :mod:`moeopt.megamoe.config.budgets`): L1 with the per-channel scales, L0A / L0B / L0C, the
    dispatch UB budget, the front reorder's sort cores and the K alignment. The HCCL window
    depends on the routing and is checked when a rank's graph is built."""
    rules = PROFILE_BUDGETS.get(s.profile, PROFILE_BUDGETS[None])
    kern = raw["kernel"]
    w8a8 = kern["quant"] == "w8a8"
    bpe = 1 if w8a8 else 2
    tm, tn, tk, stages = kern["tile_m"], kern["tile_n"], kern["tile_k"], kern["l1_stages"]
    who = f"the {s.profile} kernel"
    if rules.l1_scales:
        scale = SCALE_BYTES if w8a8 else 0
        stage = (tm + tn) * tk * bpe + tn * scale
        l1 = int(consts["l1_bytes"].value)
        if stage * stages > l1:
            raise ScenarioError(
                f"kernel tiles do not fit L1 ({who} keeps A, B and the per-channel scales in every L1 "
                f"stage): (tile_m {tm} + tile_n {tn}) x tile_k {tk} x {bpe} B + tile_n {tn} x {scale} B "
                f"scales = {stage} B per stage x l1_stages {stages} = {stage * stages} B > L1 {l1} B "
                f"({l1 // 1024} KiB); allowed: a geometry within L1"
            )
    if rules.l0:
        kf = int(budget("cube_k_fractal_int8" if w8a8 else "cube_k_fractal_fp16"))
        for name, need, what in (
            ("l0a", tm * kf * bpe * int(budget("l0a_buffers")), f"tile_m {tm} x K part {kf}"),
            ("l0b", kf * tn * bpe * int(budget("l0b_buffers")), f"K part {kf} x tile_n {tn}"),
        ):
            cap = int(budget(f"{name}_bytes"))
            if need > cap:
                bufs = int(budget(f"{name}_buffers"))
                raise ScenarioError(
                    f"kernel tiles do not fit {name.upper()}: {what} x {bpe} B x {bufs} buffers = {need} B > "
                    f"{name.upper()} {cap} B even with the smallest K part the cube takes; allowed: a "
                    f"smaller tile"
                )
        acc = tm * tn * int(budget("l0c_element_bytes")) * int(budget("l0c_buffers"))
        cap = int(budget("l0c_bytes"))
        if acc > cap:
            raise ScenarioError(
                f"kernel tile does not fit L0C: tile_m {tm} x tile_n {tn} x "
                f"{int(budget('l0c_element_bytes'))} B fp32 accumulators = {acc} B > L0C {cap} B ({who} "
                f"keeps one L0C buffer). Such a tile would need several L0 passes, which the model does "
                f"not charge, so it is refused; allowed: tile_m x tile_n <= {cap // 4}"
            )
    if rules.k_align:
        kf = int(budget("cube_k_fractal_int8" if w8a8 else "cube_k_fractal_fp16"))
        for field, k in (("h", s.h), ("hidden_dim / 2", s.hidden_dim // 2)):
            if k % kf:
                raise ScenarioError(
                    f"{field} = {k}: a GEMM's K must be a multiple of the cube's fractal K {kf} "
                    f"({kern['quant']}); allowed: multiples of {kf}"
                )
    if rules.ub_dispatch:
        a = int(budget("ub_align_bytes"))
        row = align(s.h + ROW_PAD_BYTES if w8a8 else 2 * s.h, a)
        tile = DISPATCH_BATCH_ROWS * row
        need = int(budget("dispatch_ub_buffers")) * tile
        cap = int(budget("dispatch_ub_budget_bytes"))
        if need > cap:
            raise ScenarioError(
                f"dispatch does not fit its UB budget: {int(budget('dispatch_ub_buffers'))} buffers x "
                f"{DISPATCH_BATCH_ROWS} rows x {row} B (h = {s.h}) = {need} B > {cap} B ({who}'s host "
                f"check); allowed: a smaller h"
            )
    if rules.front:
        w = s.workload
        routes = w.tokens * w.topk
        path, cores = front_reorder_path(routes, s.h, w.world * w.local_experts)
        aiv = aic * int(raw["aiv_per_core"])
        if cores > aiv:
            raise ScenarioError(
                f"front reorder of {routes} routes per rank (tokens x topk) takes the {path} path on "
                f"{cores} sort cores (Pow4Ceil(ceil(routes / {int(budget('sort_loop_max_routes'))}))), more "
                f"than the {aiv} AIV of the die; allowed: tokens x topk with at most {aiv} sort cores"
            )


def check_routing_budgets(cfg: Config, rows_by_rank: Mapping[int, int]) -> None:
    """The budgets that depend on the routing, checked when the ranks' graphs are built: the rows
    a rank receives fit the kernel's ``maxOutputSize`` (the HCCL window is sized from it)."""
    rules = PROFILE_BUDGETS.get(cfg.profile, PROFILE_BUDGETS[None])
    if not rules.max_output_rows:
        return
    cap = int(budget("max_output_rows"))
    for rank, rows in sorted(rows_by_rank.items()):
        if rows > cap:
            raise ScenarioError(
                f"rank {rank} receives {rows} rows (routes to its experts), more than the kernel's "
                f"maxOutputSize {cap} (the HCCL window holds maxOut x (K + 32) bytes per third); allowed: "
                f"a routing that sends at most {cap} rows to every rank"
            )


def _link_table(merged: Sequence[Table]) -> Links:
    """One resolved link per stage edge, keyed by ``(producer, consumer)``."""
    links: Links = {}
    for lk in merged:
        links[(lk["producer"], lk["consumer"])] = LinkCfg(**{f: lk[f] for f in LINK_FIELDS})
    return links


def _edge_rules(links: Links) -> None:
    """What one edge may be: on-chip only through the fixpipe (gmm1->activation, gmm2->combine),
    colocated and with at least one slot; a GM hand-off is unbounded (depth 0) and never
    colocated; per-chunk readiness only on activation->gmm2 behind an on-chip activation, with
    at least 2 chunks, and chunks only with per-chunk readiness."""
    for a, b in EDGES:
        lk = links[(a, b)]
        w = f"options.links[{a}->{b}]"
        if lk.location == "onchip":
            if (a, b) not in (("gmm1", "activation"), ("gmm2", "combine")):
                raise NotModelledError(
                    f"{w}.location = 'onchip': no on-chip path from {a} to {b} is modelled "
                    "(on-chip hand-off exists only through the fixpipe L0C->UB: gmm1->activation, "
                    "gmm2->combine)"
                )
            if not lk.colocated_by_hardware:
                raise ScenarioError(
                    f"{w}: location 'onchip' needs colocated_by_hardware = true (on-chip data never leaves "
                    f"its core)"
                )
            if lk.depth < 1:
                raise ScenarioError(
                    f"{w}.depth = {lk.depth}: an on-chip link needs at least 1 slot; allowed: 1..64"
                )
        else:
            if lk.colocated_by_hardware:
                raise ScenarioError(f"{w}: colocated_by_hardware = true only applies to location 'onchip'")
            if lk.depth != 0:
                hint = "; for dispatch->gmm1 use policy.dispatch_lookahead" if (a, b) == EDGES[0] else ""
                raise NotModelledError(
                    f"{w}.depth = {lk.depth}: a bounded GM workspace is not modelled (allowed: 0 = "
                    f"unbounded){hint}"
                )
        if lk.readiness == "per_chunk":
            if (a, b) != ("activation", "gmm2"):
                raise NotModelledError(
                    f"{w}.readiness = 'per_chunk': not modelled on this edge (allowed on activation->gmm2 "
                    f"only)"
                )
            if links[("gmm1", "activation")].location != "onchip":
                raise NotModelledError(
                    f"{w}.readiness = 'per_chunk' needs per-tile activation (gmm1->activation on-chip): with "
                    "segment activation every activation event covers all K columns, so chunks would "
                    "change nothing"
                )
            if lk.chunks < 2:
                raise ScenarioError(f"{w}.chunks = {lk.chunks}: per_chunk readiness needs chunks >= 2")
        elif lk.chunks != 1:
            raise NotModelledError(
                f"{w}.chunks = {lk.chunks}: chunks are only read with readiness = 'per_chunk'"
            )


def _link_combination_rules(s: Scenario, kern: Table, opt: Table, links: Links) -> None:
    """Links against other knobs: SwiGLU segments apply to a GM activation hand-off only; URMA
    combine reads GM, and so do the per-expert and by-source combines (an on-chip GMM2 slot is
    consumed per tile only); staged barriers with an on-chip link would deadlock."""
    if links[("gmm1", "activation")].location == "onchip" and s.kernel.swiglu_segments is not None:
        raise NotModelledError(
            "kernel.swiglu_segments is set but gmm1->activation is on-chip (activation runs per GMM1 tile); "
            "segments only apply to a GM hand-off"
        )
    if kern["topo_urma"] and links[("gmm2", "combine")].location == "onchip":
        raise NotModelledError(
            "options.links[gmm2->combine] on-chip with kernel.topo_urma: URMA combine PUTs are batched per "
            "wave from GM"
        )
    if links[("gmm2", "combine")].location == "onchip" and not kern["topo_urma"]:
        # only the per-tile combine gives a GMM2 tile's on-chip slot back (build/combine.py,
        # tile_combine); the per-expert and by-source combines read whole experts after GMM2,
        # so the slots their tiles take would never come back: a deadlock once a core's tiles
        # outnumber its slots, the link silently unused otherwise
        g = opt["combine_granularity"]
        routes = s.workload.tokens * s.workload.topk
        small = routes <= kern["combine_small_max_routes"]
        mode = g if g != "auto" else "per_tile" if small else "per_expert"
        if mode != "per_tile":
            why = (
                f" ('auto' picks it: tokens x topk = {routes} > kernel.combine_small_max_routes = "
                f"{kern['combine_small_max_routes']})"
                if g == "auto"
                else ""
            )
            raise NotModelledError(
                f"options.links[gmm2->combine] on-chip with options.combine_granularity = {mode!r}{why}: "
                "only the per-tile combine consumes a GMM2 tile's on-chip slot; the per-expert and "
                "by-source combines read whole experts from GM after GMM2; allowed: "
                "combine_granularity 'per_tile' with an on-chip gmm2->combine link, or a GM link"
            )
    if opt["barriers"] == "staged" and any(lk.location == "onchip" for lk in links.values()):
        raise ScenarioError(
            "options.barriers = 'staged' with an on-chip link: the producer stage cannot finish while its "
            "on-chip slots wait for a consumer held behind the barrier (a deadlock); allowed: 'fused', "
            "or GM links"
        )
    if "AIC" in opt["late_bind_pools"]:
        onchip = [
            f"{a}->{b}" for (a, b), lk in links.items() if a in ("gmm1", "gmm2") and lk.location == "onchip"
        ]
        if onchip:
            raise NotModelledError(
                f"options.late_bind_pools = {list(opt['late_bind_pools'])} with the on-chip link "
                f"{', '.join(onchip)}: an on-chip slot belongs to the core its tile binds to, and slots "
                "per core chosen at binding time are not modelled (one pool for the whole rank would let "
                "a core hold more tiles than its slots); allowed: pinned cube tiles, or a GM link "
                "(options.links location = 'gm')"
            )


def _read_only_with_rules(s: Scenario, kern: Table, opt: Table, links: Links) -> None:
    """A knob the scenario sets is refused where the model would not read it: the combine
    small-path threshold is read only by ``combine_granularity = 'auto'`` on the peer-write path;
    with GMM1's output handed to the activation on-chip, the activation of a tile runs on the
    tile's own core (:func:`~moeopt.megamoe.build.activation.tile_activation`), so neither the
    activation group's cores nor the number of active SwiGLU cores is read. Only the scenario's
    own value is judged: a profile default (pto-a2a3 sets the threshold, pto-a2a3-v1 the SwiGLU
    rule) is never the user's doing, so it cannot trip the rule."""
    if links[("gmm1", "activation")].location == "onchip":
        _onchip_activation_rules(s)
    mine = s.kernel.combine_small_max_routes
    if mine is None:
        return
    if opt["combine_granularity"] != "auto":
        raise FIELDS.unread(
            "kernel.combine_small_max_routes",
            mine,
            f"options.combine_granularity = {opt['combine_granularity']!r} (the threshold picks the small or "
            "large combine path under 'auto' only)",
            "options.combine_granularity = 'auto'",
            NotModelledError,
        )
    if kern["topo_urma"]:
        raise FIELDS.unread(
            "kernel.combine_small_max_routes",
            mine,
            "kernel.topo_urma = true (URMA combine is batched PUTs; the small / large path choice is "
            "the peer-write kernel's)",
            "kernel.topo_urma = false",
            NotModelledError,
        )


def _onchip_activation_rules(s: Scenario) -> None:
    """With ``gmm1->activation`` on-chip the activation's placement follows GMM1's tiles: the
    scenario's own ``options.core_groups.activation.cores`` and ``options.swiglu_active`` are
    refused (pinned, the cores were ignored; late-bound, a tile on a core outside them could not
    be placed at all)."""
    read_with = "options.links gmm1->activation location = 'gm' (activation per SwiGLU segment)"
    context = "gmm1->activation on-chip (the activation of each GMM1 tile runs on that tile's own core"
    groups = s.options.core_groups
    if isinstance(groups, Mapping) and "cores" in groups.get("activation", {}):
        cores = groups["activation"]["cores"]
        raise FIELDS.unread(
            "options.core_groups.activation.cores",
            cores_text(cores),
            context + ", so GMM1's group places it)",
            read_with,
            NotModelledError,
        )
    if s.options.swiglu_active is not None:
        raise FIELDS.unread(
            "options.swiglu_active",
            s.options.swiglu_active,
            context + ": there are no segments whose rows are split over active cores)",
            read_with,
            NotModelledError,
        )


def cores_text(cores: Sequence[int]) -> str:
    """A sorted core list as a scenario writes it: ``(0, 1, 2, 3, 8)`` -> ``'0-3,8'``."""
    parts: list[str] = []
    run: list[int] = []
    for c in cores:
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


def _core_group_rules(raw: Any, roles: Mapping[str, str], aic: int, experts: int) -> dict[str, CoreGroup]:
    """Which cores run each stage: every stage on every core (``shared``), the V1 kernel's fixed
    groups (``v1_fixed``), or a per-stage table over ``shared``; a table names existing cores
    only, and a join (a group taking over another's cores from some expert on) is modelled
    between the two GMM stages only."""
    every = tuple(range(aic))
    shared = {
        "gmm1": CoreGroup(every, "AIC"),
        "gmm2": CoreGroup(every, "AIC"),
        **{st: CoreGroup(every, roles.get(st, "AIV")) for st in VECTOR_STAGES},
    }
    if raw == "shared":
        return shared
    if raw == "v1_fixed":
        return _v1_fixed_groups(aic, experts)
    out = dict(shared)
    for st, g in dict(raw).items():
        base = shared[st]
        cores = tuple(g.get("cores", base.cores))
        bad = [c for c in cores if c >= aic]
        if bad:
            raise ScenarioError(
                f"options.core_groups.{st}.cores names core(s) {bad}; allowed: 0..{aic - 1} (aic_num = {aic})"
            )
        join = g.get("join")
        out[st] = CoreGroup(cores, g.get("role", base.role), join, int(g.get("join_from_expert", 0)))
    for st, g in out.items():
        if g.join is None and g.join_from_expert:
            raise ScenarioError(
                f"options.core_groups.{st}.join_from_expert = {g.join_from_expert}: has no effect without "
                f"options.core_groups.{st}.join; set join (the stage whose cores this group takes over) "
                f"or leave join_from_expert at 0"
            )
        if g.join is not None and st in VECTOR_STAGES:
            raise NotModelledError(
                f"options.core_groups.{st}.join = {g.join!r}: joining another group's cores is modelled "
                f"for the GMM stages only (the V1 kernel's GMM2 group taking over GMM1's cores); "
                f"allowed for {st}: no join"
            )
        if g.join is not None and (st in CUBE_STAGES) != (g.join in CUBE_STAGES):
            raise ScenarioError(
                f"options.core_groups.{st}.join = {g.join!r}: a group can only join a stage on the same "
                f"kind of unit "
                f"(cube stages: {', '.join(CUBE_STAGES)}; vector stages: {', '.join(VECTOR_STAGES)})"
            )
    return out


def _v1_fixed_groups(aic: int, experts: int) -> dict[str, CoreGroup]:
    """The V1 kernel's fixed groups, split 2:1 between the GMM1 and GMM2 sides."""
    # hardware.md §2 "V1 fixed groups" at 24 AIC: GMM1 on AIC 0..15, GMM2 on 16..23 joined by the
    # GMM1 group once GMM1 is done (from expert E-3 on), dispatch on AIV0 and SwiGLU on AIV1 of
    # blocks 0..15, combine on AIV0 of blocks 16..23. Other core counts keep the 2:1 split.
    if aic < 3:
        raise ScenarioError(f"options.core_groups = 'v1_fixed' needs aic_num >= 3, got {aic}")
    n1 = round(aic * 2 / 3)
    g1, g2 = tuple(range(n1)), tuple(range(n1, aic))
    return {
        "gmm1": CoreGroup(g1, "AIC"),
        "gmm2": CoreGroup(g2, "AIC", join="gmm1", join_from_expert=max(0, experts - 3)),
        "dispatch": CoreGroup(g1, "AIV0"),
        "activation": CoreGroup(g1, "AIV1"),
        "combine": CoreGroup(g2, "AIV0"),
    }


def _granularity_rules(opt: Table, kern: Table) -> dict[str, int]:
    """Units per event, 1 for every stage not listed; packing combine windows is modelled for
    per-expert windows and URMA only, not for per-tile ones."""
    eg = dict.fromkeys(STAGES, 1)
    eg.update(dict(opt["event_granularity"]))
    if eg["combine"] != 1 and opt["combine_granularity"] == "per_tile" and not kern["topo_urma"]:
        raise NotModelledError(
            f"options.event_granularity.combine = {eg['combine']}: packing per-tile combine windows is not "
            "modelled; it applies to combine_granularity 'per_expert' (or 'auto' on the large path) and URMA"
        )
    return eg


def _registered_name_rules(pol: Table, opt: Table) -> None:
    """Every named rule in force (the profile's too) is registered in this process."""
    for name, kind in (
        ("scheduling", "policy"),
        ("wave_packing", "wave_packer"),
        ("core_assignment", "core_assignment"),
        ("restructure", "restructure"),
    ):
        check_registered(f"policy.{name}", pol[name], kind)
    check_registered("options.builder", opt["builder"], "builder")
    check_registered("options.tile_grid", opt["tile_grid"], "tile_grid")


def _wave_rules(pol: Table, opt: Table) -> None:
    """With a look-ahead limit, the lag stays below it: GMM1 of wave w would otherwise wait for
    dispatch of wave w + lag, which waits for GMM1 of wave w + lag - lookahead >= w (a cycle).
    Staged barriers take no look-ahead: every GMM1 event waits for every dispatch event there, so
    a dispatch wave waiting for GMM1 is a cycle (or, with no more waves than the look-ahead,
    never waits at all)."""
    look, lag = pol["dispatch_lookahead"], pol["dispatch_lag"]
    if look and opt["barriers"] == "staged":
        raise ScenarioError(
            f"policy.dispatch_lookahead = {look} with options.barriers = 'staged': GMM1 starts only after "
            "every dispatch event, so dispatch cannot wait for GMM1 (a dependency cycle); allowed: "
            "dispatch_lookahead = 0 (no limit) with 'staged', or options.barriers = 'fused'"
        )
    if look and lag is not None and lag >= look:
        raise ScenarioError(
            f"policy.dispatch_lag = {lag} with policy.dispatch_lookahead = {look}: the lag must be "
            f"smaller than the look-ahead (allowed: 0 <= dispatch_lag < {look}), or set "
            f"dispatch_lookahead = 0 for no limit"
        )


def _v1_knob_rules(s: Scenario, opt: Table, groups: Mapping[str, CoreGroup]) -> dict[str, Any]:
    """The knobs of the V1 kernel's orchestration, resolved for this shape; each only where it
    changes something. ``kernel_rule`` reads the V1 kernel's shape table (tiling_builder.cpp@HEAD
    L120-137, overview_v1.md "关键 tiling 参数", for K 7168 / N 4096 / topK 8 / 16 experts):

    * ``gmm2_join_check``: 8 ranks: expert 12 at M = 16, else 13; 16 ranks: 11; other rank counts
      (not in the table): 13, assumed;
    * ``combine_start_after``: M = 16, 128 -> 3; 1024, 2048 -> 2; 32, 64, 512 -> 0; other M (not in
      the table): 0, assumed;
    * ``swiglu_active``: 8 at M = 16, else 16 (at most the activation group).

    A join check needs a GMM2 group that joins GMM1's cores; the phase-1 expert count only
    applies to the two-phase unpermute; a group of GMM1 experts on every core needs GMM1 and
    GMM2 on different cores."""
    w = s.workload
    m, world = w.tokens, w.world
    out: dict[str, Any] = {}
    check = opt["gmm2_join_check"]
    if check == "kernel_rule":
        check = {8: 12 if m == 16 else 13, 16: 11}.get(world, 13)
    if check != "none" and groups["gmm2"].join != "gmm1":
        raise ScenarioError(
            f"options.gmm2_join_check = {opt['gmm2_join_check']!r}: GMM2's core group does not join GMM1's "
            "(options.core_groups.gmm2.join = 'gmm1', as in 'v1_fixed'); allowed here: 'none'"
        )
    out["gmm2_join_check"] = None if check == "none" else int(check)
    start = opt["combine_start_after"]
    if start == "kernel_rule":
        start = {16: 3, 128: 3, 1024: 2, 2048: 2}.get(m, 0)
    out["combine_start_after"] = None if start == "none" else int(start)
    members = len(groups["activation"].cores) * (2 if groups["activation"].role == "AIV" else 1)
    active = opt["swiglu_active"]
    if active == "kernel_rule":
        active = 8 if m == 16 else 16
    out["swiglu_active"] = members if active == "all" else min(int(active), members)
    if opt["unpermute"] != "two_phase" and s.options.unpermute_ready_experts is not None:
        raise ScenarioError(
            f"options.unpermute_ready_experts = {s.options.unpermute_ready_experts}: applies to "
            "options.unpermute = 'two_phase' only; allowed here: leave it unset"
        )
    full = opt["gmm1_full_experts"]
    if full and set(groups["gmm1"].cores) >= set(groups["gmm2"].cores):
        raise ScenarioError(
            f"options.gmm1_full_experts = {full}: GMM1 already runs on every core GMM2 has "
            "(options.core_groups); allowed here: 0"
        )
    return out


def _orchestration_rules(
    s: Scenario,
    kern: Table,
    pol: Table,
    opt: Table,
    granularity: Mapping[str, int],
    groups: Mapping[str, CoreGroup],
    links: Links,
) -> None:
    """``options.orchestration = 'layered'`` is the URMA kernel's orchestration: it needs
    ``kernel.topo_urma``; its macro waves are ranges of whole experts by the kernel's own rule,
    so the knobs that shape ordinary waves (``p1_override``, ``p2_override``, ``policy.wave_packing``,
    the dispatch look-ahead and lag) and event packing of dispatch / combine (its batches are the
    kernel's 256-row ones) are not read; a staged barrier would wait on a combine that the next
    wave's receive precedes on the same AIV (a cycle). Every server is assumed directly connected
    (the kernel's cross-server relay is not modelled, and no knob asks for it)."""
    if opt["orchestration"] != "layered":
        return
    where = "options.orchestration = 'layered'"
    if not kern["topo_urma"]:
        raise ScenarioError(
            f"{where}: the layered macro waves are the URMA kernel's orchestration and need "
            "kernel.topo_urma = true; with peer writes (kernel.topo_urma = false) allowed: 'waves'"
        )
    unread = [
        (name, value, "0")
        for name, value in (
            ("p1_override", s.p1_override),
            ("p2_override", s.p2_override),
            ("policy.dispatch_lookahead", pol["dispatch_lookahead"]),
            ("policy.dispatch_lag", pol["dispatch_lag"]),
        )
        if value
    ]
    if s.policy.wave_packing is not None:
        unread.append(("policy.wave_packing", s.policy.wave_packing, "leave it unset"))
    unread += [
        (f"options.event_granularity.{st}", granularity[st], "1")
        for st in ("dispatch", "combine")
        if granularity[st] != 1
    ]
    if unread:
        name, value, allowed = unread[0]
        raise NotModelledError(
            f"{name} = {value!r} with {where}: not read (a layered macro wave is a range of whole "
            "experts chosen by the kernel's rule, received in batches of 256 rows and combined before "
            f"the next wave's receive); allowed here: {allowed}"
        )
    if groups["gmm2"].join is not None:
        raise ScenarioError(
            f"options.core_groups.gmm2.join = {groups['gmm2'].join!r} (options.core_groups = "
            f"{_short_groups(opt['core_groups'])}) with {where}: the joined cores would wait for the whole "
            "of GMM1 while each wave's GMM2 precedes the next wave's GMM1 on them (a cycle); allowed: "
            "a GMM2 group without join"
        )
    if opt["gmm1_full_experts"]:
        raise ScenarioError(
            f"options.gmm1_full_experts = {opt['gmm1_full_experts']} with {where}: GMM2's cores wait for "
            "the SYNCALL after the last of those experts before their first tile, but each wave's GMM2 "
            "runs before the next wave's GMM1 (a cycle); allowed: 0"
        )
    if links[("gmm1", "activation")].location == "gm" and kern["swiglu_segments"] != "per_expert":
        raise ScenarioError(
            f"kernel.swiglu_segments = {kern['swiglu_segments']!r} with {where} and gmm1->activation in GM: "
            "a segment over the experts of several macro waves would wait for a later wave's GMM1, which "
            "runs after this wave's GMM2 (a cycle); allowed: 'per_expert'"
        )
    if opt["barriers"] == "staged":
        raise ScenarioError(
            f"options.barriers = 'staged' with {where}: the next wave's receive precedes this wave's "
            "combine on the channel's AIV1, so a barrier before every combine would wait for a receive "
            "that waits for it (a cycle); allowed: 'fused'"
        )


def _restructure_rules(pol: Table, opt: Table, links: Links) -> None:
    """``policy.restructure = 'idle_core_stealing'`` (or ``'core_queues'``) queues and moves the
    tiles of the pinned GMM stages whose output goes to their consumer through GM: it needs one
    such stage, and the layered orchestration, whose per-core program order is the kernel's, keeps
    its tiles where they are."""
    if pol["restructure"] not in ("idle_core_stealing", "core_queues"):
        return
    where = f"policy.restructure = {pol['restructure']!r}"
    from moeopt.megamoe.stealing import GMM_CONSUMER, movable_stages

    onchip = {st: links[(st, GMM_CONSUMER[st])].location == "onchip" for st in GMM_CONSUMER}
    if not movable_stages(opt["late_bind_pools"], onchip):
        why = (
            "the cube is late-bound (options.late_bind_pools has 'AIC'): its tiles already bind at "
            "dispatch time"
            if "AIC" in opt["late_bind_pools"]
            else "both GMM stages hand their tiles to their consumer on chip (gmm1->activation and "
            "gmm2->combine), which ties each tile to its core"
        )
        raise ScenarioError(
            f"{where}: no GMM stage has pinned tiles that may move: {why}; allowed: 'none', or a "
            "pinned cube stage with a GM hand-off"
        )
    if opt["orchestration"] == "layered":
        raise ScenarioError(
            f"{where} with options.orchestration = 'layered': the layered kernel's per-core program "
            "order keeps each tile on its core; allowed: 'none'"
        )


def _short_groups(raw: Any) -> str:
    """``options.core_groups`` as a user wrote it: a name, or 'a table'."""
    return repr(raw) if isinstance(raw, str) else "a table"


# --------------------------------------------------------------------------- the resolved form
def _config(
    s: Scenario,
    raw: Table,
    aic: int,
    consts: dict[str, Const],
    links: Links,
    groups: dict[str, CoreGroup],
    granularity: dict[str, int],
    v1: Mapping[str, Any],
) -> Config:
    kern, pol, opt = raw["kernel"], raw["policy"], raw["options"]
    impl = IMPLEMENTATIONS.get(s.profile, IMPLEMENTATIONS[None])
    return Config(
        profile=s.profile,
        implementation=impl["id"],
        source_refs=tuple(impl["source_refs"]),
        h=s.h,
        hidden_dim=s.hidden_dim,
        aic_num=aic,
        aiv_per_core=int(raw["aiv_per_core"]),
        p1_override=s.p1_override,
        p2_override=s.p2_override,
        tile_m=kern["tile_m"],
        tile_n=kern["tile_n"],
        tile_k=kern["tile_k"],
        l1_stages=kern["l1_stages"],
        quant=kern["quant"],
        topo_urma=kern["topo_urma"],
        swizzle_n=kern["swizzle_n"],
        swiglu_segments=kern["swiglu_segments"],
        combine_small_max_routes=kern["combine_small_max_routes"],
        front_reorder=kern["front_reorder"],
        dispatch_lookahead=pol["dispatch_lookahead"],
        dispatch_lag=pol["dispatch_lag"],
        scheduling=pol["scheduling"],
        wave_packing=pol["wave_packing"],
        core_assignment=pol["core_assignment"],
        core_cursor=pol["core_cursor"],
        restructure=pol["restructure"],
        links=MappingProxyType(links),
        combine_granularity=opt["combine_granularity"],
        late_bind_pools=tuple(opt["late_bind_pools"]),
        bandwidth_contention=opt["bandwidth_contention"],
        core_groups=MappingProxyType(groups),
        event_granularity=MappingProxyType(granularity),
        barriers=opt["barriers"],
        builder=opt["builder"],
        tile_grid=opt["tile_grid"],
        roles=MappingProxyType(dict(opt["roles"])),
        sync_protocol=opt["sync_protocol"],
        gmm1_full_experts=int(opt["gmm1_full_experts"]),
        gmm2_join_check=v1["gmm2_join_check"],
        combine_start_after=v1["combine_start_after"],
        swiglu_active=v1["swiglu_active"],
        unpermute=opt["unpermute"],
        unpermute_ready_experts=int(opt["unpermute_ready_experts"]),
        gmm1_small_m_rebalance=bool(opt["gmm1_small_m_rebalance"]),
        orchestration=opt["orchestration"],
        routing=s.workload.routing,
        constants=MappingProxyType(consts),
    )
