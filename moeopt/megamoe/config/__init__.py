"""Layer 0 of the MegaMoE adapter: constants with provenance, calibration domains, profiles."""
