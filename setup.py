"""Package discovery only (metadata is in pyproject.toml).

The top-level callbacks/, datamodules/, kernels/ and configs/ folders are installed as
litlab.callbacks, litlab.datamodules, litlab.kernels and litlab.configs; their sub-packages are
found here so that adding one never needs an edit to the packaging.
"""

from setuptools import find_packages, setup

MAPPED_FOLDERS = ("callbacks", "datamodules", "kernels", "configs")

packages = find_packages("src")
for folder in MAPPED_FOLDERS:
    packages += [f"litlab.{name}" for name in find_packages(".", include=[folder, f"{folder}.*"])]

setup(packages=packages)
