"""Build of the compiled search: one Cython module around a C++ header."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension(
            "leaseline_wgl._search",
            ["leaseline_wgl/_search.pyx"],
            language="c++",
            extra_compile_args=["-O2", "-std=c++17"],
        )],
        compiler_directives={"language_level": "3"},
    ),
)
