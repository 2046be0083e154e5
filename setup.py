"""The one native part: the log readers' line scanner (src/stethoscope/logtext/_linescan.c).

It is optional: where no C compiler is found the build goes on without it and the readers use their
pure-Python paths (same answers, slower); `stethoscope.logtext.linescan.available()` says which.
Everything else about the package is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("stethoscope.logtext._linescan", ["src/stethoscope/logtext/_linescan.c"],
                             depends=["src/stethoscope/logtext/_numbers.h",  # included by _linescan.c
                                      "src/stethoscope/logtext/_scan.h"],
                             extra_compile_args=["-O2"], optional=True)])
