"""``python -m backtrail.native_host``: what the launcher written by ``backtrail install``
runs."""

from backtrail.native_host import main

main()
