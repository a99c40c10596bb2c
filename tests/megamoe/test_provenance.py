"""Item 8 (calibration domains with limits): every profile's domain carries the shape, topology
and compile point of its measurements; r["provenance"] lists the constants the run used, the
implementation constants included, and the form of every source reference is checked."""

from __future__ import annotations

import os

import pytest

import moeopt.megamoe as mm
from moeopt.megamoe.build.activation import swiglu_segments
from moeopt.megamoe.config.budgets import BUDGET_CONSTANTS
from moeopt.megamoe.config.calibration import HBM_COPY_DOMAIN, PTO_A2A3_DOMAIN, PTO_A2A3_V1_DOMAIN
from moeopt.megamoe.config.implementation import (
    IMPL,
    ROW_PAD_BYTES,
    SWIGLU_SPLIT_MIN_EXPERTS,
    SWIGLU_TAIL_EXPERTS,
)
from moeopt.megamoe.config.profiles import A8W8_DOMAIN, IMPLEMENTATIONS, PROFILES, profile_constants
from moeopt.megamoe.config.provenance import IMPL_REF, Const

BS72 = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "scenario_bs72.toml")
SEED002 = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "seed002_typical.toml")


def test_a8w8_domain_has_shape_limits():
    """Item 8: the megamoe-a8w8 domain had no shape limits, so tokens 4096, h 2048, hidden_dim
    1024 reported "inside domain"; its measurements (hardware.md §5) were at h 5120 /
    hidden_dim 9216, batch 36..8192, 28 cube cores, 256-row tiles."""
    from moeopt.megamoe.simulate import _implementation_and_domain  # what simulate reports

    _impl, far = _implementation_and_domain(
        mm.load_scenario(BS72, {"workload.tokens": 4096, "h": 2048, "hidden_dim": 1024})
    )
    assert far["out_of_domain"]
    assert "shape h = 2048, calibrated at 5120" in far["reasons"]
    _impl, many = _implementation_and_domain(mm.load_scenario(BS72, {"workload.tokens": 9000}))
    assert "shape tokens = 9000, calibrated over 36..8192" in many["reasons"]
    assert not mm.simulate(mm.load_scenario(BS72))["out_of_domain"]  # the seed's bs = 72 example
    for d in (A8W8_DOMAIN, PTO_A2A3_DOMAIN):
        assert d.shape, d.id
        assert d.topology, d.id
        assert d.compile_point, d.id


def test_provenance_lists_only_the_constants_the_run_used():
    """Item 8: r["provenance"] listed every constant of the profile; now only those the run
    read: a w8a8 peer-write run reads neither the fp16 cube rate nor the URMA rates, a URMA run
    reads them; the implementation constants it used are listed with their kernel source."""
    r = mm.simulate(mm.load_scenario(BS72))
    prov = r["provenance"]
    assert "cube_mac_per_us_fp16" not in prov
    assert not [n for n in prov if n.startswith("urma_")]
    assert {"cube_mac_per_us_int8", "gm_l1_bytes_per_us", "dispatch_batch_rows", "cube_m_align"} <= set(prov)
    assert prov["dispatch_batch_rows"]["tag"] == "impl"
    assert "dispatch.h@HEAD:25-31" in prov["dispatch_batch_rows"]["provenance"]
    urma = mm.simulate(mm.load_scenario(BS72, {"kernel.topo_urma": True}))["provenance"]
    assert {"urma_get_bytes_per_us", "urma_put_bytes_per_us", "urma_op_us"} <= set(urma)
    # the PTO kernel's large combine path reads its lanes; its buffers' budgets are listed
    pto = mm.simulate(mm.load_scenario(SEED002, {"workload.tokens": 1024}))["provenance"]
    assert pto["combine_large_lanes"]["value"] == 2
    assert {"l0c_bytes", "max_output_rows", "scale_bytes"} <= set(pto)
    small = mm.simulate(mm.load_scenario(SEED002, {"workload.tokens": 16}))["provenance"]
    assert "combine_large_lanes" not in small  # 16 x 8 routes <= 4096: the small path


def _all_constants() -> list[Const]:
    out = [c for p in (*PROFILES, None) for c in profile_constants(p).values()]
    return out + [x.const for x in IMPL.values()] + list(BUDGET_CONSTANTS.values())


def test_source_references_have_the_checked_form():
    """Item 8: every impl: source names the kernel file and lines (file[@rev]:lines), every
    measured: constant names a profile's domain, every spec: constant cites hardware.md or the
    source README, every assumed: one says why; the implementations' source_refs are
    file[@rev]:lines or a document reference."""
    domains = {A8W8_DOMAIN.id, PTO_A2A3_DOMAIN.id, PTO_A2A3_V1_DOMAIN.id, HBM_COPY_DOMAIN.id}
    for c in _all_constants():
        if c.tag == "impl":
            assert IMPL_REF.search(c.source), c
        elif c.tag == "measured":
            assert c.domain in domains, c
        elif c.tag == "spec":
            assert "hardware.md §" in c.source, c
        assert len(c.source) > 10, c
    for impl in IMPLEMENTATIONS.values():
        for ref in impl["source_refs"]:
            assert IMPL_REF.fullmatch(ref) or ("README" in ref and "hardware.md §" in ref), ref
    with pytest.raises(ValueError, match="impl: source must name the kernel file and lines"):
        Const("x", 1, "rows", "impl", "the kernel uses two")


def test_implementation_constants_are_what_the_builder_does():
    """Item 8: the constants moved out of the builder (and the rules it spells inline) describe
    what it builds: the SwiGLU segment rule, the packed row of a dispatched token."""
    class Ex:
        def __init__(self, i: int) -> None:
            self.index, self.shared = i, False

    cfg = mm.load_scenario(SEED002).config  # swiglu_segments = kernel_rule
    for n in range(1, 9):
        got = swiglu_segments(cfg, [Ex(i) for i in range(n)])
        if n >= SWIGLU_SPLIT_MIN_EXPERTS:
            assert got == [list(range(n - SWIGLU_TAIL_EXPERTS)), list(range(n - SWIGLU_TAIL_EXPERTS, n))]
        else:
            assert got == [list(range(n))]
    s = mm.load_scenario(BS72)
    (rg, _ranks), *_ = mm.build_graphs(s).values()
    # uniform bs = 72: 72 x 6 routes per source over 24 experts = 18 rows per expert and source,
    # 3 local experts x 7 remote sources x 18 rows, each h + 32 bytes
    assert rg.algo_remote_in_bytes == 3 * 7 * 18 * (s.h + ROW_PAD_BYTES)
