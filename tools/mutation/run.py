"""``mutmut`` itself, started so that processes spawned under it can start too.

Dask's nanny starts its workers with multiprocessing's *spawn*, which re-runs the parent's main script in each
new process. ``.venv/bin/mutmut`` imports mutmut at the top, and mutmut reads its configuration on import, from
the working directory: a test that ran from a temporary directory then spawned workers that died looking for
it. Here mutmut is imported only when this file is the main script, never when a worker re-runs it.
"""

import sys

if __name__ == "__main__":
    from mutmut.__main__ import cli

    sys.exit(cli())
