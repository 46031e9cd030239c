-- --helper (from .busted): runs before the spec files.
PROBE_HELPER = "loaded"
