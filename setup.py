"""Build script for the compiled parts of visgym (Cython rasterizers, a MuJoCo loop).

Everything else about the package lives in pyproject.toml; this file only exists because the
extension modules need NumPy's include directory and Cython's compiler directives.
"""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

COMPILE_ARGS = ["-O3", "-ffast-math", "-fno-finite-math-only"]

MODULES = ("_raster", "_tiles", "_raster3d", "_jpeg", "_resize", "_blit", "_coeffs")  # render/<name>.pyx -> visgym.render.<name>

KERNEL_MODULES = ("_mjloop",)  # kernels/<name>.pyx -> visgym.kernels.<name>

# Modules whose floating point must be IEEE operation for operation (they reproduce Pillow's
# double arithmetic bit for bit): no -ffast-math, no fused multiply-adds.
EXACT_ARGS = {"_coeffs": ["-O2", "-fno-fast-math", "-ffp-contract=off"]}

extensions = [
    Extension(
        f"visgym.{package}.{name}",
        [f"{package}/{name}.pyx"],
        include_dirs=[numpy.get_include()],
        extra_compile_args=EXACT_ARGS.get(name, COMPILE_ARGS),
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for package, names in (("render", MODULES), ("kernels", KERNEL_MODULES))
    for name in names
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "nonecheck": False,
        },
    ),
)
