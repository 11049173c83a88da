"""Exit codes shared by every entry point, so scripts and cron wrappers can act on them.

The numbers follow sysexits.h where one fits; README.md lists them.
"""

OK = 0            # done; also "AI_ENABLED=false, nothing to do" and "documentation does not cover it"
FAILURE = 1       # an unexpected error; the log has the traceback
USAGE = 2         # bad command line (argparse's own code)
NO_INDEX = 66     # EX_NOINPUT: no index yet; run ai-index
UNAVAILABLE = 69  # EX_UNAVAILABLE: no model server reachable (ai-query printed the search results)
MISMATCH = 65     # EX_DATAERR: the index was built with another embedding backend/model; use --force
LOCKED = 75       # EX_TEMPFAIL: another run holds the lock past the timeout; try again later
CONFIG = 78       # EX_CONFIG: the configuration is invalid (the message names the key)
INTERRUPTED = 130  # 128 + SIGINT: stopped with Ctrl-C; nothing half-written was kept
