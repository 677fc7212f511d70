import gc
import sys

# The cyclic GC's passes over what the imports allocate find nothing (~50 collections, ~5 ms of a
# start, issue 26): off from here, until cli.main has imported what its command needs (serve then
# freezes those objects; see cli.main). The console script `groupd` starts at cli.main instead.
gc.disable()

from .cli import main  # noqa: E402

sys.exit(main())
