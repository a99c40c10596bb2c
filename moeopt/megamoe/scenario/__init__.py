"""Scenario layer: :class:`Workload`, :class:`Scenario`, :func:`load_scenario` and overrides.

A scenario is what a user writes (a TOML file or constructor calls): the workload shape, the
model sizes, a profile, and the knobs that differ from the profile. Three modules, one step each:

* :mod:`~moeopt.megamoe.scenario.schema`: the sections and their field tables; every field is
  checked when the object is made;
* :mod:`~moeopt.megamoe.scenario.resolve`: global defaults <- profile <- scenario merged once
  (:func:`effective_table`) and the rules that span fields (on-chip links, readiness, core
  groups, not-modelled values, missing constants), giving one :class:`Config`;
* :mod:`~moeopt.megamoe.scenario.files`: nested mappings, TOML files and dotted-path overrides.

Nothing is half-applied: an override or a file is turned into a new scenario in one step, or an
error says which field, which value, and what is allowed.

Shapes, the classic trap: ``h`` is the model hidden size (GMM1's K and GMM2's N);
``hidden_dim`` is GMM1's output width = 2 x intermediate size (SwiGLU gate + up), so GMM2's K
is ``hidden_dim / 2``. A run labelled ``h5120_i4608`` is ``h = 5120, hidden_dim = 9216``.
"""

from moeopt.megamoe.scenario.files import (
    TOMLDecodeError,
    anchor_workload_file,
    apply_overrides,
    load_scenario,
    parse_override_value,
    read_scenario_table,
    scenario_from_dict,
)
from moeopt.megamoe.scenario.resolve import REQUIRED_ALWAYS, REQUIRED_URMA, effective_table, resolve
from moeopt.megamoe.scenario.schema import (
    CORE_GROUP_FIELDS,
    CUBE_STAGES,
    EDGES,
    FIELDS,
    KEY_HINTS,
    LINK_FIELDS,
    NOT_MODELLED_QUANTS,
    OPTION_FIELDS,
    OVERRIDE_SCHEMA,
    QUANTS,
    ROLES,
    ROUTINGS,
    SECTIONS,
    STAGES,
    TOP_FIELDS,
    TRAP_HINT,
    VECTOR_STAGES,
    Config,
    CoreGroup,
    Kernel,
    Link,
    LinkCfg,
    Options,
    PolicyConfig,
    Scenario,
    Workload,
    check_bool,
    check_choice,
    check_int,
    check_num,
    check_registered,
    parse_cores,
    unknown_key,
)

__all__ = [
    "CORE_GROUP_FIELDS",
    "CUBE_STAGES",
    "EDGES",
    "FIELDS",
    "KEY_HINTS",
    "LINK_FIELDS",
    "NOT_MODELLED_QUANTS",
    "OPTION_FIELDS",
    "OVERRIDE_SCHEMA",
    "QUANTS",
    "REQUIRED_ALWAYS",
    "REQUIRED_URMA",
    "ROLES",
    "ROUTINGS",
    "SECTIONS",
    "STAGES",
    "TOP_FIELDS",
    "TRAP_HINT",
    "VECTOR_STAGES",
    "Config",
    "CoreGroup",
    "Kernel",
    "Link",
    "LinkCfg",
    "Options",
    "PolicyConfig",
    "Scenario",
    "TOMLDecodeError",
    "Workload",
    "anchor_workload_file",
    "apply_overrides",
    "check_bool",
    "check_choice",
    "check_int",
    "check_num",
    "check_registered",
    "effective_table",
    "load_scenario",
    "parse_cores",
    "parse_override_value",
    "read_scenario_table",
    "resolve",
    "scenario_from_dict",
    "unknown_key",
]
