"""Where the project's data folders live (topologies, drivers, suites, fixtures, profiles, report schemas)."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# A built wheel carries copies of the data folders inside the package (setup.py copies them at build
# time); a source tree (the editable install) has them beside the package. The bundled copy wins.
BUNDLED_DIR = PACKAGE_DIR / "_bundled"
INSTALLED = (BUNDLED_DIR / "suites").is_dir()
# The folder holding suites/, fixtures/, topologies/, ...: the source root, or the bundled copy.
PROJECT_ROOT = BUNDLED_DIR if INSTALLED else PACKAGE_DIR.parent
TOPOLOGIES_DIR = PROJECT_ROOT / "topologies"
DRIVERS_DIR = PROJECT_ROOT / "drivers_under_test"
REFERENCE_DRIVER_DIR = DRIVERS_DIR / "reference"
MUTANTS_DIR = DRIVERS_DIR / "mutants"
DRA_REFERENCE_DIR = DRIVERS_DIR / "dra-reference"
DRA_MUTANTS_DIR = DRIVERS_DIR / "dra-mutants"  # dra-reference started with --mutant=NAME
SUITES_DIR = PROJECT_ROOT / "suites"
FIXTURES_DIR = PROJECT_ROOT / "fixtures"
PROFILES_DIR = PROJECT_ROOT / "profiles"
REPORTS_DIR = PROJECT_ROOT / "reports"
GO_API_DIR = PROJECT_ROOT / "api"  # the Go stubs of the CCI API (`init-driver --lang go` copies them)
# What a wheel bundles (setup.py); the mutants are the harness's self-test, not a vendor's tool.
BUNDLED_FOLDERS = ("suites", "fixtures", "topologies", "profiles", "reports/schemas", "api",
                   "drivers_under_test/reference")
BUNDLED_FILES = ("drivers_under_test/__init__.py",)
