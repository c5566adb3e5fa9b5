"""Mutant driver keeps-socket-on-sigterm: exits on SIGTERM without shutting its CCI server down (cci.sock stays)."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from its folder: make the project root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import os  # noqa: E402

from cci_conformance.driver_sdk import main  # noqa: E402
from cci_conformance.driver_sdk import runner as sdk_runner  # noqa: E402
from drivers_under_test.reference.policy import ReferencePolicy  # noqa: E402


class Mutant(ReferencePolicy):
    pass


class HastyRuntime(sdk_runner.DriverRuntime):
    """Defect (S1.9): a clean stop deregisters (removes the registration socket) and exits at once, so the
    CCI server is never shut down and its socket file stays."""

    def stop(self):
        if self._servers:
            self._servers[-1].stop(grace=1).wait(2)  # the registration server, started last
        self.reg_socket.unlink(missing_ok=True)
        self.store.close()
        self.log.info("stopped")
        os._exit(0)


if __name__ == "__main__":
    sdk_runner.DriverRuntime = HastyRuntime
    main(Mutant)
