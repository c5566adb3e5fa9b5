"""Root conftest: nothing but the plugin the suites share (loaded through its pytest11 entry point)."""
