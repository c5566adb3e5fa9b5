"""Where the project's data folders live (topologies, drivers, suites, profiles, report schemas)."""

from __future__ import annotations

from pathlib import Path

# The harness runs from its source tree (an editable install); its data folders sit beside the package.
PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent
TOPOLOGIES_DIR = PROJECT_ROOT / "topologies"
DRIVERS_DIR = PROJECT_ROOT / "drivers_under_test"
REFERENCE_DRIVER_DIR = DRIVERS_DIR / "reference"
MUTANTS_DIR = DRIVERS_DIR / "mutants"
SUITES_DIR = PROJECT_ROOT / "suites"
PROFILES_DIR = PROJECT_ROOT / "profiles"
REPORTS_DIR = PROJECT_ROOT / "reports"
