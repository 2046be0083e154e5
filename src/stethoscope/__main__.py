"""`python -m stethoscope ...`: the same command line as the `stethoscope` script (for a checkout on
PYTHONPATH, or an environment whose scripts folder is not on PATH)."""

from stethoscope.cli.main import main

if __name__ == "__main__":
    main()
