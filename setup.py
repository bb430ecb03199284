"""The one build step pyproject.toml cannot declare stably: the optional C extension."""

from setuptools import Extension, setup

# The append path's inner loop in C (see eventlog/native.py). Optional: where it cannot be
# built (no C compiler or OpenSSL headers), the install goes on and the pure-Python steps run.
setup(
    ext_modules=[
        Extension("eventlog._lines", ["eventlog/_lines.c"], libraries=["crypto"], optional=True)
    ]
)
