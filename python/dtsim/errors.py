"""The exceptions of the dtsim module: what the dtsim command line reports as "dtsim: error: ..." with exit code 2.

Every error caused by the user's input (an unknown preset, a plan that does not fit the cluster, a file that does
not parse, a run whose estimated memory is above the limit) is a :class:`dtsim.Error`, with the same one-line
message the CLI prints. :class:`ConfigError` and :class:`FormatError` are also ``ValueError`` s.
"""


class Error(Exception):
    """Root of every error caused by user input (dtsim::Error)."""


class ConfigError(Error, ValueError):
    """A configuration (model, cluster, plan, calibration, option) that cannot be used (dtsim::ConfigError)."""


class FormatError(Error, ValueError):
    """A file whose syntax or structure cannot be read (dtsim::FormatError)."""


class InternalError(RuntimeError):
    """A broken internal invariant: a bug in dtsim, never caused by user input (dtsim::InternalError)."""


class SimulationCrashed(RuntimeError):
    """The process that ran a simulation ended without a result (a crash or a kill, e.g. by the OOM killer)."""
